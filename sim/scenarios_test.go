package sim

import (
	"context"
	"encoding/json"
	"math"
	"path/filepath"
	"reflect"
	"slices"
	"testing"

	"github.com/corralhq/corral/scenario"
)

// TestShippedScenariosRun runs every variant of every file under
// scenarios/ at a hundredth of its population (the file's topology,
// policies and event times unchanged) and checks each run is whole: no
// device lost, every step recorded, and outcome figures in range.
func TestShippedScenariosRun(t *testing.T) {
	files, err := filepath.Glob("../scenarios/*.yaml")
	if err != nil || len(files) < 5 {
		t.Fatalf("scenario files: %v, %v", files, err)
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			sc, err := scenario.Load(f)
			if err != nil {
				t.Fatal(err)
			}
			sc.Scale = 0.01
			sc.Sim.Draws = 1 // one draw per variant here; TestDrawsAreTheSeedsRuns (sim/report) tests draws
			runs, err := RunAll(context.Background(), sc, nil)
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range runs {
				if len(r.Steps) != int(sc.Duration/sc.Step) {
					t.Errorf("%s: %d steps", r.Variant, len(r.Steps))
				}
				last := r.Steps[len(r.Steps)-1]
				if got := last.Connected + last.Connecting + last.Waiting + last.Offline; got != r.Devices {
					t.Errorf("%s: last step accounts for %d of %d devices", r.Variant, got, r.Devices)
				}
				s := r.Summary
				if s.FiveXXAverage < 0 || s.FiveXXAverage > 1 || s.FiveXXPeak > 1 || s.P0Downtime < 0 || s.PeakConnected > r.Devices {
					t.Errorf("%s: figures out of range: %+v", r.Variant, s)
				}
			}
		})
	}
}

// TestDeterministic: the same scenario and seed give the same result, and
// another seed another one.
func TestDeterministic(t *testing.T) {
	run := func(seed uint64) []byte {
		sc := storm("decorrelated", 500_000)
		sc.Seed = seed
		sc.Overload.Mode = "adaptive"
		r := mustNew(t, sc).Run(nil)
		r.Summary.Elapsed = 0
		b, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	a, b, c := run(3), run(3), run(4)
	if !reflect.DeepEqual(a, b) {
		t.Error("two runs with seed 3 differ")
	}
	if reflect.DeepEqual(a, c) {
		t.Error("seeds 3 and 4 give the same run")
	}
}

// TestScaleKeepsShares: a scenario replayed at a population factor (as
// kraken will) keeps its shares: the 5xx rate, the peak utilisation and
// the time to settle move little between full size and a hundredth.
func TestScaleKeepsShares(t *testing.T) {
	full := storm("full", 10_000_000)
	full.Origins[0].Backlog = int64(2 * full.Origins[0].MaxNewPerSecond)
	small := storm("full", 10_000_000)
	small.Origins[0].Backlog = full.Origins[0].Backlog
	small.Scale = 0.01
	a := mustNew(t, full).Run(nil).Summary
	b := mustNew(t, small).Run(nil).Summary
	if math.Abs(a.FiveXXAverage-b.FiveXXAverage) > 0.02 || math.Abs(a.PeakUtilisation-b.PeakUtilisation) > 0.02 || math.Abs(a.TimeToSettle-b.TimeToSettle) > 3 {
		t.Errorf("full size: 5xx %.4f util %.3f settle %.0f; at 1%%: 5xx %.4f util %.3f settle %.0f",
			a.FiveXXAverage, a.PeakUtilisation, a.TimeToSettle, b.FiveXXAverage, b.PeakUtilisation, b.TimeToSettle)
	}
}

// TestFeedbackScenarioIsCDN: scenarios/cdn-feedback.yaml is the fleet and
// event of scenarios/cdn.yaml, input for input; only its name, routing
// policy (weighted, one of cdn.yaml's sweep), load feedback and sweep
// differ.
func TestFeedbackScenarioIsCDN(t *testing.T) {
	cdn, err := scenario.Load("../scenarios/cdn.yaml")
	if err != nil {
		t.Fatal(err)
	}
	fb, err := scenario.Load("../scenarios/cdn-feedback.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(cdn.Sweep.DNSPolicy, fb.DNS.Policy) {
		t.Errorf("cdn-feedback's policy %s is not one of cdn.yaml's %v", fb.DNS.Policy, cdn.Sweep.DNSPolicy)
	}
	fb.Name, fb.Description, fb.Sweep, fb.DNS.Policy, fb.DNS.Feedback = cdn.Name, cdn.Description, cdn.Sweep, cdn.DNS.Policy, cdn.DNS.Feedback
	a, err := json.Marshal(cdn)
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(fb)
	if err != nil {
		t.Fatal(err)
	}
	if string(a) != string(b) {
		t.Errorf("cdn-feedback.yaml's inputs differ from cdn.yaml's:\n%s\n%s", b, a)
	}
}

// TestResolversScenarioIsCDN: scenarios/cdn-resolvers.yaml is the fleet
// and event of scenarios/cdn.yaml at 6 load balancers, input for input;
// only its name, routing policy, resolver-aware answers (and the session
// age their audience learning reads), load feedback and sweep differ.
func TestResolversScenarioIsCDN(t *testing.T) {
	cdn, err := scenario.Load("../scenarios/cdn.yaml")
	if err != nil {
		t.Fatal(err)
	}
	rs, err := scenario.Load("../scenarios/cdn-resolvers.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(rs.Sweep.DNSPolicy, cdn.Sweep.DNSPolicy) || rs.Origins[0].Count != 6 || !slices.Contains(cdn.Sweep.OriginCount, 6) {
		t.Errorf("cdn-resolvers sweeps %v over %d load balancers; cdn.yaml %v over %v", rs.Sweep.DNSPolicy, rs.Origins[0].Count, cdn.Sweep.DNSPolicy, cdn.Sweep.OriginCount)
	}
	rs.Name, rs.Description, rs.Sweep, rs.DNS.Policy = cdn.Name, cdn.Description, cdn.Sweep, cdn.DNS.Policy
	rs.DNS.Resolvers, rs.DNS.BigN, rs.DNS.BigWeightedSubset = cdn.DNS.Resolvers, cdn.DNS.BigN, cdn.DNS.BigWeightedSubset
	rs.DNS.Feedback, rs.Population.SessionAge = cdn.DNS.Feedback, cdn.Population.SessionAge
	a, err := json.Marshal(cdn)
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(rs)
	if err != nil {
		t.Fatal(err)
	}
	if string(a) != string(b) {
		t.Errorf("cdn-resolvers.yaml's inputs differ from cdn.yaml's:\n%s\n%s", b, a)
	}
}
