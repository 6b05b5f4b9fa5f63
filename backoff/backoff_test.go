package backoff

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"
)

func mustBackoff(t testing.TB, c Config, seed uint64) *Backoff {
	t.Helper()
	b, err := NewBackoff(c, rand.New(rand.NewPCG(seed, seed)))
	if err != nil {
		t.Fatalf("NewBackoff(%+v): %v", c, err)
	}
	return b
}

// TestBackoffDeterministic checks that one seed gives one sequence and that
// another seed gives another.
func TestBackoffDeterministic(t *testing.T) {
	for _, n := range Names() {
		c := Config{Policy: n}
		a, b, other := mustBackoff(t, c, 42), mustBackoff(t, c, 42), mustBackoff(t, c, 43)
		differs := false
		for i := range 50 {
			da, db, dc := a.Next(), b.Next(), other.Next()
			if da != db {
				t.Fatalf("%s step %d: %v and %v from the same seed", n, i, da, db)
			}
			if da != dc {
				differs = true
			}
		}
		jittered := n != PolicyNone && n != PolicyExponential
		if jittered && !differs {
			t.Errorf("%s: seeds 42 and 43 gave the same 50 delays", n)
		}
		if !jittered && differs {
			t.Errorf("%s: a policy without jitter depends on the seed", n)
		}
	}
}

// TestBackoffFollowsPolicy checks that Next is Policy.Delay fed with the
// attempt count, the previous returned delay and the source's next number.
func TestBackoffFollowsPolicy(t *testing.T) {
	for _, n := range Names() {
		c := Config{Policy: n, Base: 10 * time.Millisecond, Cap: 5 * time.Second}
		b := mustBackoff(t, c, 7)
		p := mustNew(t, c)
		r := rand.New(rand.NewPCG(7, 7))
		var prev time.Duration
		for i := range 40 {
			want := p.Delay(i, prev, r.Float64())
			if got := b.Next(); got != want {
				t.Fatalf("%s step %d: Next = %v, want Policy.Delay = %v", n, i, got, want)
			}
			prev = want
			if b.Attempt() != i+1 {
				t.Fatalf("%s: Attempt = %d after %d calls", n, b.Attempt(), i+1)
			}
		}
	}
}

// TestBackoffReset checks that Reset starts the schedule over.
func TestBackoffReset(t *testing.T) {
	b := mustBackoff(t, Config{Policy: PolicyExponential, Base: time.Second, Cap: time.Minute}, 1)
	for range 5 {
		b.Next()
	}
	b.Hint(time.Hour)
	b.Reset()
	if b.Attempt() != 0 {
		t.Errorf("Attempt after Reset = %d, want 0", b.Attempt())
	}
	if d := b.Next(); d != time.Second {
		t.Errorf("first delay after Reset = %v, want the base 1s (the pending hint must be dropped)", d)
	}
	dec := mustBackoff(t, Config{Policy: PolicyDecorrelated, Base: time.Second, Cap: time.Hour}, 1)
	for range 20 {
		dec.Next()
	}
	dec.Reset()
	if d := dec.Next(); d < time.Second || d > 3*time.Second {
		t.Errorf("decorrelated after Reset: %v, want within [1s, 3s] (prev back to the base)", d)
	}
}

// TestBackoffHint checks that a hint replaces exactly one delay, that the
// largest of several hints wins, that hints of zero or less are ignored and
// that the schedule carries on from the hinted delay.
func TestBackoffHint(t *testing.T) {
	c := Config{Policy: PolicyFull, Base: 100 * time.Millisecond, Cap: 10 * time.Second}
	b := mustBackoff(t, c, 3)
	b.Next()
	b.Hint(30 * time.Second)
	b.Hint(20 * time.Second)
	b.Hint(0)
	b.Hint(-time.Second)
	d := b.Next()
	if d < 30*time.Second || d > 60*time.Second {
		t.Errorf("hinted delay %v, want within [30s, 60s] (full jitter hint window, largest hint)", d)
	}
	if b.Attempt() != 2 {
		t.Errorf("Attempt = %d, want 2: a hinted delay still counts as an attempt", b.Attempt())
	}
	if d := b.Next(); d > 10*time.Second {
		t.Errorf("delay after the hinted one %v, want back under the 10s cap (hint consumed)", d)
	}

	b.Hint(-time.Second)
	if d := b.Next(); d > 10*time.Second {
		t.Errorf("after a negative hint: %v, want an ordinary delay", d)
	}

	now := time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)
	ex := mustBackoff(t, Config{Policy: PolicyExponential}, 1)
	ex.HintAt(now.Add(90*time.Second), now)
	if d := ex.Next(); d != 90*time.Second {
		t.Errorf("exponential after HintAt(+90s): %v, want exactly 90s", d)
	}
	ex.HintAt(now.Add(-time.Minute), now)
	if d := ex.Next(); d != time.Second {
		t.Errorf("exponential after HintAt in the past: %v, want the ordinary delay 1s", d)
	}

	dec := mustBackoff(t, Config{Policy: PolicyDecorrelated, Base: time.Second, Cap: time.Hour}, 5)
	dec.Hint(10 * time.Minute)
	h := dec.Next()
	if d := dec.Next(); d < time.Second || d > 3*h {
		t.Errorf("decorrelated after a hinted %v: %v, want within [1s, %v] (grows from the hinted delay)", h, d, 3*h)
	}
}

// TestBackoffHerdHint checks the point of keeping jitter on hints: 10,000
// clients handed the same retry-after do not come back together.
func TestBackoffHerdHint(t *testing.T) {
	const clients = 10_000
	hint := 10 * time.Second
	for _, n := range []string{PolicyFull, PolicyEqual, PolicyDecorrelated, PolicyGRPC} {
		perSecond := map[time.Duration]int{}
		r := rand.New(rand.NewPCG(11, 12))
		for range clients {
			b, err := NewBackoff(Config{Policy: n}, r)
			if err != nil {
				t.Fatal(err)
			}
			b.Hint(hint)
			d := b.Next()
			if d < hint {
				t.Fatalf("%s: delay %v below the hint %v", n, d, hint)
			}
			perSecond[d.Truncate(time.Second)]++
		}
		peak := 0
		for _, k := range perSecond {
			peak = max(peak, k)
		}
		// The narrowest window is grpc's [10s, 14s): at most about a quarter
		// of the herd in any one second.
		if peak > clients*3/10 {
			t.Errorf("%s: %d of %d clients come back in the same second", n, peak, clients)
		}
	}
}

// TestBackoffZeroValue checks that the zero Backoff is full jitter with the
// defaults.
func TestBackoffZeroValue(t *testing.T) {
	var b Backoff
	for i := range 20 {
		want := min(DefaultCap, DefaultBase<<i)
		if d := b.Next(); d < 0 || d > want {
			t.Fatalf("zero Backoff step %d: %v, want within [0, %v]", i, d, want)
		}
	}
	if b.Policy().Name() != PolicyFull {
		t.Errorf("zero Backoff policy %q, want full", b.Policy().Name())
	}
	if b.ConnectTimeout(time.Second) != 0 {
		t.Errorf("zero Backoff ConnectTimeout = %v, want 0 (none prescribed)", b.ConnectTimeout(time.Second))
	}
}

// TestBackoffConnectTimeout checks the gRPC minimum connect timeout and its
// absence for the other policies.
func TestBackoffConnectTimeout(t *testing.T) {
	g := mustBackoff(t, Config{Policy: PolicyGRPC}, 1)
	d := g.Next()
	if d != time.Second {
		t.Fatalf("grpc first delay %v, want 1s", d)
	}
	if ct := g.ConnectTimeout(d); ct != 20*time.Second {
		t.Errorf("grpc ConnectTimeout(1s) = %v, want 20s", ct)
	}
	if ct := g.ConnectTimeout(100 * time.Second); ct != 100*time.Second {
		t.Errorf("grpc ConnectTimeout(100s) = %v, want 100s", ct)
	}
	f := mustBackoff(t, Config{Policy: PolicyFull}, 1)
	if ct := f.ConnectTimeout(time.Second); ct != 0 {
		t.Errorf("full ConnectTimeout = %v, want 0", ct)
	}
	fm := mustBackoff(t, Config{Policy: PolicyFull, MinConnectTimeout: 5 * time.Second}, 1)
	if ct := fm.ConnectTimeout(time.Second); ct != 5*time.Second {
		t.Errorf("full with min_connect_timeout 5s: ConnectTimeout(1s) = %v, want 5s", ct)
	}
}

// badRand returns values outside [0, 1).
type badRand struct{ i int }

func (r *badRand) Float64() float64 {
	r.i++
	return []float64{math.NaN(), -3, 7, math.Inf(1)}[r.i%4]
}

// TestBackoffBadSourceAndSaturation checks that a source returning values
// outside [0, 1) is clamped and that the attempt count saturates.
func TestBackoffBadSourceAndSaturation(t *testing.T) {
	for _, n := range Names() {
		b, err := NewBackoff(Config{Policy: n}, &badRand{})
		if err != nil {
			t.Fatal(err)
		}
		c := mustConfig(t, Config{Policy: n})
		for range 100 {
			if d := b.Next(); d < 0 || d > 2*c.Cap {
				t.Fatalf("%s with a bad source: %v", n, d)
			}
		}
		b.attempt = math.MaxInt - 1
		b.Next()
		b.Next()
		if b.Attempt() != math.MaxInt {
			t.Errorf("%s: Attempt = %d, want saturation at MaxInt", n, b.Attempt())
		}
	}
}

// TestNewBackoffErrors checks that NewBackoff reports bad configuration and
// accepts a nil source.
func TestNewBackoffErrors(t *testing.T) {
	if _, err := NewBackoff(Config{Policy: "linear"}, nil); err == nil {
		t.Error("NewBackoff(linear): no error")
	}
	b, err := NewBackoff(Config{Policy: PolicyEqual}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if d := b.Next(); d < DefaultBase/2 || d > DefaultBase {
		t.Errorf("equal jitter with the global source: %v, want within [%v, %v]", d, DefaultBase/2, DefaultBase)
	}
}

// TestPolicyConcurrent shares one policy of each kind between goroutines;
// under -race it proves the policies are read-only after New.
func TestPolicyConcurrent(t *testing.T) {
	for _, n := range Names() {
		p := mustNew(t, Config{Policy: n})
		want := p.Delay(5, time.Second, 0.3)
		done := make(chan time.Duration, 4)
		for g := range 4 {
			go func() {
				var d time.Duration
				for i := range 1000 {
					d = p.Delay(5, time.Second, 0.3)
					_ = p.Delay(i, d, float64(g)/4)
					_ = p.HintDelay(time.Duration(i), 0.5)
				}
				done <- d
			}()
		}
		for range 4 {
			if d := <-done; d != want {
				t.Errorf("%s: concurrent Delay = %v, want %v", n, d, want)
			}
		}
	}
}

// TestZeroAllocs checks that Delay, HintDelay and Next do not allocate.
func TestZeroAllocs(t *testing.T) {
	for _, n := range Names() {
		p := mustNew(t, Config{Policy: n})
		b := mustBackoff(t, Config{Policy: n}, 1)
		var d time.Duration
		i := 0
		if a := testing.AllocsPerRun(1000, func() {
			i++
			d = p.Delay(i&63, d, 0.7)
			d += p.HintDelay(d, 0.2)
			b.Hint(time.Second)
			d += b.Next()
			if i%40 == 0 {
				b.Reset()
			}
		}); a != 0 {
			t.Errorf("%s: %v allocations per call, want 0", n, a)
		}
	}
}

// TestBackoffNextAfter: NextAfter is Hint then Next. Two schedules with the
// same seed, one driven by NextAfter and one by Hint and Next, return the
// same delays, hinted or not; a hinted delay is never below the hint (not
// the larger of the hint and the schedule's delay: spread above it).
func TestBackoffNextAfter(t *testing.T) {
	c := Config{Policy: PolicyFull, Base: 100 * time.Millisecond, Cap: 10 * time.Second}
	a, b := mustBackoff(t, c, 9), mustBackoff(t, c, 9)
	for i, hint := range []time.Duration{0, 5 * time.Second, 0, -time.Second, 2 * time.Second} {
		got := a.NextAfter(hint)
		b.Hint(hint)
		want := b.Next()
		if got != want {
			t.Fatalf("step %d (hint %v): NextAfter %v, Hint+Next %v", i, hint, got, want)
		}
		if hint > 0 && (got < hint || got > 2*hint) {
			t.Errorf("step %d: hinted delay %v, want within [%v, %v]", i, got, hint, 2*hint)
		}
	}
	if a.Attempt() != 5 {
		t.Errorf("Attempt = %d after 5 NextAfter, want 5", a.Attempt())
	}
}

// TestBackoffHintWithin checks the server's retry window: the next delay
// is drawn uniformly within [h, h + w] whatever the policy (none and full
// jitter alike: the window replaces the policy's jitter above the hint),
// both clamped to MaxHint; the largest hint wins with its own window; a
// window of zero or less is the policy's jitter; Reset drops both.
func TestBackoffHintWithin(t *testing.T) {
	h, w := 10*time.Second, 500*time.Millisecond
	for _, n := range []string{PolicyNone, PolicyFull} {
		b := mustBackoff(t, Config{Policy: n}, 7)
		var sum time.Duration
		lo, hi := time.Duration(math.MaxInt64), time.Duration(0)
		const draws = 4000
		for range draws {
			d := b.NextAfterWithin(h, w)
			lo, hi = min(lo, d), max(hi, d)
			sum += d
		}
		if lo < h || hi > h+w {
			t.Errorf("%s: delays within [%v, %v], want within [%v, %v]", n, lo, hi, h, h+w)
		}
		// Uniform: the extremes near the window's ends, the mean near its middle.
		if lo > h+w/50 || hi < h+w-w/50 {
			t.Errorf("%s: delays within [%v, %v] do not fill the window [%v, %v]", n, lo, hi, h, h+w)
		}
		if mean := sum / draws; mean < h+w/2-w/20 || mean > h+w/2+w/20 {
			t.Errorf("%s: mean delay %v, want about %v", n, mean, h+w/2)
		}
	}
	b := mustBackoff(t, Config{Policy: PolicyFull}, 1)
	b.HintWithin(2*time.Second, time.Millisecond)
	b.HintWithin(time.Second, time.Hour) // smaller hint: ignored, window too
	if d := b.Next(); d < 2*time.Second || d > 2*time.Second+time.Millisecond {
		t.Errorf("the largest hint's window: %v, want within [2s, 2.001s]", d)
	}
	b.HintWithin(time.Second, time.Millisecond)
	b.Hint(3 * time.Second) // larger hint without a window: the policy's jitter
	if d := b.Next(); d < 3*time.Second || d > 6*time.Second {
		t.Errorf("a larger hint without a window: %v, want full jitter's [3s, 6s]", d)
	}
	for range 50 {
		b.HintWithin(time.Second, -time.Second)
		if d := b.Next(); d < time.Second || d > 2*time.Second {
			t.Fatalf("a negative window: %v, want full jitter's [1s, 2s]", d)
		}
	}
	b.HintWithin(time.Second, time.Millisecond)
	b.Reset()
	if d := b.Next(); d > DefaultBase {
		t.Errorf("after Reset: %v, want the schedule's first delay (at most %v)", d, DefaultBase)
	}
	capped := mustBackoff(t, Config{Policy: PolicyFull, MaxHint: time.Minute}, 3)
	for range 50 {
		if d := capped.NextAfterWithin(time.Hour, time.Hour); d < time.Minute || d > 2*time.Minute {
			t.Fatalf("an hour's hint and window under a 1m MaxHint: %v, want within [1m, 2m]", d)
		}
	}
}

// fixedRand returns the values of u in turn.
type fixedRand struct {
	u []float64
	i int
}

func (r *fixedRand) Float64() float64 { r.i++; return r.u[(r.i-1)%len(r.u)] }

// TestWindowDelay checks the quantile function of a hint with a retry
// window: it is the delay Next draws after HintWithin for the same u
// (what the cohort simulator spreads a refused cohort by), h at u = 0 and
// h + w at u = 1, monotone in u, both clamped to MaxHint, and the hint
// exactly for a window of zero or less.
func TestWindowDelay(t *testing.T) {
	h, w := 5*time.Second, 5*time.Second
	us := []float64{0, 0.1, 0.37, 0.5, 0.9, 1}
	for _, n := range Names() {
		c := Config{Policy: n}
		p := mustNew(t, c)
		b, err := NewBackoff(c, &fixedRand{u: us})
		if err != nil {
			t.Fatal(err)
		}
		prev := time.Duration(-1)
		for _, u := range us {
			d := WindowDelay(p, h, w, u)
			if got := b.NextAfterWithin(h, w); got != d {
				t.Errorf("%s: Next after HintWithin(%v, %v) at u = %v: %v, WindowDelay %v", n, h, w, u, got, d)
			}
			if want := h + time.Duration(u*float64(w)); d != want {
				t.Errorf("%s: WindowDelay(%v, %v, %v) = %v, want %v", n, h, w, u, d, want)
			}
			if d < prev {
				t.Errorf("%s: WindowDelay falls from %v to %v at u = %v", n, prev, d, u)
			}
			prev = d
		}
		if d := WindowDelay(p, h, 0, 0.9); d != h {
			t.Errorf("%s: no window: %v, want the hint %v", n, d, h)
		}
		if d := WindowDelay(p, h, -w, 0.9); d != h {
			t.Errorf("%s: a negative window: %v, want the hint %v", n, d, h)
		}
	}
	capped := mustNew(t, Config{Policy: PolicyFull, MaxHint: time.Minute})
	if d := WindowDelay(capped, time.Hour, time.Hour, 1); d != 2*time.Minute {
		t.Errorf("an hour's hint and window under a 1m MaxHint, u = 1: %v, want 2m", d)
	}
}
