package chart

import (
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/corralhq/corral/internal/browser"
)

func TestMain(m *testing.M) {
	code := m.Run()
	browser.Stop()
	os.Exit(code)
}

// Artifacts returns the folder for files a person looks at after a run
// (screenshots): $CORRAL_ARTIFACTS, or the test's temporary folder.
func artifacts(t *testing.T) string {
	if d := os.Getenv("CORRAL_ARTIFACTS"); d != "" {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		return d
	}
	return t.TempDir()
}

// surge is a page like a sim report's: a surge to 121 M devices over ten
// minutes, attempts per second, a failure share, and a clock-time chart as
// the dashboard draws.
func surge() Page {
	n := 600
	ts := make([]float64, n)
	conn, p0, att, fail := make([]float64, n), make([]float64, n), make([]float64, n), make([]float64, n)
	clock := make([]float64, n)
	for i := range n {
		t := float64(i)
		ts[i] = t
		clock[i] = 1764600000 + t
		up := 1 / (1 + math.Exp(-(t-120)/15))
		conn[i] = 1.21e8 * up
		p0[i] = 0.2 * conn[i]
		att[i] = 6e6 * math.Exp(-math.Abs(t-110)/20)
		fail[i] = 0.41 * math.Exp(-math.Abs(t-110)/30)
	}
	return Page{
		Title: "chart test: a surge",
		Intro: "<p>Four charts.</p>",
		Charts: []Chart{
			{Title: "Devices connected", YLabel: "devices", Times: ts, Series: []Series{{Name: "all", Values: conn}, {Name: "P0", Values: p0}}},
			{Title: "Connection attempts", YLabel: "attempts", Unit: "/s", Times: ts, View: [2]float64{60, 240}, Series: []Series{{Name: "attempts/s", Values: att}}},
			{Title: "Attempts failed", YLabel: "share of attempts", Format: Percent, Times: ts, Series: []Series{{Name: "failed", Values: fail}}},
			{Title: "Live: devices connected", YLabel: "devices", Axis: Clock, Times: clock, Series: []Series{{Name: "all", Values: conn}}},
		},
	}
}

// chartState is what the page reports of each drawn chart.
type chartState struct {
	Canvases int       `json:"canvases"`
	TicksX   string    `json:"ticksX"`
	TicksY   string    `json:"ticksY"`
	SplitsY  []float64 `json:"splitsY"`
	Legend   []string  `json:"legend"`
	Width    int       `json:"width"`
	Figure   int       `json:"figure"`
	XMin     float64   `json:"xMin"`
	XMax     float64   `json:"xMax"`
}

const stateJS = `Array.from(document.querySelectorAll("figure.corral-chart")).map((f) => {
  const u = f.corralChart && f.corralChart.plot;
  return {
    canvases: f.querySelectorAll("canvas").length,
    ticksX: f.dataset.ticksX || "", ticksY: f.dataset.ticksY || "",
    splitsY: u ? u.axes[1]._splits : [],
    legend: Array.from(f.querySelectorAll(".u-legend .u-series")).map((e) => e.textContent.trim()),
    width: u ? u.width : 0, figure: f.clientWidth,
    xMin: u ? u.scales.x.min : 0, xMax: u ? u.scales.x.max : 0,
  };
})`

// TestChartsRenderInChromium writes a page with WritePage, opens it from
// its file (no server, no network) in headless Chromium, and checks that
// every chart drew a canvas with SI tick labels that parse back to the
// values they label, legends with the series' names, hover values, the
// initial view, and a width that follows the page; no console errors. The
// screenshot goes to $CORRAL_ARTIFACTS (or the test's temporary folder).
func TestChartsRenderInChromium(t *testing.T) {
	browser.Need(t)
	dir := t.TempDir()
	path := filepath.Join(dir, "charts.html")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := WritePage(f, surge()); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	p := browser.Open(t, "file://"+path)
	p.WaitLoaded(t)
	var charts []chartState
	p.Eval(t, stateJS, &charts)
	if len(charts) != 4 {
		t.Fatalf("%d charts drawn, want 4", len(charts))
	}
	yTick := []*regexp.Regexp{
		regexp.MustCompile(`^(0|\d+ M)$`),
		regexp.MustCompile(`^(0|\d+(\.\d)? M/s|\d+ k/s)$`),
		regexp.MustCompile(`^(0|\d+ %)$`),
		regexp.MustCompile(`^(0|\d+ M)$`),
	}
	xTick := []*regexp.Regexp{
		regexp.MustCompile(`^\d+ (s|min)$`),
		regexp.MustCompile(`^\d+ (s|min)$`),
		regexp.MustCompile(`^\d+ (s|min)$`),
		regexp.MustCompile(`^\d\d:\d\d:\d\d$`),
	}
	for i, c := range charts {
		if c.Canvases == 0 {
			t.Errorf("chart %d: no canvas", i)
		}
		ys := strings.Split(c.TicksY, "|")
		if len(ys) < 3 {
			t.Errorf("chart %d: y ticks %q, want at least 3", i, c.TicksY)
		}
		for _, s := range ys {
			if !yTick[i].MatchString(s) {
				t.Errorf("chart %d: y tick %q does not match %s", i, s, yTick[i])
			}
		}
		for _, s := range strings.Split(c.TicksX, "|") {
			if !xTick[i].MatchString(s) {
				t.Errorf("chart %d: x tick %q does not match %s", i, s, xTick[i])
			}
		}
		// Each label is the value of its gridline.
		if len(c.SplitsY) != len(ys) {
			t.Errorf("chart %d: %d y labels for %d gridlines", i, len(ys), len(c.SplitsY))
		} else {
			for j, s := range ys {
				if v := parseTick(t, s); math.Abs(v-c.SplitsY[j]) > 1e-9*math.Max(1, math.Abs(c.SplitsY[j])) {
					t.Errorf("chart %d: label %q at gridline %v", i, s, c.SplitsY[j])
				}
			}
		}
		if c.Width < 200 || c.Width != c.Figure {
			t.Errorf("chart %d: plot %d px wide in a figure of %d px", i, c.Width, c.Figure)
		}
	}
	if got := strings.Join(charts[0].Legend, ";"); !strings.Contains(got, "all") || !strings.Contains(got, "P0") {
		t.Errorf("legend of chart 0: %q", got)
	}
	if charts[1].XMin != 60 || charts[1].XMax != 240 {
		t.Errorf("chart 1 shows %v to %v, want the view 60 to 240", charts[1].XMin, charts[1].XMax)
	}
	if charts[0].XMin != 0 || charts[0].XMax != 599 {
		t.Errorf("chart 0 shows %v to %v, want every point", charts[0].XMin, charts[0].XMax)
	}

	// Hover: the legend shows the values under the cursor, in SI.
	var legend []string
	p.Eval(t, `(() => {
  const u = document.querySelector("figure.corral-chart").corralChart.plot;
  u.setCursor({ left: u.valToPos(300, "x"), top: 10 });
  return Array.from(document.querySelectorAll("figure.corral-chart")[0].querySelectorAll(".u-legend .u-value")).map((e) => e.textContent);
})()`, &legend)
	if strings.Join(legend, ";") != "5 min 0 s;121 M;24.2 M" {
		t.Errorf("legend under the cursor at 300 s: %q, want 5 min 0 s;121 M;24.2 M", legend)
	}

	// The width follows the page.
	var width [2]int
	p.Eval(t, `new Promise((done) => {
  document.body.style.maxWidth = "500px";
  const f = document.querySelector("figure.corral-chart");
  const check = () => (f.corralChart.plot.width === f.clientWidth ? done([f.corralChart.plot.width, f.clientWidth]) : requestAnimationFrame(check));
  check();
})`, &width)
	if width[0] > 500 {
		t.Errorf("after narrowing the page the chart is %d px wide", width[0])
	}
	p.Eval(t, `document.body.style.maxWidth = ""`, nil)

	shot := filepath.Join(artifacts(t), "chart-test.png")
	p.Screenshot(t, shot)
	t.Logf("screenshot: %s", shot)
	if errs := p.Errors(); len(errs) > 0 {
		t.Errorf("console errors: %q", errs)
	}
}

// parseTick reads a tick label back as a number: "20 M" is 2e7, "1.5 k/s"
// 1500, "40 %" 0.4.
func parseTick(t *testing.T, s string) float64 {
	t.Helper()
	num, rest, _ := strings.Cut(s, " ")
	v, err := strconv.ParseFloat(num, 64)
	if err != nil {
		t.Errorf("tick %q: %v", s, err)
		return math.NaN()
	}
	switch {
	case rest == "%":
		return v / 100
	case strings.HasPrefix(rest, "k"):
		return v * 1e3
	case strings.HasPrefix(rest, "M"):
		return v * 1e6
	case strings.HasPrefix(rest, "G"):
		return v * 1e9
	}
	return v
}

// TestLiveChartInChromium is the dashboard's path: a page loads the assets
// from Handler (tags from Links), mounts an empty chart from Encode's JSON
// and appends points as an SSE handler would; the chart redraws with SI
// ticks for the new values and keeps at most maxPoints points.
func TestLiveChartInChromium(t *testing.T) {
	browser.Need(t)
	empty, err := Encode(Chart{Title: "Live attempts", Unit: "/s", Axis: Clock, Series: []Series{{Name: "attempts/s"}, {Name: "failed/s"}}})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/static/chart/", http.StripPrefix("/static/chart/", Handler()))
	mux.HandleFunc("/favicon.ico", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) })
	mux.HandleFunc("/chart.json", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(empty)
	})
	mux.HandleFunc("/live", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprintf(w, `<!doctype html><html><head>%s</head><body><div id="c" style="width:700px"></div><script>
fetch("/chart.json").then((r) => r.json()).then((doc) => {
  const h = corralChart.mount(document.getElementById("c"), doc.spec, doc.data);
  window.live = h;
  for (let i = 0; i < 50; i++) h.append(1764600000 + i, [2000 * i, i %% 10 === 0 ? null : 30 * i], 40);
  console.log("appended");
});
</script></body></html>`, Links("/static/chart/"))
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	p := browser.Open(t, srv.URL+"/live")
	p.WaitLine(t, "the points appended", func(s string) bool { return s == "appended" })
	var got struct {
		Points int    `json:"points"`
		First  int64  `json:"first"`
		TicksY string `json:"ticksY"`
		TicksX string `json:"ticksX"`
		Width  int    `json:"width"`
	}
	p.Eval(t, `new Promise((done) => requestAnimationFrame(() => {
  const el = document.getElementById("c"), u = window.live.plot;
  done({ points: u.data[0].length, first: u.data[0][0], ticksY: el.dataset.ticksY || "", ticksX: el.dataset.ticksX || "", width: u.width });
}))`, &got)
	if got.Points != 40 || got.First != 1764600010 {
		t.Errorf("%d points from %d, want the last 40 (from 1764600010)", got.Points, got.First)
	}
	ys := strings.Split(got.TicksY, "|")
	if len(ys) < 3 || ys[len(ys)-1] == "" || !regexp.MustCompile(`^\d+ k/s$`).MatchString(ys[len(ys)-1]) {
		t.Errorf("y ticks %q, want k/s labels up to about 98 k/s", got.TicksY)
	}
	if !regexp.MustCompile(`^\d\d:\d\d:\d\d(\|\d\d:\d\d:\d\d)+$`).MatchString(got.TicksX) {
		t.Errorf("time ticks %q", got.TicksX)
	}
	if got.Width != 700 {
		t.Errorf("width %d, want the div's 700", got.Width)
	}
	if errs := p.Errors(); len(errs) > 0 {
		t.Errorf("console errors: %q", errs)
	}
}
