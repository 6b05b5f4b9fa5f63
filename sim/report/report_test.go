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

func run(t *testing.T) *sim.Result { return runFed(t, false) }

// runFed is run with load feedback on or off.
func runFed(t *testing.T, feedback bool) *sim.Result {
	t.Helper()
	sc := &scenario.Scenario{
		Name:       "r",
		Duration:   time.Minute,
		Population: scenario.Population{Devices: 10_000, Initial: 10_000, Priorities: []scenario.Priority{{Name: "P0", Share: 0.5}, {Name: "P1", Share: 0.5}}},
		DNS:        scenario.DNS{Policy: "multivalue", Feedback: scenario.Feedback{Enabled: feedback}},
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

func TestChartsAreValid(t *testing.T) {
	r := run(t)
	cs := Charts(r, [2]float64{})
	var titles []string
	for _, c := range cs {
		if err := c.Validate(); err != nil {
			t.Errorf("%s: %v", c.Title, err)
		}
		titles = append(titles, c.Title)
	}
	all := strings.Join(titles, "\n")
	min := count(r.Summary.PeakMinAttempts)
	for _, want := range []string{"Devices connected: v", "Connection attempts: v", "Failed connection attempts by cause: v", "Share failed (attempts: steps with at least " + min + "): v", "Share of the new streams per origin (steps with at least " + min + " attempts): v", "Origin utilisation (connections / maximum): v"} {
		if !strings.Contains(all, want) {
			t.Errorf("no chart %q in\n%s", want, all)
		}
	}
}

// TestWeightChartWithFeedback: the chart of the DNS weight factors is
// drawn for a run with load feedback, and only then.
func TestWeightChartWithFeedback(t *testing.T) {
	const title = "DNS weight factor per origin (load feedback; 1 = the configured weight): v"
	for _, on := range []bool{false, true} {
		found := false
		for _, c := range Charts(runFed(t, on), [2]float64{}) {
			if err := c.Validate(); err != nil {
				t.Errorf("%s: %v", c.Title, err)
			}
			found = found || c.Title == title
		}
		if found != on {
			t.Errorf("feedback %v: weight chart drawn %v", on, found)
		}
	}
}

func TestTables(t *testing.T) {
	r := run(t)
	var b bytes.Buffer
	if err := SummaryTable([]*sim.Result{r}, false).Write(&b); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "scenario r") || !strings.Contains(b.String(), "att fail") {
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

// TestDescribeSaysFeedbackAndResolvers: what was simulated names load
// feedback and resolver-aware answers when a run has them (on, or swept),
// the learned audiences with their inputs, and neither when off.
func TestDescribeSaysFeedbackAndResolvers(t *testing.T) {
	sc, err := scenario.Load("../../scenarios/cdn-resolvers.yaml")
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Join(Describe(sc, nil), "\n")
	for _, want := range []string{
		"Load feedback (on): the origins' load moves the weights every 1 s, and answers are held at most 30 s.",
		"Resolver-aware answers (when on): a resolver above 1 % of the queries over 60 s, or of the sessions its answers send (learned from the load reports, half-life 60 s, over a day before the event of sessions renewed every 1 h), is big",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("description without %q:\n%s", want, got)
		}
	}
	sc, err = scenario.Load("../../scenarios/cdn.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(Describe(sc, nil), "\n"); strings.Contains(got, "Load feedback") || strings.Contains(got, "Resolver-aware") {
		t.Errorf("cdn.yaml has neither, its description names them:\n%s", got)
	}
}
