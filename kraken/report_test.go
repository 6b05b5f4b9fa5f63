package kraken

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/corralhq/corral/hub"
	"github.com/corralhq/corral/internal/browser"
)

// reportRun is a short run with a publish and a drop, for the report.
func reportRun(t *testing.T) *Result {
	t.Helper()
	h := startHub(t, hub.Options{})
	sc := loadScenario(t, "smoke.yaml", smokeScenario)
	return runScenario(t, sc, Config{Targets: []string{h.url()}, Token: testToken(testSecret), PublishURL: "http://" + h.Addr().String(), APIKey: testAPIKey})
}

// TestReportIsSelfContained: WriteReport of a run is one HTML page with
// its four charts' data inside (connected devices, attempts per second,
// failures per priority, the origins' share), the storm, the messages and
// the latency percentiles, and nothing fetched from elsewhere.
func TestReportIsSelfContained(t *testing.T) {
	res := reportRun(t)
	var b bytes.Buffer
	if err := WriteReport(&b, res); err != nil {
		t.Fatal(err)
	}
	page := b.String()
	if n := strings.Count(page, `<figure class="corral-chart"><script type="application/json"`); n != 4 {
		t.Errorf("%d charts in the report, want 4", n)
	}
	for _, want := range []string{"kraken: smoke", "Devices connected", "Connection attempts", "Failed attempts by priority",
		"Share of the sessions per origin", "hub-a", "Latency percentiles", "publish → deliver P0", "<td>drop</td>", "P0 expected"} {
		if !strings.Contains(page, want) {
			t.Errorf("report lacks %q", want)
		}
	}
	for _, bad := range []string{`src="http`, `href="http`, `src="//`, `@import`} {
		if strings.Contains(page, bad) {
			t.Errorf("report fetches from elsewhere: %q", bad)
		}
	}
	// An empty result (a run stopped before its first second) is a page
	// without charts, not an error.
	b.Reset()
	if err := WriteReport(&b, newResult("empty")); err != nil || !strings.Contains(b.String(), "kraken: empty") {
		t.Errorf("empty result: %v", err)
	}
}

// TestReportOpensInChromium: the report opened from its file in headless
// Chromium draws a canvas in each of its four charts, with the
// priorities and the origin in the legends, and logs no error.
func TestReportOpensInChromium(t *testing.T) {
	browser.Need(t)
	res := reportRun(t)
	path := filepath.Join(t.TempDir(), "report.html")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := WriteReport(f, res); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	p := browser.Open(t, "file://"+path)
	p.WaitLoaded(t)
	var charts []struct {
		Canvases int      `json:"canvases"`
		Legend   []string `json:"legend"`
	}
	p.Eval(t, `Array.from(document.querySelectorAll("figure.corral-chart")).map((f) => ({
  canvases: f.querySelectorAll("canvas").length,
  legend: Array.from(f.querySelectorAll(".u-legend .u-series")).map((e) => e.textContent.trim()),
}))`, &charts)
	if len(charts) != 4 {
		t.Fatalf("%d charts drawn, want 4", len(charts))
	}
	for i, c := range charts {
		if c.Canvases == 0 {
			t.Errorf("chart %d: no canvas", i)
		}
	}
	if l := strings.Join(charts[2].Legend, " "); !strings.Contains(l, "P0") || !strings.Contains(l, "P2") {
		t.Errorf("failures legend %q, want the priorities", l)
	}
	if l := strings.Join(charts[3].Legend, " "); !strings.Contains(l, "hub-a") {
		t.Errorf("share legend %q, want the origin", l)
	}
	if errs := p.Errors(); len(errs) > 0 {
		t.Errorf("console errors: %v", errs)
	}
	if d := os.Getenv("CORRAL_ARTIFACTS"); d != "" {
		if err := os.MkdirAll(d, 0o755); err == nil {
			p.Screenshot(t, filepath.Join(d, "kraken-report.png"))
		}
	}
}
