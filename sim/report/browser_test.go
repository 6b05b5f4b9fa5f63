package report

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/corralhq/corral/internal/browser"
	"github.com/corralhq/corral/scenario"
	"github.com/corralhq/corral/sim"
)

func TestMain(m *testing.M) {
	code := m.Run()
	browser.Stop()
	os.Exit(code)
}

// surgeScenario is a CDN surge like the shipped one, smaller (12.1 M
// devices): weighted against multi-value DNS over 6 load balancers.
const surgeScenario = `name: surge
description: 12.1 M devices surge through a CDN onto 6 load balancers; weighted against multi-value DNS
duration: 10m
population:
  devices: 12100000
  initial: 121000
  priorities: [{name: P0, share: 0.05}, {name: P1, share: 0.35}, {name: P2, share: 0.60}]
geography: {pops: 60, distribution: zipf, zipf_exponent: 1.3, hosts_per_pop: 16, hosts_per_resolver: 8}
dns: {policy: weighted, ttl: 60s}
edge: {pick: random}
origins:
  - {name: lb, count: 6, headroom: 1.5, max_new_per_second: 20000, backlog: 40000, handshake_latency: 60ms, max_requests_per_second: 50000}
client:
  backoff: {policy: grpc}
  connect_timeout: 20s
  requests_per_second: 0.0167
traffic:
  arrivals: [{at: 30s, over: 20s, devices: 11979000}]
`

// surgeRuns runs surgeScenario with weighted and with multi-value DNS.
func surgeRuns(t *testing.T) (*scenario.Scenario, []*sim.Result) {
	t.Helper()
	sc, err := scenario.Decode("surge.yaml", []byte(surgeScenario))
	if err != nil {
		t.Fatal(err)
	}
	var rs []*sim.Result
	for _, policy := range []string{"weighted", "multivalue"} {
		v := *sc
		v.DNS.Policy = policy
		s, err := sim.New(&v, "dns="+policy)
		if err != nil {
			t.Fatal(err)
		}
		rs = append(rs, s.Run(nil))
	}
	return sc, rs
}

func artifacts(t *testing.T) string {
	if d := os.Getenv("CORRAL_ARTIFACTS"); d != "" {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		return d
	}
	return t.TempDir()
}

// TestReportInChromium writes the report of a weighted and a multi-value
// surge and opens it from its file in headless Chromium: it starts with
// what was simulated and a verdict per variant, every chart drew a canvas
// with SI tick labels ("10 M", "200 k/s", "40 %") and a legend naming its
// lines, the time axis opens on the surge, and the page logs no error.
// The screenshot is $CORRAL_ARTIFACTS/sim-report.png (default: the test's
// temporary folder).
func TestReportInChromium(t *testing.T) {
	browser.Need(t)
	sc, rs := surgeRuns(t)
	dir := t.TempDir()
	if _, err := WriteDir(dir, sc, rs); err != nil {
		t.Fatal(err)
	}
	p := browser.Open(t, "file://"+filepath.Join(dir, "report.html"))
	p.WaitLoaded(t)
	var doc struct {
		Headings []string `json:"headings"`
		Verdicts []string `json:"verdicts"`
		Figures  int      `json:"figures"`
		Canvases int      `json:"canvases"`
		Charts   []struct {
			Title  string   `json:"title"`
			TicksX string   `json:"ticksX"`
			TicksY string   `json:"ticksY"`
			Legend []string `json:"legend"`
			XMin   float64  `json:"xMin"`
			XMax   float64  `json:"xMax"`
		} `json:"charts"`
	}
	p.Eval(t, `({
  headings: Array.from(document.querySelectorAll("h2")).map((e) => e.textContent),
  verdicts: Array.from(document.querySelectorAll("p.verdict")).map((e) => e.textContent),
  figures: document.querySelectorAll("figure.corral-chart").length,
  canvases: document.querySelectorAll("figure.corral-chart canvas").length,
  charts: Array.from(document.querySelectorAll("figure.corral-chart")).map((f) => ({
    title: f.querySelector(".u-title") ? f.querySelector(".u-title").textContent : "",
    ticksX: f.dataset.ticksX || "", ticksY: f.dataset.ticksY || "",
    legend: Array.from(f.querySelectorAll(".u-legend .u-series th")).map((e) => e.textContent.trim()),
    xMin: f.corralChart.plot.scales.x.min, xMax: f.corralChart.plot.scales.x.max,
  })),
})`, &doc)
	if len(doc.Headings) < 4 || doc.Headings[0] != "What was simulated" || doc.Headings[1] != "Verdict" || doc.Headings[2] != "Comparison" {
		t.Errorf("sections %q, want What was simulated, Verdict, Comparison, ...", doc.Headings)
	}
	if len(doc.Verdicts) != 2 || !strings.HasPrefix(doc.Verdicts[0], "dns=weighted: ") || !strings.Contains(doc.Verdicts[0], "of connection attempts failed at the worst step") {
		t.Errorf("verdicts %q", doc.Verdicts)
	}
	if doc.Figures < 10 || doc.Canvases < doc.Figures {
		t.Errorf("%d figures, %d canvases", doc.Figures, doc.Canvases)
	}
	si := regexp.MustCompile(`^(0|\d+(\.\d+)? [kMG](/s)?|\d+(\.\d+)?(/s)?|\d+(\.\d+)? %)$`)
	units := map[string]bool{}
	for _, c := range doc.Charts {
		ys := strings.Split(c.TicksY, "|")
		if len(ys) < 2 {
			t.Errorf("%s: y ticks %q", c.Title, c.TicksY)
		}
		for _, y := range ys {
			if !si.MatchString(y) {
				t.Errorf("%s: y tick %q is not an SI label", c.Title, y)
			}
			for _, u := range []string{" M", " k/s", " %"} {
				if strings.Contains(y, u) {
					units[u] = true
				}
			}
		}
		if !strings.Contains(c.TicksX, " s") && !strings.Contains(c.TicksX, " min") {
			t.Errorf("%s: time ticks %q without a unit", c.Title, c.TicksX)
		}
		if len(c.Legend) < 2 || c.Legend[1] == "" {
			t.Errorf("%s: legend %q", c.Title, c.Legend)
		}
		// The surge starts at 30 s and is over within minutes: the view
		// opens there, not on the 10 minutes.
		if c.XMin > 30 || c.XMax >= 599 {
			t.Errorf("%s: shows %v to %v s, want the surge", c.Title, c.XMin, c.XMax)
		}
	}
	for _, u := range []string{" M", " k/s", " %"} {
		if !units[u] {
			t.Errorf("no y tick with %q", u)
		}
	}
	shot := filepath.Join(artifacts(t), "sim-report.png")
	p.Screenshot(t, shot)
	t.Logf("screenshot: %s", shot)
	if errs := p.Errors(); len(errs) > 0 {
		t.Errorf("console errors: %q", errs)
	}
}
