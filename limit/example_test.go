package limit_test

import (
	"fmt"
	"time"

	"github.com/corralhq/corral/limit"
)

// manualClock is a Clock that only moves when told to.
type manualClock struct{ t time.Time }

func (c *manualClock) Now() time.Time { return c.t }

// A Limiter admits work below its limit and hands out tokens that release
// the slot and feed the latency back.
func ExampleLimiter() {
	fixed, _ := limit.NewFixed(2)
	lim, err := limit.NewLimiter(limit.LimiterConfig{Limit: fixed})
	if err != nil {
		fmt.Println(err)
		return
	}
	a, ok1 := lim.TryAcquire()
	b, ok2 := lim.TryAcquire()
	_, ok3 := lim.TryAcquire()
	fmt.Println("admitted:", ok1, ok2, ok3, "in flight:", lim.InFlight())
	a.Success() // done: the latency is a sample
	b.Ignore()  // the client went away: no sample
	fmt.Println("in flight:", lim.InFlight())
	// Output:
	// admitted: true true false in flight: 2
	// in flight: 0
}

// The cohort simulator feeds a Limit one aggregated Sample per simulated
// step and origin, with simulated times, and no goroutines. Here the
// origin's latency rises past a knee of 200 concurrent requests.
func ExampleGradient_simulation() {
	g, err := limit.NewGradient(limit.GradientConfig{
		Common: limit.Common{Window: time.Second, MinSamples: 1},
		Seed:   1,
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	const knee, demand = 200, 1000
	service := 50 * time.Millisecond
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var trace []int
	for step := range 40 {
		inFlight := min(g.Limit(), demand)
		rtt := service * time.Duration(max(inFlight, knee)) / knee
		_, err := g.Update(limit.Sample{
			Start:    start.Add(time.Duration(step) * time.Second),
			RTT:      rtt,
			InFlight: inFlight,
			Weight:   int64(inFlight) * int64(time.Second/rtt), // requests in the step
		})
		if err != nil {
			fmt.Println(err)
			return
		}
		trace = append(trace, g.Limit())
	}
	fmt.Println("slow start:", trace[:6])
	last := trace[len(trace)-1]
	fmt.Println("settled within 10 % of the knee:", last >= knee*9/10 && last <= knee*11/10)
	// Output:
	// slow start: [20 40 80 160 320 193]
	// settled within 10 % of the knee: true
}

// A Shedder moves through its stages from observed latency and tells the
// caller whom to admit and whom to sever.
func ExampleShedder() {
	clock := &manualClock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	shed, err := limit.NewShedder(limit.ShedderConfig{Clock: clock, Seed: 1})
	if err != nil {
		fmt.Println(err)
		return
	}
	// Handshakes take 250 ms against the 100 ms target for 3.5 s.
	for range 35 {
		clock.t = clock.t.Add(100 * time.Millisecond)
		for range 5 {
			shed.Observe(250 * time.Millisecond)
		}
		shed.EvaluateAt(clock.t)
	}
	fmt.Println("stage:", shed.Stage())
	for _, p := range []limit.Priority{limit.P0, limit.P1, limit.P2} {
		d := shed.Admit(p)
		fmt.Printf("%v admitted: %v, hint over 10 s: %v\n", p, d.Admit, d.RetryAfter > 10*time.Second)
	}
	q := shed.SeverQuota(limit.Counts{limit.P0: 500, limit.P1: 300, limit.P2: 4})
	fmt.Println("sever now:", q)
	// Output:
	// stage: reject-p1
	// p0 admitted: true, hint over 10 s: false
	// p1 admitted: false, hint over 10 s: false
	// p2 admitted: false, hint over 10 s: true
	// sever now: [0 0 4]
}

// The cohort simulator drives a Shedder with counts instead of devices:
// one ObserveN per step for the step's handshakes, one AdmitNAt per
// priority cohort, and RetryRangeAt to spread a rejected cohort.
func ExampleShedder_cohort() {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	shed, err := limit.NewShedder(limit.ShedderConfig{Clock: &manualClock{t: start}})
	if err != nil {
		fmt.Println(err)
		return
	}
	for step := 1; step <= 3; step++ {
		now := start.Add(time.Duration(step) * time.Second)
		shed.ObserveN(180*time.Millisecond, 5000) // the step's handshakes
		d := shed.AdmitNAt(limit.P2, 20_000, now)
		lo, hi := shed.RetryRangeAt(limit.P2, now)
		fmt.Printf("t=%ds stage=%v P2 admitted=%v retry in [%v, %v)\n", step, d.Stage, d.Admit, lo, hi)
	}
	fmt.Println("P2 rejected:", shed.Snapshot().Rejected[limit.P2])
	// Output:
	// t=1s stage=reject-p2 P2 admitted=false retry in [1s, 10s)
	// t=2s stage=sever-p2 P2 admitted=false retry in [10s, 20s)
	// t=3s stage=reject-p1 P2 admitted=false retry in [20s, 40s)
	// P2 rejected: 60000
}
