package limit

import (
	"container/heap"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/corralhq/corral/internal/testkit"
)

// lowRateSim drives a Limiter with explicit times through an event
// simulation: arrivals in time order, each admitted token ending after a
// latency drawn from a model, every end fed back with SuccessAt before the
// next arrival. Nothing sleeps.
type lowRateSim struct {
	lim     *Limiter
	rng     *rand.Rand
	now     time.Time
	ends    endHeap
	latency func(rng *rand.Rand, inFlight int) time.Duration

	admitted, refused Counts
	firstRefusal      time.Time
	refusalState      string    // the limiter at the first refusal
	lastEnd           time.Time // when the last admitted work ends
}

type tokenEnd struct {
	at  time.Time
	tok Token
}

type endHeap []tokenEnd

func (h endHeap) Len() int           { return len(h) }
func (h endHeap) Less(i, j int) bool { return h[i].at.Before(h[j].at) }
func (h endHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *endHeap) Push(x any)        { *h = append(*h, x.(tokenEnd)) }
func (h *endHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	*h = old[:len(old)-1]
	return e
}

// noisyLatency is a storage-like latency: a median of base with log-normal
// noise of width sigma, a slow outlier (10x) in one of 50 requests, and
// queueing once more than knee requests are in flight.
func noisyLatency(base time.Duration, sigma float64, knee int) func(*rand.Rand, int) time.Duration {
	return func(rng *rand.Rand, n int) time.Duration {
		f := math.Exp(sigma * rng.NormFloat64())
		if rng.IntN(50) == 0 {
			f *= 10
		}
		f *= max(1, float64(n)/float64(knee))
		return time.Duration(f * float64(base))
	}
}

func newLowRateSim(t *testing.T, seed uint64, latency func(*rand.Rand, int) time.Duration) *lowRateSim {
	t.Helper()
	g, err := NewGradient(GradientConfig{Seed: seed})
	if err != nil {
		t.Fatal(err)
	}
	lim, err := NewLimiter(LimiterConfig{Limit: g})
	if err != nil {
		t.Fatal(err)
	}
	return &lowRateSim{lim: lim, rng: rand.New(rand.NewPCG(seed, 7)), now: simEpoch, latency: latency}
}

// advance ends every token due by to, in order.
func (s *lowRateSim) advance(to time.Time) {
	for len(s.ends) > 0 && !s.ends[0].at.After(to) {
		e := heap.Pop(&s.ends).(tokenEnd)
		e.tok.SuccessAt(e.at)
	}
	s.now = to
}

// arrive tries one unit of work of priority p at time at.
func (s *lowRateSim) arrive(at time.Time, p Priority) bool {
	s.advance(at)
	tok, ok := s.lim.TryAcquirePriorityAt(p, at)
	if !ok {
		if s.refused.Total() == 0 {
			s.firstRefusal, s.refusalState = at, s.state()
		}
		s.refused[p]++
		return false
	}
	s.admitted[p]++
	s.lastEnd = at.Add(s.latency(s.rng, s.lim.InFlight()))
	heap.Push(&s.ends, tokenEnd{at: s.lastEnd, tok: tok})
	return true
}

// burst offers n arrivals spread evenly over d, priorities at random, and
// lets them all finish.
func (s *lowRateSim) burst(n int, d time.Duration) {
	start := s.now
	for i := range n {
		s.arrive(start.Add(d*time.Duration(i)/time.Duration(n)), Priority(s.rng.IntN(NumPriorities)))
	}
	for len(s.ends) > 0 {
		s.advance(s.ends[0].at)
	}
}

// state describes the limiter for failure messages.
func (s *lowRateSim) state() string {
	snap := s.lim.Snapshot()
	return fmt.Sprintf("limit %d, in-flight %d (P0 %d, P1 %d), ceilings %v, ideal %v, last rtt %v",
		snap.Limit, snap.InFlight, s.lim.prio[P0].Load(), s.lim.prio[P1].Load(), snap.Ceilings, snap.Algorithm.IdealRTT, snap.Algorithm.RTT)
}

// TestNoRefusalsAtLowRateAfterBurst: a burst far above capacity (refusals
// allowed) then one request per second for five minutes, with noisy
// storage-like latencies: the trickle is never refused, at any priority.
// Before the fix the limit fell on windows of a few samples (20, 11, 5,
// 3), the reserves of P0 and P1 (2 slots each) took the whole limit, and P2,
// then P1, were refused with nothing in flight.
func TestNoRefusalsAtLowRateAfterBurst(t *testing.T) {
	for _, tc := range []struct {
		name string
		prio func(i int) Priority
	}{
		{name: "p0 only", prio: func(int) Priority { return P0 }},
		{name: "p1 only", prio: func(int) Priority { return P1 }},
		{name: "p2 only", prio: func(int) Priority { return P2 }},
		{name: "p0 p1 p2 in turn", prio: func(i int) Priority { return Priority(i % NumPriorities) }},
		{name: "mostly p2, p0 and p1 now and then", prio: func(i int) Priority {
			return [...]Priority{P2, P2, P1, P2, P0}[i%5]
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for seed := uint64(1); seed <= 5; seed++ {
				s := newLowRateSim(t, seed, noisyLatency(3*time.Millisecond, 0.6, 8))
				s.burst(1000, 200*time.Millisecond)
				burstRefused := s.refused
				s.refused = Counts{}
				start := s.now.Add(time.Second)
				for i := range 300 {
					s.arrive(start.Add(time.Duration(i)*time.Second), tc.prio(i))
				}
				if s.refused.Total() != 0 {
					t.Fatalf("seed %d: the trickle after the burst was refused %v (per priority) of %v admitted, first at %v after the burst; then: %s",
						seed, s.refused, s.admitted, s.firstRefusal.Sub(start), s.refusalState)
				}
				if burstRefused.Total() == 0 {
					t.Errorf("seed %d: the burst was never refused: it did not exceed the limit", seed)
				}
			}
		})
	}
}

// TestLowRateWorkloadsAreNeverRefused is a property test: random low-rate
// workloads (Poisson arrivals at 0.05 to 5 per second, latency medians of
// 0.5 to 50 ms with log-normal noise and slow outliers, random priority
// mixes, half of them 10 s after a burst that congests the server) run for
// ten simulated minutes, and the low-rate traffic is never refused. Low
// rate means the offered concurrency (rate x latency) is at most 0.1: such
// a load is far below any limit.
func TestLowRateWorkloadsAreNeverRefused(t *testing.T) {
	rng := rand.New(rand.NewPCG(2026, 12))
	for trial := range lowRateTrials {
		seed := rng.Uint64()
		rate := 0.05 * math.Pow(100, rng.Float64()) // per second
		median := time.Duration(float64(500*time.Microsecond) * math.Pow(100, rng.Float64()))
		if load := rate * median.Seconds(); load > 0.1 {
			median = time.Duration(0.1 / rate * float64(time.Second))
		}
		sigma := rng.Float64()
		weights := [NumPriorities]float64{rng.Float64(), rng.Float64(), rng.Float64()}
		burst := 0
		if rng.IntN(2) == 0 {
			burst = 100 + rng.IntN(2000)
		}
		name := fmt.Sprintf("trial %d (seed %d): %.2f/s, median %v, sigma %.2f, priority weights %.2f, burst %d",
			trial, seed, rate, median, sigma, weights, burst)
		s := newLowRateSim(t, seed, noisyLatency(median, sigma, 8))
		if burst > 0 {
			// The burst congests the server (refusals allowed) and P0's
			// share of it earns P0 a reserve of up to the whole limit,
			// halving every second: the low-rate traffic starts once it
			// is gone.
			s.burst(burst, 100*time.Millisecond)
			s.advance(s.now.Add(10 * time.Second))
			s.refused = Counts{}
		}
		pick := func() Priority {
			x := s.rng.Float64() * (weights[0] + weights[1] + weights[2])
			for p := range NumPriorities - 1 {
				if x < weights[p] {
					return Priority(p)
				}
				x -= weights[p]
			}
			return P2
		}
		at := s.now
		end := at.Add(10 * time.Minute)
		for {
			at = at.Add(time.Duration(s.rng.ExpFloat64() / rate * float64(time.Second)))
			if at.After(end) {
				break
			}
			s.arrive(at, pick())
		}
		if s.refused.Total() != 0 {
			t.Fatalf("%s: refused %v of %v admitted, first %v after the start; then: %s",
				name, s.refused, s.admitted, s.firstRefusal.Sub(end.Add(-10*time.Minute)), s.refusalState)
		}
	}
}

// lowRateTrials is the number of random workloads of
// TestLowRateWorkloadsAreNeverRefused (about 2 ms each).
const lowRateTrials = 300

// closeWindow feeds fast samples at in-flight n until l's open window
// closes, so the next sample starts an empty one.
func closeWindow(t *testing.T, l Limit, at *time.Time, n func(int) int) {
	t.Helper()
	w := l.Stats().Windows
	for range 1000 {
		*at = at.Add(25 * time.Millisecond)
		if _, err := l.Update(Sample{Start: *at, RTT: 10 * time.Millisecond, InFlight: n(l.Limit())}); err != nil {
			t.Fatal(err)
		}
		if l.Stats().Windows != w {
			return
		}
	}
	t.Fatal("the window never closed")
}

// TestLimitDoesNotFallOnFewSamples: once the limit is established, a
// trickle of slow samples or drops at full use of the limit moves no
// algorithm's limit until a window holds MinSamples of them, however long
// the trickle lasts. Before, a window closed after ten windows' time with
// whatever it had (one slow sample, one drop) and cut the limit on it.
func TestLimitDoesNotFallOnFewSamples(t *testing.T) {
	for _, dropped := range []bool{false, true} {
		for name, l := range algorithms(t, Common{MaxLimit: 40}) {
			t.Run(fmt.Sprintf("%s/dropped=%v", name, dropped), func(t *testing.T) {
				at := simEpoch
				for range 40 { // establish the ideal latency, end slow start
					feedWindow(t, l, &at, 500*time.Millisecond, 10*time.Millisecond, saturated)
				}
				closeWindow(t, l, &at, saturated)
				before := l.Limit()
				// Nine slow (or dropped) samples at full use, ten seconds
				// apart: 90 s, 180 windows' time, one short of MinSamples.
				slow := func() {
					at = at.Add(10 * time.Second)
					if _, err := l.Update(Sample{Start: at, RTT: 5 * time.Second, Dropped: dropped, InFlight: l.Limit()}); err != nil {
						t.Fatal(err)
					}
				}
				for range 9 {
					slow()
				}
				if got := l.Limit(); got != before {
					t.Errorf("limit moved from %d to %d on 9 samples over 90 s, want no change below MinSamples (10)", before, got)
				}
				slow() // the tenth is evidence enough
				if got := l.Limit(); got >= before {
					t.Errorf("limit %d after 10 slow samples at full use (was %d), want a cut", got, before)
				}
			})
		}
	}
}

// TestAppLimitedWindowsNeitherCutNorCreep: a limit cut by an overload
// comes back to InitialLimit once the load is far below it, whatever the
// latency noise; windows that use less than half of it never lower it,
// and never raise it above InitialLimit.
func TestAppLimitedWindowsNeitherCutNorCreep(t *testing.T) {
	for name, l := range algorithms(t, Common{MaxLimit: 40}) {
		t.Run(name, func(t *testing.T) {
			at := simEpoch
			for range 10 {
				feedWindow(t, l, &at, 500*time.Millisecond, 10*time.Millisecond, saturated)
			}
			// Overload: latency 200x at full use cuts the limit.
			for range 200 {
				if l.Limit() < 10 {
					break
				}
				feedWindow(t, l, &at, 500*time.Millisecond, 2*time.Second, saturated)
			}
			closeWindow(t, l, &at, saturated)
			cut := l.Limit()
			if cut >= 10 {
				t.Fatalf("limit %d after an overload, want a cut below 10", cut)
			}
			// One request in flight, latencies noisy and often slow.
			rng := rand.New(rand.NewPCG(3, 4))
			prev := cut
			for i := range 4000 {
				at = at.Add(25 * time.Millisecond)
				rtt := time.Duration(float64(30*time.Millisecond) * math.Exp(rng.NormFloat64()))
				got, err := l.Update(Sample{Start: at, RTT: rtt, InFlight: 1})
				if err != nil {
					t.Fatal(err)
				}
				if got < prev && got > 2 {
					t.Fatalf("sample %d: limit fell from %d to %d with one request in flight", i, prev, got)
				}
				prev = got
			}
			if got := l.Limit(); got != 20 {
				t.Errorf("limit %d after 100 s with one request in flight (cut to %d before), want the initial 20 back and no more", got, cut)
			}
		})
	}
}

// TestReservesDecayBeforeARefusal: a burst of P0 earns it a reserve of
// the whole limit, which still leaves P1 and P2 one slot; ten idle seconds
// later, with nothing having finished meanwhile, the next P1 and P2 are
// admitted at once: the ceilings are recomputed before a refusal, not only
// at the next finished token or the sixteenth refusal.
func TestReservesDecayBeforeARefusal(t *testing.T) {
	for _, explicit := range []bool{true, false} {
		t.Run(fmt.Sprintf("explicit time %v", explicit), func(t *testing.T) {
			f, _ := NewFixed(10)
			clock := testkit.NewClock(simEpoch)
			lim, err := NewLimiter(LimiterConfig{Limit: f, Clock: clock})
			if err != nil {
				t.Fatal(err)
			}
			acquire := func(p Priority) (Token, bool) {
				if explicit {
					return lim.TryAcquirePriorityAt(p, clock.Now())
				}
				return lim.TryAcquirePriority(p)
			}
			var burst []Token
			for range 8 {
				tok, ok := acquire(P0)
				if !ok {
					t.Fatal("P0 refused on an idle limiter")
				}
				burst = append(burst, tok)
			}
			clock.Advance(10 * time.Millisecond)
			for _, tok := range burst {
				tok.SuccessAt(clock.Now())
			}
			clock.Advance(30 * time.Millisecond)
			lim.FlushAt(clock.Now())
			if c := lim.Snapshot().Ceilings; c[P1] != 1 || c[P2] != 1 {
				t.Fatalf("ceilings %v right after a burst of 8 P0, want P0's reserve (the whole limit) to leave P1 and P2 one slot", c)
			}
			held, ok := acquire(P1)
			if !ok {
				t.Fatal("P1 refused its one slot")
			}
			clock.Advance(10 * time.Second)
			for _, p := range []Priority{P1, P2} {
				if _, ok := acquire(p); !ok {
					t.Errorf("%v refused 10 s after P0's burst with one token in flight; ceilings %v", p, lim.Snapshot().Ceilings)
				}
			}
			held.SuccessAt(clock.Now())
		})
	}
}

// TestWorkersBelowHalfTheLimitAreNeverRefused: 8 closed-loop workers (each
// sends its next request, of a random priority, when the last one ends)
// keep a limiter of 20 below half full for a simulated minute; nothing is
// refused. Reserves sized on each priority's own recent peak (1.5 x, held
// for seconds) add up to more than the 8 slots the workers share, and
// before they left the lower half of the limit alone they refused P2 with
// 4 to 8 requests in flight.
func TestWorkersBelowHalfTheLimitAreNeverRefused(t *testing.T) {
	for seed := uint64(1); seed <= 5; seed++ {
		s := newLowRateSim(t, seed, noisyLatency(2*time.Millisecond, 0.6, 64))
		type worker struct{ next time.Time }
		ws := make([]worker, 8)
		for i := range ws {
			ws[i].next = s.now.Add(time.Duration(i+1) * time.Microsecond)
		}
		end := s.now.Add(time.Minute)
		for {
			i := 0
			for j := range ws {
				if ws[j].next.Before(ws[i].next) {
					i = j
				}
			}
			at := ws[i].next
			if at.After(end) {
				break
			}
			s.advance(at)
			if !s.arrive(at, Priority(s.rng.IntN(NumPriorities))) {
				t.Fatalf("seed %d: refused %v with 8 workers on a limit of %d; then: %s", seed, s.refused, s.lim.Limit(), s.refusalState)
			}
			ws[i].next = s.lastEnd // the worker waits for its request
		}
		if s.admitted.Total() < 10_000 {
			t.Errorf("seed %d: only %d requests in a minute", seed, s.admitted.Total())
		}
	}
}
