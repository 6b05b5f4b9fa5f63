package report

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/corralhq/corral/backoff"
	"github.com/corralhq/corral/scenario"
	"github.com/corralhq/corral/sim"
)

func run(t *testing.T) *sim.Result {
	t.Helper()
	sc := &scenario.Scenario{
		Name:       "r",
		Duration:   time.Minute,
		Population: scenario.Population{Devices: 10_000, Initial: 10_000, Priorities: []scenario.Priority{{Name: "P0", Share: 0.5}, {Name: "P1", Share: 0.5}}},
		DNS:        scenario.DNS{Policy: "multivalue"},
		Origins:    []scenario.Origin{{Name: "o", Count: 2, Headroom: 1.2, MaxNewPerSecond: 500, Backlog: 500}},
		Client:     scenario.Client{Backoff: backoff.Config{Policy: "full"}},
		Traffic:    scenario.Traffic{Disconnects: []scenario.Disconnect{{At: 5 * time.Second, Share: 1}}},
	}
	s, err := sim.New(sc, "v")
	if err != nil {
		t.Fatal(err)
	}
	return s.Run(nil)
}

func TestFiguresRenderPNGAndSVG(t *testing.T) {
	r := run(t)
	figs, err := Figures(r)
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, f := range figs {
		names[f.Name] = true
		var png, svg bytes.Buffer
		if err := f.Write(&png, "png"); err != nil || !bytes.HasPrefix(png.Bytes(), []byte("\x89PNG")) {
			t.Errorf("%s: png %v", f.Name, err)
		}
		if err := f.Write(&svg, "svg"); err != nil || !strings.Contains(svg.String(), "<svg") {
			t.Errorf("%s: svg %v", f.Name, err)
		}
	}
	for _, want := range []string{"connected", "attempts", "errors", "5xx", "origins"} {
		if !names[want] {
			t.Errorf("no %s figure", want)
		}
	}
	if err := figs[0].Write(&bytes.Buffer{}, "gif"); err == nil || !strings.HasPrefix(err.Error(), "report: ") {
		t.Errorf("gif: %v", err)
	}
}

func TestTables(t *testing.T) {
	r := run(t)
	var b bytes.Buffer
	if err := SummaryTable([]*sim.Result{r}).Write(&b); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "scenario r") || !strings.Contains(b.String(), "10.0k") {
		t.Errorf("summary table:\n%s", b.String())
	}
	b.Reset()
	if err := SeriesTable(r, 10*time.Second).Write(&b); err != nil {
		t.Fatal(err)
	}
	if rows := strings.Count(b.String(), "\n"); rows != 3+6 {
		t.Errorf("series table has %d lines, want 9:\n%s", rows, b.String())
	}
	if TenantTable([]*sim.Result{r}) != nil {
		t.Error("tenant table without poison")
	}
}
