package limit

import (
	"testing"
	"time"

	"github.com/corralhq/corral/internal/testkit"
)

// floorRun is the scenario of TestLimitLeavesItsFloor: a Gradient in front
// of a processor-sharing server of capacity 100 (20 ms per job, 3 x its
// capacity offered), then an overload (capacity 1, the same offer) that
// drives the limit to its floor, then the overload's end with the baseline
// latency raised five times for good and noisier (log-normal work of
// width 0.1 on top of the uniform jitter of 0.2, the way a busier
// machine's latency is). It returns the limit before the
// overload, the highest limit in the overload's last 20 s and the first
// time after its end at which the limit reached half the first (0 if it
// never did in after).
func floorRun(t *testing.T, overload, after time.Duration) (pre, during int, back time.Duration) {
	t.Helper()
	g, err := NewGradient(GradientConfig{Common: Common{Window: 200 * time.Millisecond}, Seed: 7})
	if err != nil {
		t.Fatal(err)
	}
	clock := testkit.NewClock(simEpoch)
	lim, err := NewLimiter(LimiterConfig{Limit: g, Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	const capacity = 100
	service := 20 * time.Millisecond
	srv := newPSServer(capacity, service, 1)
	r := &loadRun{t: t, lim: lim, srv: srv, clock: clock, dt: time.Millisecond,
		offered: 3 * capacity / service.Seconds()}
	r.run(20*time.Second, nil)
	pre = g.Limit()

	srv.capacity = 1
	start := clock.Now()
	r.run(overload, func(now time.Time) {
		if now.Sub(start) >= overload-20*time.Second {
			during = max(during, g.Limit())
		}
	})
	t.Logf("overload: limit %d, %+v", g.Limit(), g.Stats())

	srv.capacity, srv.service, srv.sigma = capacity, 5*service, 0.1
	r.offered = 3 * capacity / srv.service.Seconds()
	start = clock.Now()
	var trace []int
	w0 := g.Stats().Windows
	r.run(after, func(now time.Time) {
		if s := g.Stats(); s.Windows != w0 {
			w0 = s.Windows
			trace = append(trace, s.Limit)
		}
		if back == 0 && g.Limit() >= pre/2 {
			back = now.Sub(start)
		}
	})
	t.Logf("after: %+v, limit per window: %v", g.Stats(), trace)
	return pre, during, back
}

// TestLimitLeavesItsFloor: a limit that an overload drove to its floor
// climbs back to at least half of where it was before the overload within
// 20 s of simulated time once the overload has ended, although the
// baseline latency is five times what it was (each window at the floor
// then lasts a second or more: 10 samples of 100 ms); while the overload
// persists (capacity 1) it stays at a tenth or less. Before the floor
// re-learned the ideal it took 47 s: the ideal of the overload (20 ms)
// stayed in the baseline until 30 windows at the floor had aged it out.
func TestLimitLeavesItsFloor(t *testing.T) {
	const bound = 20 * time.Second
	pre, during, back := floorRun(t, 60*time.Second, bound)
	t.Logf("limit %d before the overload, at most %d in its last 20 s, half of it again %v after its end", pre, during, back)
	if pre < 90 {
		t.Fatalf("limit %d before the overload, want about 100", pre)
	}
	if during > pre/10 {
		t.Errorf("limit rose to %d during the overload (capacity 1), want at most %d", during, pre/10)
	}
	if back == 0 {
		t.Errorf("limit did not climb back to %d within %v of the overload's end", pre/2, bound)
	}
}
