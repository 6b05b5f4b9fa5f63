package sim

import (
	"math"
	"testing"
	"time"

	"github.com/corralhq/corral/backoff"
	"github.com/corralhq/corral/limit"
	"github.com/corralhq/corral/scenario"
)

// herd is 10,000 devices arriving in one step at one origin with adaptive
// admission (a fixed limit of 150 handshakes in flight, 3,000 handshakes
// a second, so a room of about 3,150 a step) under full jitter: the
// limiter refuses most of the herd and the shedder, whose latency target
// is never reached, stays normal, so the refusals carry its normal
// window, [retry_after, 2 x retry_after).
func herd() *scenario.Scenario {
	sc := &scenario.Scenario{
		Name:       "herd",
		Duration:   time.Minute,
		Population: scenario.Population{Devices: 10_000},
		DNS:        scenario.DNS{Policy: "multivalue"},
		Origins:    []scenario.Origin{{Name: "o", MaxConnections: 20_000, MaxNewPerSecond: 3_000}},
		Overload:   scenario.Overload{Mode: "adaptive", Algorithm: "fixed", RetryAfter: 5 * time.Second, Target: time.Hour},
		Client:     scenario.Client{Backoff: backoff.Config{Policy: "full"}},
		Traffic:    scenario.Traffic{Arrivals: []scenario.Arrival{{At: 10 * time.Second, Devices: 10_000}}},
	}
	sc.WithDefaults()
	return sc
}

// TestRefusedHerdComesBackWithinTheWindow: a herd the origin turns away
// with a retry window comes back within it, [5 s, 10 s) after the
// refusal, evenly (each of the window's inner steps takes a fifth, its
// two end steps a tenth each, within one of the cohort's 64 quantile
// slices), whatever the policy, as corral's clients draw within a window
// they are sent (backoff.HintWithin). Not, as before, the policy's jitter
// above points drawn from the window (full jitter's [h, 2h] stretched the
// return to 20 s; none and exponential came back in 8 spikes), nor above
// the window's start (the same as the window for full jitter, whose
// [h, 2h] it is at the normal stage, but all at 5 s without jitter).
func TestRefusedHerdComesBackWithinTheWindow(t *testing.T) {
	for _, policy := range backoff.Names() {
		t.Run(policy, func(t *testing.T) {
			sc := herd()
			sc.Client.Backoff.Policy = policy
			r := mustNew(t, sc).Run(nil)
			const at = 10
			refused := r.Steps[at].Errors[CauseShed][0]
			if refused < 5_000 || r.Steps[at].Successes[0]+refused != 10_000 {
				t.Fatalf("step %d: %d connected, %d refused of 10,000; want most refused", at, r.Steps[at].Successes[0], refused)
			}
			var back int64
			for i, st := range r.Steps {
				if i <= at {
					continue
				}
				if st.Attempts > 0 && (i < at+5 || i > at+10) {
					t.Errorf("step %d (%d s after the refusal): %d attempts, want none outside the window [5 s, 10 s]", i, i-at, st.Attempts)
				}
				if n := st.Errors[CauseShed][0]; n > 0 {
					t.Errorf("step %d: %d refused again; want the window's return admitted", i, n)
				}
				back += st.Attempts
				want := float64(refused) / 5 // a step of the window's five seconds
				if i == at+5 || i == at+10 {
					want /= 2 // the end steps take half a step each (delays rounded to the step)
				}
				// Within one of the 64 quantile slices the cohort is cut into.
				if slice := float64(refused) / 64; i >= at+5 && i <= at+10 && math.Abs(float64(st.Attempts)-want) > slice {
					t.Errorf("step %d: %d attempts, want %.0f within a slice, %.0f (the window spread evenly)", i, st.Attempts, want, slice)
				}
			}
			if back != refused {
				t.Errorf("%d attempts came back, %d were refused", back, refused)
			}
		})
	}
}

// TestSpreadByHint: the spreader draws a cohort with a window uniformly
// within it, one with a point hint over the policy's jitter above the
// point (full jitter: [h, 2h]), and one without a hint by the schedule.
func TestSpreadByHint(t *testing.T) {
	p, err := backoff.New(backoff.Config{Policy: "full"})
	if err != nil {
		t.Fatal(err)
	}
	sp := newSpreader(p, 64, time.Second, time.Minute)
	const n = 64_000
	for _, tc := range []struct {
		name   string
		hint   limit.Retry
		lo, hi int // steps
	}{
		{"window", limit.Retry{After: 10 * time.Second, Within: 4 * time.Second}, 10, 14},
		{"point", limit.Retry{After: 10 * time.Second}, 10, 20},
		{"no hint", limit.Retry{}, 1, 1}, // attempt 0: full jitter below the base, at least a step
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWheel(sp.maxOffset + 2)
			sp.spread(w, 0, key{}, tc.hint, n, 0.5)
			lo, hi, got := math.MaxInt, 0, int64(0)
			for step := 1; step <= sp.maxOffset; step++ {
				c := w.take(step, nil)
				for _, x := range c {
					lo, hi, got = min(lo, step), max(hi, step), got+x.n
				}
			}
			if got != n || lo != tc.lo || hi != tc.hi {
				t.Errorf("%d devices over steps %d..%d, want %d over %d..%d", got, lo, hi, n, tc.lo, tc.hi)
			}
		})
	}
}

// TestShedAndSeverCarryTheWindow: at a stage that rejects and severs
// (reached on latency, with overload.latency_stages), adaptive admission
// hands the devices it turns away and those it severs
// the shedder's window whole, as the edge and the hub send it (a refused
// Hello's Decision.Retry, a severed session's RetryWindowAt): one window
// per priority, not points drawn from it.
func TestShedAndSeverCarryTheWindow(t *testing.T) {
	sc := storm("full", 100_000)
	sc.Overload.Mode, sc.Overload.LatencyStages = "adaptive", true
	s := mustNew(t, sc)
	a := s.origins[0].adm.(*adaptive)
	// Driven at sim's times, from the run's epoch, as a run drives it.
	now := s.at(0)
	for range 60 {
		if a.shed.Stage() >= limit.StageSeverP1 {
			break
		}
		now = now.Add(sc.Step)
		a.observe(now, 10*time.Second, 100, 100, false)
		a.shed.EvaluateAt(now)
	}
	if st := a.shed.Stage(); st < limit.StageSeverP1 {
		t.Fatalf("stage %v after a minute at 10 s latency, want sever-p1 or above", st)
	}
	check := func(what string, demand []int64) (admitted, sever []int64) {
		admitted, sever, hints := a.admit(now, 0, demand, []int64{1000, 1000, 1000})
		for p := range 3 {
			if admitted[p] == demand[p] && sever[p] == 0 {
				continue
			}
			w := a.shed.RetryWindowAt(prio(p), now)
			if len(hints[p]) != 1 || hints[p][0] != w || w.Within <= 0 {
				t.Errorf("%s: P%d (%d of %d admitted, %d severed): hints %+v, want the window %+v alone", what, p, admitted[p], demand[p], sever[p], hints[p], w)
			}
		}
		return admitted, sever
	}
	// Only P0 asks: P2 is severed with no rejection of its own
	// (RetryWindowAt).
	if _, sever := check("severed", []int64{100, 0, 0}); sever[2] == 0 {
		t.Errorf("at stage %v nothing severed: %v", a.shed.Stage(), sever)
	}
	// Every priority asks: P1 and P2 are turned away (Decision.Retry).
	now = now.Add(sc.Step)
	if admitted, _ := check("rejected", []int64{100, 100, 100}); admitted[1]+admitted[2] != 0 {
		t.Errorf("at stage %v P1 and P2 admitted %v, want none", a.shed.Stage(), admitted)
	}
}
