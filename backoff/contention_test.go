package backoff

import (
	"container/heap"
	"math/rand/v2"
	"testing"
	"time"
)

// The contention model reproduces the experiment of the AWS Architecture
// Blog study "Exponential Backoff And Jitter": N clients each need one
// successful write on a shared resource that behaves like optimistic
// concurrency control under contention. Time is simulated, nothing sleeps.
//
//   - The resource works in windows of contentionModel.window. A call lands
//     in the window containing its arrival time; if it is the only call in
//     that window it succeeds, otherwise every call in the window fails (a
//     write conflict for all of them).
//   - The outcome reaches the client when the window closes. A failed client
//     asks its own Backoff for a delay, sends again after it, and the call
//     arrives after a one-way network latency drawn from a normal
//     distribution (mean contentionModel.latency, standard deviation
//     contentionModel.sd, cut at 0). That latency is the only source of
//     spread for a policy without jitter.
//   - All clients send their first call at time 0 (it arrives after one
//     latency).
//   - A client gives up after maxCalls calls, so a policy that never
//     separates its clients still ends; its call count is then a lower bound
//     and the run is marked unfinished.
type contentionModel struct {
	clients  int
	window   time.Duration
	latency  time.Duration // mean one-way latency
	sd       time.Duration // its standard deviation (normal, cut at 0)
	maxCalls int
}

func (m contentionModel) lat(r *rand.Rand) time.Duration {
	return max(0, m.latency+time.Duration(r.NormFloat64()*float64(m.sd)))
}

type contentionResult struct {
	calls      int           // calls made by all clients, failed and successful
	completion time.Duration // arrival time of the last successful call
	unfinished int           // clients that gave up after maxCalls
}

// arrival is one call in flight, ordered by arrival time then client.
type arrival struct {
	at     time.Duration
	client int
}

type arrivals []arrival

func (a arrivals) Len() int { return len(a) }
func (a arrivals) Less(i, j int) bool {
	if a[i].at != a[j].at {
		return a[i].at < a[j].at
	}
	return a[i].client < a[j].client
}
func (a arrivals) Swap(i, j int) { a[i], a[j] = a[j], a[i] }
func (a *arrivals) Push(x any)   { *a = append(*a, x.(arrival)) }
func (a *arrivals) Pop() any {
	old := *a
	x := old[len(old)-1]
	*a = old[:len(old)-1]
	return x
}

// runContention runs the model once for policy cfg; seed fixes every random
// draw (latencies and each client's backoff source).
func runContention(t testing.TB, cfg Config, m contentionModel, seed uint64) contentionResult {
	t.Helper()
	net := rand.New(rand.NewPCG(seed, 0x5eed))
	clients := make([]*Backoff, m.clients)
	calls := make([]int, m.clients)
	q := make(arrivals, 0, m.clients)
	for i := range clients {
		b, err := NewBackoff(cfg, rand.New(rand.NewPCG(seed, uint64(i))))
		if err != nil {
			t.Fatalf("NewBackoff(%+v): %v", cfg, err)
		}
		clients[i] = b
		q = append(q, arrival{at: m.lat(net), client: i})
	}
	heap.Init(&q)
	var res contentionResult
	batch := make([]int, 0, m.clients)
	for q.Len() > 0 {
		w := q[0].at / m.window
		batch = batch[:0]
		for q.Len() > 0 && q[0].at/m.window == w {
			batch = append(batch, heap.Pop(&q).(arrival).client)
		}
		res.calls += len(batch)
		closes := (w + 1) * m.window
		if len(batch) == 1 {
			res.completion = max(res.completion, closes)
			continue
		}
		for _, c := range batch {
			calls[c]++
			if calls[c] >= m.maxCalls {
				res.unfinished++
				continue
			}
			lat := m.lat(net)
			heap.Push(&q, arrival{at: closes + clients[c].Next() + lat, client: c})
		}
	}
	return res
}

// contentionBase is the experiment the test asserts on and the README
// records. The network follows the AWS study's simulator (one-way delay with
// a mean of 10 ms and a standard deviation of 2 ms); 100 clients; policies
// use base 10 ms and cap 1 s with their default multipliers (2, 3 for
// decorrelated, 1.6 and jitter 0.2 for grpc); every figure is the mean of 10
// seeds. The write window varies over 1, 2 and 5 ms to show the ordering does
// not hang on one value.
var contentionBase = contentionModel{
	clients:  100,
	window:   time.Millisecond,
	latency:  10 * time.Millisecond,
	sd:       2 * time.Millisecond,
	maxCalls: 1000,
}

const contentionSeeds = 10

func contentionConfig(policy string, base time.Duration) Config {
	c := Config{Policy: policy, Base: base, Cap: time.Second}
	if policy == PolicyGRPC {
		// The minimum connect timeout plays no part in the model.
		c.MinConnectTimeout = time.Millisecond
	}
	return c
}

type contentionSummary struct {
	calls      float64       // mean over seeds
	completion time.Duration // mean over seeds
	unfinished int           // summed over seeds
}

func measureContention(t testing.TB, m contentionModel, base time.Duration) map[string]contentionSummary {
	t.Helper()
	out := map[string]contentionSummary{}
	for _, p := range Names() {
		var s contentionSummary
		var completion time.Duration
		for seed := uint64(1); seed <= contentionSeeds; seed++ {
			r := runContention(t, contentionConfig(p, base), m, seed)
			s.calls += float64(r.calls)
			completion += r.completion
			s.unfinished += r.unfinished
		}
		s.calls /= contentionSeeds
		s.completion = completion / contentionSeeds
		out[p] = s
	}
	return out
}

func logContention(t *testing.T, m contentionModel, base time.Duration, res map[string]contentionSummary) {
	t.Helper()
	t.Logf("window %v, base %v: %d clients, latency mean %v sd %v, cap 1s, mean of %d seeds, give up after %d calls",
		m.window, base, m.clients, m.latency, m.sd, contentionSeeds, m.maxCalls)
	t.Logf("  %-13s %9s %12s %8s", "policy", "calls", "completion", "gave up")
	for _, p := range Names() {
		s := res[p]
		t.Logf("  %-13s %9.1f %12v %8d", p, s.calls, s.completion.Round(time.Millisecond), s.unfinished)
	}
}

// TestContentionOrdering checks the AWS study's result on the simulated
// contended resource, for write windows of 1, 2 and 5 ms: full and
// decorrelated jitter need at least 2x fewer calls than exponential backoff
// without jitter and finish sooner, and no client of a jittered policy gives
// up. It also logs, without asserting, the same runs with a base of 1 ms,
// far below the network latency, where decorrelated jitter's slow start from
// the base costs it (see the README).
func TestContentionOrdering(t *testing.T) {
	for _, w := range []time.Duration{time.Millisecond, 2 * time.Millisecond, 5 * time.Millisecond} {
		m := contentionBase
		m.window = w
		base := 10 * time.Millisecond
		res := measureContention(t, m, base)
		logContention(t, m, base, res)
		exp := res[PolicyExponential]
		for _, p := range []string{PolicyFull, PolicyDecorrelated} {
			if ratio := exp.calls / res[p].calls; ratio < 2 {
				t.Errorf("window %v: exponential made %.1f calls, %s %.1f: ratio %.2f, want at least 2", w, exp.calls, p, res[p].calls, ratio)
			}
			if res[p].completion >= exp.completion {
				t.Errorf("window %v: %s completed in %v, not sooner than exponential's %v", w, p, res[p].completion, exp.completion)
			}
		}
		for _, p := range []string{PolicyFull, PolicyEqual, PolicyDecorrelated, PolicyGRPC} {
			if res[p].unfinished != 0 {
				t.Errorf("window %v: %s: %d clients gave up after %d calls, want 0", w, p, res[p].unfinished, m.maxCalls)
			}
		}
	}
	small := 1 * time.Millisecond
	logContention(t, contentionBase, small, measureContention(t, contentionBase, small))
}

// TestContentionDeterministic checks that one seed gives one result, so the
// figures in the README can be reproduced.
func TestContentionDeterministic(t *testing.T) {
	for _, p := range Names() {
		a := runContention(t, contentionConfig(p, 10*time.Millisecond), contentionBase, 7)
		b := runContention(t, contentionConfig(p, 10*time.Millisecond), contentionBase, 7)
		if a != b {
			t.Errorf("%s: two runs with seed 7 differ: %+v and %+v", p, a, b)
		}
	}
}
