package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/corralhq/corral/edge"
	"github.com/corralhq/corral/hub"
	"github.com/corralhq/corral/scenario"
)

const smallScenario = `name: small
duration: 2m
population:
  devices: 100000
  initial: 100000
  priorities: [{name: P0, share: 0.2}, {name: P1, share: 0.8}]
geography: {pops: 3}
dns: {policy: multivalue}
edge: {pick: random}
origins:
  - {name: lb, count: 2, headroom: 1.5, max_new_per_second: 2000, backlog: 4000}
client:
  backoff: {policy: full}
traffic:
  disconnects: [{at: 10s, share: 1}]
sweep:
  overload: [errors, adaptive]
`

func writeScenario(t *testing.T, text string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "s.yaml")
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestSimTableAndJSON(t *testing.T) {
	p := writeScenario(t, smallScenario)
	code, out, errs := corral(t, "sim", p)
	if code != 0 {
		t.Fatalf("sim: code %d, stderr %q", code, errs)
	}
	for _, want := range []string{"scenario small", "overload ", "errors", "adaptive", "att fail", "P0 down s"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	for _, l := range strings.Split(out, "\n") {
		if len(l) > 100 {
			t.Errorf("a line of %d columns: %q", len(l), l)
		}
	}
	code, out, errs = corral(t, "sim", p, "--wide")
	if code != 0 || !strings.Contains(out, "5xx peak") || !strings.Contains(out, "backlog") {
		t.Fatalf("sim --wide: code %d, stderr %q:\n%s", code, errs, out)
	}
	code, out, errs = corral(t, "sim", p, "--json", "--seed", "7")
	if code != 0 {
		t.Fatalf("sim --json: code %d, stderr %q", code, errs)
	}
	var doc struct {
		Scenario string
		Runs     []struct {
			Variant string
			Seed    uint64
			Devices int64
			Steps   []struct{ Connected int64 }
			Summary struct {
				FinalConnected int64 `json:"final_connected"`
			}
		}
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatalf("sim --json: %v\n%s", err, out)
	}
	if doc.Scenario != "small" || len(doc.Runs) != 2 || doc.Runs[0].Seed != 7 || len(doc.Runs[0].Steps) != 120 {
		t.Fatalf("sim --json: unexpected document %+v", doc)
	}
	if doc.Runs[1].Summary.FinalConnected != doc.Runs[1].Devices {
		t.Errorf("adaptive run ends with %d of %d connected", doc.Runs[1].Summary.FinalConnected, doc.Runs[1].Devices)
	}
}

func TestSimWritesReport(t *testing.T) {
	p := writeScenario(t, smallScenario)
	dir := t.TempDir()
	code, _, errs := corral(t, "sim", p, "--out", dir, "--every", "30s")
	if code != 0 {
		t.Fatalf("sim --out: code %d, stderr %q", code, errs)
	}
	html, err := os.ReadFile(filepath.Join(dir, "report.html"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`<figure class="corral-chart">`, "<h2>What was simulated</h2>", "Fleet: 100 k gRPC devices", "Sweep (one run per combination, each replacing the value above): overload errors, adaptive.", `<p class="verdict">overload=errors: `, `<p class="verdict">overload=adaptive: `} {
		if !strings.Contains(string(html), want) {
			t.Errorf("report.html lacks %q", want)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "result.json")); err != nil {
		t.Errorf("missing result.json: %v", err)
	}
}

func TestSimRejectsOutcomeField(t *testing.T) {
	p := writeScenario(t, smallScenario+"expected_error_rate: 0.01\n")
	code, _, errs := corral(t, "sim", p)
	if code == 0 || !strings.Contains(errs, "s.yaml:") || !strings.Contains(errs, "outcome") {
		t.Fatalf("sim accepted an outcome field: code %d, stderr %q", code, errs)
	}
}

// TestSimListsShippedScenarios: with no argument, sim lists every file of
// scenarios/ with its description, within 100 columns; a shipped name runs
// the built-in copy from any folder; an unknown name says how to list them.
func TestSimListsShippedScenarios(t *testing.T) {
	code, out, errs := corral(t, "sim")
	if code != 0 {
		t.Fatalf("sim: code %d, stderr %q", code, errs)
	}
	files, err := filepath.Glob(filepath.Join("..", "..", "scenarios", "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no scenarios/*.yaml: %v", err)
	}
	for _, f := range files {
		if name := strings.TrimSuffix(filepath.Base(f), ".yaml"); !strings.Contains(out, name) {
			t.Errorf("the list lacks %s:\n%s", name, out)
		}
	}
	if !strings.Contains(out, "region of 10 M connections goes dark") {
		t.Errorf("the list lacks region-failover's description:\n%s", out)
	}
	for _, l := range strings.Split(out, "\n") {
		if len(l) > 100 {
			t.Errorf("a line of %d columns: %q", len(l), l)
		}
	}
	code, out, errs = corral(t, "sim", "shuffle-blast", "--scale", "0.01", "--json", "--no-steps")
	if code != 0 || !strings.Contains(out, `"scenario": "shuffle-blast"`) {
		t.Errorf("sim shuffle-blast: code %d, stderr %q\n%s", code, errs, out)
	}
	code, _, errs = corral(t, "sim", "no-such-scenario")
	if code == 0 || !strings.Contains(errs, "no shipped scenario of that name (corral sim lists them)") {
		t.Errorf("sim no-such-scenario: code %d, stderr %q", code, errs)
	}
}

// TestSimDraws: a scenario of 3 draws prints each variant's median and
// worst over its draws within 100 columns, then the median draws' table;
// --json carries every draw, the series of the median draw only; the
// report says what the draws are.
func TestSimDraws(t *testing.T) {
	p := writeScenario(t, smallScenario+"sim: {draws: 3}\n")
	code, out, errs := corral(t, "sim", p)
	if code != 0 {
		t.Fatalf("sim: code %d, stderr %q", code, errs)
	}
	for _, want := range []string{"over its draws", "median of 3", "draws failing", "median draw of each variant"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	for _, l := range strings.Split(out, "\n") {
		if len(l) > 100 {
			t.Errorf("a line of %d columns: %q", len(l), l)
		}
	}
	code, out, errs = corral(t, "sim", p, "--json", "--seed", "7")
	if code != 0 {
		t.Fatalf("sim --json: code %d, stderr %q", code, errs)
	}
	var doc struct {
		Runs []struct {
			Seed  uint64
			Draw  int
			Draws int
			Steps []json.RawMessage
		}
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil || len(doc.Runs) != 6 {
		t.Fatalf("json: %d runs, %v", len(doc.Runs), err)
	}
	withSteps := 0
	for i, r := range doc.Runs {
		if r.Seed != 7+uint64(i%3) || r.Draw != i%3+1 || r.Draws != 3 {
			t.Errorf("run %d: seed %d, draw %d of %d", i, r.Seed, r.Draw, r.Draws)
		}
		if len(r.Steps) > 0 {
			withSteps++
		}
	}
	if withSteps != 2 {
		t.Errorf("%d runs with steps, want the 2 median draws", withSteps)
	}
	dir := t.TempDir()
	if code, _, errs = corral(t, "sim", p, "--out", dir); code != 0 {
		t.Fatalf("sim --out: code %d, stderr %q", code, errs)
	}
	html, err := os.ReadFile(filepath.Join(dir, "report.html"))
	if err != nil || !strings.Contains(string(html), "Over the draws") || !strings.Contains(string(html), "(median draw, seed ") {
		t.Errorf("report lacks the draws: %v", err)
	}
}

// TestSimLatencyStagesFollowTheServers: a scenario that leaves out
// overload.latency_stages runs sim's Shedders as corral hub and corral
// edge run theirs by default (hub's overload.latency_stages, edge's
// admission.latency_stages): on heap and descriptors, not on handshake
// latency.
func TestSimLatencyStagesFollowTheServers(t *testing.T) {
	sc, err := scenario.Decode("s.yaml", []byte(smallScenario))
	if err != nil {
		t.Fatal(err)
	}
	h, e := hub.DefaultConfig().Overload.LatencyStages, edge.DefaultConfig().Admission.LatencyStages
	if got := sc.Overload.LatencyStages; got != h || got != e {
		t.Fatalf("scenario overload.latency_stages defaults to %v; the hub's overload.latency_stages to %v, the edge's admission.latency_stages to %v", got, h, e)
	}
}
