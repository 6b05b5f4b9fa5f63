package sim

import (
	"math"
	"testing"
	"time"

	"github.com/corralhq/corral/backoff"
	"github.com/corralhq/corral/scenario"
	"github.com/corralhq/corral/shard"
)

// blackout is n connected devices whose only region goes dark at 5 s and
// stays dark: every attempt fails at once (cause down), so the attempt
// curve is the backoff policy's schedule and nothing else.
func blackout(n int64, b backoff.Config, q int) *scenario.Scenario {
	sc := &scenario.Scenario{
		Name:       "blackout",
		Duration:   3 * time.Minute,
		Population: scenario.Population{Devices: n, Initial: n},
		DNS:        scenario.DNS{Policy: "multivalue"},
		Origins:    []scenario.Origin{{Name: "o", Count: 2, Region: "r", Headroom: 1, MaxNewPerSecond: 1e9}},
		Client:     scenario.Client{Backoff: b},
		Traffic:    scenario.Traffic{RegionLoss: []scenario.RegionLoss{{At: 5 * time.Second, Region: "r"}}},
		Sim:        scenario.SimOptions{Quantiles: q},
	}
	sc.WithDefaults()
	return sc
}

// TestNoJitterRetriesInOneBin: without jitter a synchronised cohort makes
// every retry in a single step, at the steps the exponential schedule
// gives (delays rounded to the step): 0.5 s, 1, 2, 4, 8, 16, then 30 s.
func TestNoJitterRetriesInOneBin(t *testing.T) {
	const n = 1_000_000
	r := mustNew(t, blackout(n, backoff.Config{Policy: "exponential"}, 64)).Run(nil)
	var want []int
	at := 5
	for _, d := range []int{1, 1, 2, 4, 8, 16, 30, 30, 30, 30, 30} { // round(0.5 s) = 1 step
		at += d
		if at < len(r.Steps) {
			want = append(want, at)
		}
	}
	var got []int
	for i, s := range r.Steps {
		switch s.Attempts {
		case 0:
		case n:
			got = append(got, i)
		default:
			t.Fatalf("step %d: %d attempts, want 0 or all %d", i, s.Attempts, n)
		}
	}
	if len(got) != len(want) {
		t.Fatalf("retries at steps %v, want %v", got, want)
	}
	for i := range got {
		if got[i] != want[i] {
			t.Fatalf("retries at steps %v, want %v", got, want)
		}
	}
}

// offsetPMF is the distribution of the steps a full-jitter delay of
// attempt a waits, computed from the uniform distribution: the delay is
// uniform on [0, v] (v = min(cap, base*2^a), in steps) and the engine waits
// max(1, round(d)) steps.
func offsetPMF(v float64) map[int]float64 {
	pmf := map[int]float64{}
	for j := 1; float64(j)-0.5 <= v; j++ {
		lo, hi := float64(j)-0.5, float64(j)+0.5
		if j == 1 {
			lo = 0
		}
		pmf[j] = (math.Min(hi, v) - lo) / v
	}
	return pmf
}

// TestFullJitterMatchesUniform: with full jitter, the attempt curve of a
// cohort whose every attempt fails is its expectation under the uniform
// distribution: the k-th retry comes after the sum of k independent
// uniform delays, so the expected attempts at each step are n times the
// sum over k of the convolved distributions.
func TestFullJitterMatchesUniform(t *testing.T) {
	const n = 10_000_000
	const q = 1024
	base, capd := 10*time.Second, 10*time.Minute
	sc := blackout(n, backoff.Config{Policy: "full", Base: base, Cap: capd}, q)
	sc.Duration = 60 * time.Second
	r := mustNew(t, sc).Run(nil)
	const drop = 5
	window := len(r.Steps) - drop - 1
	// dist[k][t]: probability that retry k+1 happens t steps after the drop.
	expect := make([]float64, window+1)
	dist := map[int]float64{0: 1}
	for a := 0; ; a++ {
		v := math.Min(capd.Seconds(), base.Seconds()*math.Pow(2, float64(a)))
		next := map[int]float64{}
		for t0, p0 := range dist {
			for j, pj := range offsetPMF(v) {
				if t0+j <= window {
					next[t0+j] += p0 * pj
				}
			}
		}
		if len(next) == 0 {
			break
		}
		for t1, p := range next {
			expect[t1] += p
		}
		dist = next
	}
	// Each retry is quantised to slices of n/q; errors add up over the
	// retries that can reach a step, a few at most in this window.
	tol := 4.0 / q
	for k := 1; k <= window; k++ {
		got := float64(r.Steps[drop+k].Attempts) / n
		if math.Abs(got-expect[k]) > tol {
			t.Errorf("step +%d: %.4f of the cohort attempted, uniform expectation %.4f +- %.4f", k, got, expect[k], tol)
		}
	}
	// The first retries alone: step +1 holds [0, 1.5 s) of [0, 10 s].
	if got := float64(r.Steps[drop+1].Attempts) / n; math.Abs(got-0.15) > tol {
		t.Errorf("step +1: %.4f attempted, want 0.15", got)
	}
}

// TestAWSOrdering reproduces the ordering of the AWS backoff study on a
// contended resource (origins that take a tenth of the fleet per minute
// and refuse past a 2 s backlog): full and decorrelated jitter need far
// fewer calls than exponential backoff without jitter, which is the
// slowest to get everyone connected.
func TestAWSOrdering(t *testing.T) {
	calls := map[string]int64{}
	settle := map[string]float64{}
	for _, p := range []string{"exponential", "full", "decorrelated"} {
		sc := storm(p, 1_000_000)
		sc.Duration = 10 * time.Minute
		sc.Origins[0].Backlog = int64(2 * sc.Origins[0].MaxNewPerSecond)
		r := mustNew(t, sc).Run(nil)
		calls[p] = r.Summary.Attempts
		settle[p] = r.Summary.TimeToSettle
		if settle[p] < 0 {
			settle[p] = math.Inf(1)
		}
	}
	t.Logf("calls %v, time to settle %v", calls, settle)
	for _, p := range []string{"full", "decorrelated"} {
		if 2*calls[p] > calls["exponential"] {
			t.Errorf("%s made %d calls, exponential %d: want at most half", p, calls[p], calls["exponential"])
		}
		if settle[p] >= settle["exponential"] {
			t.Errorf("%s settled in %v s, exponential in %v s: want exponential slowest", p, settle[p], settle["exponential"])
		}
	}
}

// poisoned is a shuffle-sharded fleet of tenants with a poison tenant.
func poisoned(tenants, workers, hand int) *scenario.Scenario {
	sc := &scenario.Scenario{
		Name:       "poison",
		Duration:   2 * time.Minute,
		Population: scenario.Population{Devices: int64(tenants) * 200, Initial: int64(tenants) * 200, Tenants: tenants},
		DNS:        scenario.DNS{Policy: "shuffle", HandSize: hand, TTL: 30 * time.Second},
		Edge:       scenario.Edge{Pick: "random"},
		Origins:    []scenario.Origin{{Name: "w", Count: workers, Headroom: 2, MaxNewPerSecond: 1e6}},
		Client:     scenario.Client{Backoff: backoff.Config{Policy: "full"}},
		Traffic:    scenario.Traffic{Poison: []scenario.Poison{{At: 20 * time.Second, Tenant: 0}}},
	}
	sc.WithDefaults()
	return sc
}

// TestPoisonTenantMatchesHypergeometric: the share of other tenants that
// see a failure is the shard package's exact P(overlap >= 1) within
// sampling error (the hands are a sample of tenants), and the tenants the
// engine marks affected are exactly those whose hand meets the poison
// tenant's hand.
func TestPoisonTenantMatchesHypergeometric(t *testing.T) {
	for _, c := range []struct{ tenants, workers, hand int }{{2000, 64, 4}, {1000, 16, 2}, {1000, 32, 8}} {
		s := mustNew(t, poisoned(c.tenants, c.workers, c.hand))
		r := s.Run(nil)
		ts := r.Summary.Tenants
		blast, err := shard.BlastRadius(c.workers, c.hand, 1)
		if err != nil {
			t.Fatal(err)
		}
		p, _ := blast.Degraded.Float64()
		se := math.Sqrt(p * (1 - p) / float64(ts.Tenants))
		if math.Abs(ts.Affected-p) > 4*se {
			t.Errorf("n=%d k=%d: %.4f of tenants affected, maths says %.4f (4 se = %.4f)", c.workers, c.hand, ts.Affected, p, 4*se)
		}
		if ts.PredictedAffected != p {
			t.Errorf("summary predicts %v, BlastRadius %v", ts.PredictedAffected, p)
		}
		poison := map[int]bool{}
		for _, w := range s.dns.hand(0) {
			poison[w] = true
		}
		for tn := 1; tn < c.tenants; tn++ {
			meets := false
			for _, w := range s.dns.hand(tn) {
				meets = meets || poison[w]
			}
			if meets != s.tenants.affected[tn] {
				t.Fatalf("n=%d k=%d: tenant %d meets the poison hand: %v, engine says affected: %v", c.workers, c.hand, tn, meets, s.tenants.affected[tn])
			}
		}
	}
}
