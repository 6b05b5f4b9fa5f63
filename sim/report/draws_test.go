package report

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/corralhq/corral/scenario"
	"github.com/corralhq/corral/sim"
)

// drawsScenario is the shipped cdn file cut to its 6-load-balancer
// variants and the first five minutes (the surge and its aftermath), with
// the given draws.
func drawsScenario(t *testing.T, draws int) *scenario.Scenario {
	t.Helper()
	sc, err := scenario.Load("../../scenarios/cdn.yaml")
	if err != nil {
		t.Fatal(err)
	}
	sc.Duration = 5 * time.Minute
	sc.Sweep.OriginCount = []int{6}
	sc.Sim.Draws = draws
	return sc
}

// TestDrawsAreTheSeedsRuns: a scenario of N draws gives N runs per
// variant, at the seeds seed..seed+N-1, each the same as a run of that seed
// alone; the draws with failures are counted as the seeds' own runs say,
// and a variant's median of each key figure is the median of its seeds'
// figures.
func TestDrawsAreTheSeedsRuns(t *testing.T) {
	const n = 4
	sc := drawsScenario(t, n)
	runs, err := sim.RunAll(context.Background(), sc, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(runs) != 2*n {
		t.Fatalf("%d runs, want %d (2 variants x %d draws)", len(runs), 2*n, n)
	}
	ds := GroupDraws(runs)
	if len(ds) != 2 || !Drawn(ds) {
		t.Fatalf("%d variants, want 2", len(ds))
	}
	for _, d := range ds {
		if len(d.Runs) != n {
			t.Fatalf("%s: %d draws, want %d", d.Variant, len(d.Runs), n)
		}
		policy := strings.TrimPrefix(strings.Fields(d.Variant)[0], "dns=")
		failing := 0
		var peaks, secs, shares, settles []float64
		for i, r := range d.Runs {
			seed := sc.Seed + uint64(i)
			if r.Seed != seed || r.Draw != i+1 || r.Draws != n {
				t.Fatalf("%s: draw %d is seed %d (draw %d of %d), want seed %d", d.Variant, i+1, r.Seed, r.Draw, r.Draws, seed)
			}
			one := drawsScenario(t, 1)
			one.Seed = seed
			one.Sweep.DNSPolicy = []string{policy}
			alone, err := sim.RunAll(context.Background(), one, nil)
			if err != nil || len(alone) != 1 {
				t.Fatalf("seed %d alone: %d runs, %v", seed, len(alone), err)
			}
			got, want := r.Summary, alone[0].Summary
			got.Elapsed, want.Elapsed = 0, 0
			if !reflect.DeepEqual(got, want) {
				t.Errorf("%s seed %d: the draw's summary differs from the seed's own run:\n%+v\n%+v", d.Variant, seed, got, want)
			}
			s := alone[0].Summary
			if s.AttemptErrors > 0 {
				failing++
			}
			peaks, secs, shares = append(peaks, s.AttemptErrorPeak), append(secs, s.AttemptErrorSeconds), append(shares, s.PeakNewShare)
			settles = append(settles, settleOrder(s.TimeToSettle))
		}
		if d.Failing != failing {
			t.Errorf("%s: %d of %d draws failing, the seeds' runs say %d", d.Variant, d.Failing, n, failing)
		}
		median := func(xs []float64) float64 { xs = slices.Clone(xs); slices.Sort(xs); return xs[(len(xs)-1)/2] }
		for _, c := range []struct {
			name string
			got  Spread
			of   []float64
		}{{"att fail peak", d.AttemptFailPeak, peaks}, {"fail s", d.FailingSeconds, secs}, {"top new", d.NewShare, shares}, {"settle", d.Settle, settles}} {
			if c.got.Median != median(c.of) || c.got.Worst != slices.Max(c.of) {
				t.Errorf("%s %s: median %v worst %v, the seeds give %v (median %v)", d.Variant, c.name, c.got.Median, c.got.Worst, c.of, median(c.of))
			}
		}
		if !strings.Contains(DrawsVerdict(d), fmt.Sprintf("%d of %d draws", failing, n)) && failing > 0 {
			t.Errorf("%s: verdict %q does not say %d of %d draws", d.Variant, DrawsVerdict(d), failing, n)
		}
		t.Logf("%s: %d of %d failing, att fail peaks %v, settle %v", d.Variant, failing, n, peaks, settles)
	}
	// The weighted draws differ (the seeds do draw other answers) and
	// the table has a median and a worst row per variant.
	w := ds[0]
	if w.AttemptFailPeak.Median == w.AttemptFailPeak.Worst && w.Failing != 0 && w.Failing != n {
		t.Errorf("weighted: median and worst draw alike though %d of %d failed", w.Failing, n)
	}
	tab := DrawsTable(ds)
	if len(tab.Rows) != 2*len(ds) || tab.Rows[0][2] != fmt.Sprintf("%d of %d", ds[0].Failing, n) {
		t.Errorf("draws table rows %q", tab.Rows)
	}
	KeepMedianSteps(runs)
	for _, d := range ds {
		for _, r := range d.Runs {
			if (r == d.Median) != (r.Steps != nil) {
				t.Errorf("%s seed %d: steps kept %v, median %v", d.Variant, r.Seed, r.Steps != nil, r == d.Median)
			}
		}
	}
}
