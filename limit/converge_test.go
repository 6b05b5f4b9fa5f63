package limit

import (
	"fmt"
	"testing"
	"time"

	"github.com/corralhq/corral/internal/testkit"
)

// loadRun drives a Limiter in front of a psServer with open-loop arrivals.
type loadRun struct {
	t       *testing.T
	lim     *Limiter
	srv     *psServer
	clock   *testkit.Clock
	dt      time.Duration
	offered float64 // arrivals per second
	carry   float64
}

// run advances d of simulated time and calls each after every step.
func (r *loadRun) run(d time.Duration, each func(now time.Time)) {
	end := r.clock.Now().Add(d)
	for r.clock.Now().Before(end) {
		r.clock.Advance(r.dt)
		now := r.clock.Now()
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
			clock := testkit.NewClock(simEpoch)
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

// TestOtherAlgorithmsSettleNearKnee: Gradient2, Vegas and AIMD find the
// knee less tightly than Gradient (Gradient2 settles where latency is
// Tolerance x its reference, 1.5 by default; Vegas comes down from its
// slow-start overshoot by log10(limit) per window; AIMD settles where the
// p99 crosses its Timeout), but from window 30 on each stays within
// [0.75, 1.6] x the knee and none creeps upward.
func TestOtherAlgorithmsSettleNearKnee(t *testing.T) {
	c0 := Common{Window: 200 * time.Millisecond}
	service := 20 * time.Millisecond
	for _, tc := range []struct {
		name string
		new  func() (Limit, error)
	}{
		{name: "gradient2", new: func() (Limit, error) { return NewGradient2(Gradient2Config{Common: c0}) }},
		{name: "vegas", new: func() (Limit, error) { return NewVegas(VegasConfig{Common: c0, Seed: 3}) }},
		{name: "aimd", new: func() (Limit, error) { return NewAIMD(AIMDConfig{Common: c0, Timeout: service * 3 / 2}) }},
	} {
		for _, capacity := range []int{100, 400} {
			t.Run(fmt.Sprintf("%s/knee %d", tc.name, capacity), func(t *testing.T) {
				alg, err := tc.new()
				if err != nil {
					t.Fatal(err)
				}
				clock := testkit.NewClock(simEpoch)
				lim, err := NewLimiter(LimiterConfig{Limit: alg, Clock: clock})
				if err != nil {
					t.Fatal(err)
				}
				r := &loadRun{t: t, lim: lim, srv: newPSServer(capacity, service, 1), clock: clock, dt: time.Millisecond,
					offered: 3 * float64(capacity) / service.Seconds()}
				var trace []int
				var probing []bool
				w0 := alg.Stats().Windows
				r.run(16*time.Second, func(time.Time) {
					if s := alg.Stats(); s.Windows != w0 {
						w0 = s.Windows
						trace = append(trace, s.Limit)
						probing = append(probing, s.Probing)
					}
				})
				t.Logf("limit per window: %v", trace)
				lo, hi := 0.75*float64(capacity), 1.6*float64(capacity)
				for i := 30; i < len(trace); i++ {
					if l := float64(trace[i]); !probing[i] && (l < lo || l > hi) {
						t.Errorf("window %d: limit %v outside [%v, %v]", i, l, lo, hi)
					}
				}
				if last, mid := trace[len(trace)-1], trace[40]; float64(last) > 1.05*float64(mid)+8 {
					t.Errorf("limit crept from %d (window 40) to %d (window %d)", mid, last, len(trace)-1)
				}
			})
		}
	}
}
