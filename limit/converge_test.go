package limit

import (
	"testing"
	"time"
)

// loadRun drives a Limiter in front of a psServer with open-loop arrivals.
type loadRun struct {
	t       *testing.T
	lim     *Limiter
	srv     *psServer
	clock   *simClock
	dt      time.Duration
	offered float64 // arrivals per second
	carry   float64
}

// run advances d of simulated time and calls each after every step.
func (r *loadRun) run(d time.Duration, each func(now time.Time)) {
	end := r.clock.t.Add(d)
	for r.clock.t.Before(end) {
		r.clock.t = r.clock.t.Add(r.dt)
		now := r.clock.t
		r.srv.step(now, r.dt, func(j simJob, _ time.Duration) { j.tok.SuccessAt(now) })
		r.carry += r.offered * r.dt.Seconds()
		for ; r.carry >= 1; r.carry-- {
			if tok, ok := r.lim.TryAcquireAt(now); ok {
				r.srv.admit(tok, now, P1)
			}
		}
		if each != nil {
			each(now)
		}
	}
}

func TestGradientConvergesToKnee(t *testing.T) {
	for _, tc := range []struct {
		name             string
		capacity, second int
	}{
		{name: "knee 100 then 200", capacity: 100, second: 200},
		{name: "knee 400 then 150", capacity: 400, second: 150},
		{name: "knee 600 then 1200", capacity: 600, second: 1200},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g, err := NewGradient(GradientConfig{Common: Common{Window: 200 * time.Millisecond}, Seed: 7})
			if err != nil {
				t.Fatal(err)
			}
			clock := &simClock{t: simEpoch}
			lim, err := NewLimiter(LimiterConfig{Limit: g, Clock: clock})
			if err != nil {
				t.Fatal(err)
			}
			service := 20 * time.Millisecond
			srv := newPSServer(tc.capacity, service, 1)
			r := &loadRun{t: t, lim: lim, srv: srv, clock: clock, dt: time.Millisecond}
			// Offer three times the capacity.
			r.offered = 3 * float64(tc.capacity) / service.Seconds()
			// The limit must be within 10 % of the knee from window 30 on,
			// at start (slow start from 20) and after a step change.
			const settleWindows = 30
			check := func(capacity int, windows int) {
				t.Helper()
				w0 := g.Stats().Windows
				var trace []int
				var probing []bool
				r.run(time.Duration(windows)*200*time.Millisecond, func(time.Time) {
					s := g.Stats()
					if s.Windows != w0 {
						w0 = s.Windows
						trace = append(trace, s.Limit)
						probing = append(probing, s.Probing)
					}
				})
				t.Logf("capacity %d, limit per window: %v", capacity, trace)
				if len(trace) < windows-2 {
					t.Fatalf("only %d windows closed in %d windows of time", len(trace), windows)
				}
				lo, hi := 0.9*float64(capacity), 1.1*float64(capacity)
				for i := settleWindows; i < len(trace); i++ {
					if probing[i] {
						continue // a probe window runs at ProbeRatio x limit on purpose
					}
					if l := float64(trace[i]); l < lo || l > hi {
						t.Errorf("window %d: limit %v outside [%v, %v] (capacity %d)", i, l, lo, hi, capacity)
					}
				}
			}
			check(tc.capacity, 60)
			srv.capacity = tc.second
			check(tc.second, 60)
		})
	}
}
