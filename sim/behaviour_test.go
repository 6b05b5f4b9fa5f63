package sim

import (
	"math"
	"testing"
	"time"

	"github.com/corralhq/corral/backoff"
	"github.com/corralhq/corral/scenario"
)

// surge is a small CDN surge: 2 M devices arrive within 10 s through
// PoPs whose audience is concentrated (Zipf 1.3) and whose hosts share two
// resolvers per PoP.
func surge(policy string) *scenario.Scenario {
	sc := &scenario.Scenario{
		Name:       "surge",
		Duration:   10 * time.Minute,
		Population: scenario.Population{Devices: 2_000_000, Initial: 20_000},
		Geography:  scenario.Geography{PoPs: 30, ZipfExponent: 1.3, HostsPerPoP: 8, HostsPerResolver: 4},
		DNS:        scenario.DNS{Policy: policy, TTL: 60 * time.Second},
		Edge:       scenario.Edge{Pick: "random"},
		Origins:    []scenario.Origin{{Name: "lb", Count: 6, Headroom: 1.5, MaxNewPerSecond: 20_000, Backlog: 40_000}},
		Client:     scenario.Client{Backoff: backoff.Config{Policy: "grpc"}, ConnectTimeout: 20 * time.Second},
		Traffic:    scenario.Traffic{Arrivals: []scenario.Arrival{{At: 10 * time.Second, Over: 10 * time.Second, Devices: 1_980_000}}},
	}
	sc.WithDefaults()
	return sc
}

// TestWeightedConcentratesMultivalueSpreads: one address per answer,
// cached by shared resolvers for a TTL, piles long-lived connections onto
// a few load balancers; multi-value answers spread them.
func TestWeightedConcentratesMultivalueSpreads(t *testing.T) {
	w := mustNew(t, surge("weighted")).Run(nil).Summary
	m := mustNew(t, surge("multivalue")).Run(nil).Summary
	t.Logf("weighted: imbalance %.2f util %.2f; multivalue: imbalance %.2f util %.2f", w.PeakImbalance, w.PeakUtilisation, m.PeakImbalance, m.PeakUtilisation)
	if m.PeakImbalance > 1.05 {
		t.Errorf("multivalue imbalance %.2f, want within 5%% of even", m.PeakImbalance)
	}
	if w.PeakImbalance < m.PeakImbalance+0.2 {
		t.Errorf("weighted imbalance %.2f, multivalue %.2f: want weighted clearly worse", w.PeakImbalance, m.PeakImbalance)
	}
}

// TestEdgePickShares checks the pick rules against their definitions.
func TestEdgePickShares(t *testing.T) {
	ans := []int{2, 0, 3}
	load := []float64{0.5, 0, 0.1, 0.9}
	for _, tc := range []struct {
		pick string
		want []float64
	}{
		{"first", []float64{0, 0, 1, 0}},
		{"random", []float64{1.0 / 3, 0, 1.0 / 3, 1.0 / 3}},
		// p2c: origin 2 (load 0.1) beats both others, 0 beats 3, 3 never
		// wins: shares 2/3, 1/3, 0 (rank r of m: 2(m-1-r)/(m(m-1))).
		{"p2c", []float64{1.0 / 3, 0, 2.0 / 3, 0}},
	} {
		acc := make([]float64, 4)
		pickShares(acc, ans, tc.pick, 1, pickLoad(ans, load), 0)
		for i := range acc {
			if math.Abs(acc[i]-tc.want[i]) > 1e-12 {
				t.Errorf("%s: shares %v, want %v", tc.pick, acc, tc.want)
				break
			}
		}
	}
}

// pickLoad is the loads of the addresses of ans, in answer order.
func pickLoad(ans []int, load []float64) []float64 {
	out := make([]float64, len(ans))
	for j, o := range ans {
		out[j] = load[o]
	}
	return out
}

// TestP2CTiesAreEven: at equal loads p2c is even over the answer, whatever
// the origins' indices (ties broken by index gave the lowest index
// 2(m-1)/(m(m-1)) and the highest nothing).
func TestP2CTiesAreEven(t *testing.T) {
	ans := []int{0, 1, 2, 3, 4, 5}
	acc := make([]float64, 6)
	pickShares(acc, ans, "p2c", 1, make([]float64, 6), 0)
	for o, p := range acc {
		if math.Abs(p-1.0/6) > 1e-12 {
			t.Fatalf("origin %d gets %.4f of the picks at equal loads, want 1/6: %v", o, p, acc)
		}
	}
}

// TestP2CSpreadsEvenlyUnderMultivalue: a surge under multi-value answers
// with p2c edge hosts, from equal (empty) loads, spreads the connections
// evenly over the load balancers and fails no more than random picks do.
func TestP2CSpreadsEvenlyUnderMultivalue(t *testing.T) {
	p2c := surge("multivalue")
	p2c.Edge.Pick = "p2c"
	random := surge("multivalue")
	for _, sc := range []*scenario.Scenario{p2c, random} {
		sc.Origins[0].MaxNewPerSecond = 60_000 // enough when spread evenly
		sc.Origins[0].Backlog = 120_000
	}
	r := mustNew(t, p2c).Run(nil)
	q := mustNew(t, random).Run(nil).Summary
	p := r.Summary
	t.Logf("p2c: imbalance %.3f, peak attempt errors %.4f; random: %.3f, %.4f", p.PeakImbalance, p.AttemptErrorPeak, q.PeakImbalance, q.AttemptErrorPeak)
	if p.PeakImbalance > 1.02 {
		t.Errorf("p2c imbalance %.3f, want within 2 %% of even", p.PeakImbalance)
	}
	if p.AttemptErrorPeak > q.AttemptErrorPeak+0.01 {
		t.Errorf("p2c peak attempt errors %.4f, random %.4f: p2c herds", p.AttemptErrorPeak, q.AttemptErrorPeak)
	}
	// Every origin's share of the set-ups at the peak step stays near 1/6.
	if p.PeakNewShare > 1.0/6*1.05 {
		t.Errorf("one origin took %.3f of a step's set-ups, want about 1/6", p.PeakNewShare)
	}
}

// TestRegionLossMovesDevicesToNeighbour: after a region goes dark its
// devices end up connected in the other region, and while the health view
// and the resolvers' caches still name the dark region, attempts to it
// fail as down.
func TestRegionLossMovesDevicesToNeighbour(t *testing.T) {
	sc := &scenario.Scenario{
		Name:       "failover",
		Duration:   5 * time.Minute,
		Population: scenario.Population{Devices: 1_000_000, Initial: 1_000_000},
		Geography:  scenario.Geography{PoPs: 5, HostsPerPoP: 4, HostsPerResolver: 2},
		DNS:        scenario.DNS{Policy: "multivalue"},
		Edge:       scenario.Edge{Pick: "random"},
		Origins: []scenario.Origin{
			{Name: "west", Count: 2, Region: "west", Headroom: 1.2, MaxNewPerSecond: 10_000},
			{Name: "east", Count: 2, Region: "east", Headroom: 1.2, MaxNewPerSecond: 10_000},
		},
		Client:  scenario.Client{Backoff: backoff.Config{Policy: "full"}},
		Traffic: scenario.Traffic{RegionLoss: []scenario.RegionLoss{{At: 30 * time.Second, Region: "west"}}},
	}
	sc.WithDefaults()
	r := mustNew(t, sc).Run(nil)
	before := r.Steps[29]
	if before.Origins[0].Connected == 0 || before.Origins[2].Connected == 0 {
		t.Fatalf("before the loss both regions should hold connections: %+v", before.Origins)
	}
	last := r.Steps[len(r.Steps)-1]
	if last.Origins[0].Connected+last.Origins[1].Connected != 0 {
		t.Errorf("west still holds connections: %+v", last.Origins)
	}
	if got := last.Origins[2].Connected + last.Origins[3].Connected; got != r.Devices {
		t.Errorf("east holds %d of %d devices at the end", got, r.Devices)
	}
	if r.Summary.Errors["down"] == 0 {
		t.Error("no attempt reached the dark region before DNS moved")
	}
	// After detection (30 s) plus a TTL (60 s) no answer names west.
	for i := 30 + 30 + 60 + 1; i < len(r.Steps); i++ {
		if n := r.Steps[i].Errors[CauseDown]; n[0] != 0 {
			t.Fatalf("step %d: %d attempts still reach the dark region", i, n[0])
		}
	}
}

// TestSheddingProtectsP0: in a reconnect storm, adaptive admission with
// staged priority shedding keeps P0 devices connected far sooner than an
// origin without admission control does, and sheds P2 more than P0.
func TestSheddingProtectsP0(t *testing.T) {
	run := func(mode string) *Result {
		sc := storm("full", 1_000_000)
		sc.Origins[0].Backlog = int64(2 * sc.Origins[0].MaxNewPerSecond)
		sc.Overload.Mode = mode
		return mustNew(t, sc).Run(nil)
	}
	e, a := run("errors"), run("adaptive")
	t.Logf("P0 downtime: errors %.1f s, adaptive %.1f s", e.Summary.P0Downtime, a.Summary.P0Downtime)
	if a.Summary.P0Downtime*2 > e.Summary.P0Downtime {
		t.Errorf("P0 downtime %.1f s with shedding, %.1f s without: want at most half", a.Summary.P0Downtime, e.Summary.P0Downtime)
	}
	var shed [3]int64
	for _, st := range a.Steps {
		for p := range shed {
			shed[p] += st.Errors[CauseShed][p]
		}
	}
	// Per device: P0 is 10 % of the fleet, P2 60 %.
	if p0, p2 := float64(shed[0])/0.1, float64(shed[2])/0.6; p0 >= p2 {
		t.Errorf("shed per device of the class: P0 %.0f, P2 %.0f; want P2 shed more", p0, p2)
	}
}
