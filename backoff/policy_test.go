package backoff

import (
	"fmt"
	"math"
	"math/rand/v2"
	"sort"
	"testing"
	"time"
)

// closed is the closed form of one delay distribution, computed here from
// the published formulas independently of the package code.
type closed struct {
	lo, hi   float64 // support, nanoseconds
	mean, sd float64
	atCap    float64 // probability of exactly the cap (decorrelated only)
}

func uniform(lo, hi float64) closed {
	return closed{lo: lo, hi: hi, mean: (lo + hi) / 2, sd: (hi - lo) / math.Sqrt(12)}
}

// expected returns the closed form for policy c (defaults filled) at attempt
// n with previous delay prev.
func expected(c Config, n int, prev time.Duration) closed {
	base, capv := float64(c.Base), float64(c.Cap)
	v := math.Min(capv, base*math.Pow(c.Multiplier, float64(n)))
	switch c.Policy {
	case PolicyNone:
		return closed{lo: base, hi: base, mean: base}
	case PolicyExponential:
		return closed{lo: v, hi: v, mean: v}
	case PolicyFull:
		return uniform(0, v)
	case PolicyEqual:
		return uniform(v/2, v)
	case PolicyGRPC:
		if n == 0 {
			return closed{lo: base, hi: base, mean: base}
		}
		return uniform(v*(1-c.Jitter), v*(1+c.Jitter))
	case PolicyDecorrelated:
		// X = min(cap, U(base, b)) with b = max(base, 3*max(prev, base)).
		b := math.Max(base, c.Multiplier*math.Max(float64(prev), base))
		if b <= capv {
			return uniform(base, b)
		}
		w := b - base
		p := (b - capv) / w // mass at the cap
		m1 := ((capv*capv-base*base)/2 + capv*(b-capv)) / w
		m2 := ((capv*capv*capv-base*base*base)/3 + capv*capv*(b-capv)) / w
		return closed{lo: base, hi: capv, mean: m1, sd: math.Sqrt(m2 - m1*m1), atCap: p}
	}
	panic("unknown policy " + c.Policy)
}

func mustConfig(t testing.TB, c Config) Config {
	t.Helper()
	c, err := c.WithDefaults()
	if err != nil {
		t.Fatalf("WithDefaults(%+v): %v", c, err)
	}
	return c
}

func mustNew(t testing.TB, c Config) Policy {
	t.Helper()
	p, err := New(c)
	if err != nil {
		t.Fatalf("New(%+v): %v", c, err)
	}
	return p
}

// testConfigs are the policies the distribution tests run: every policy
// with its defaults and with a custom base, cap and multiplier.
func testConfigs() []Config {
	var out []Config
	for _, n := range Names() {
		out = append(out, Config{Policy: n})
		c := Config{Policy: n, Base: 100 * time.Millisecond, Cap: 10 * time.Second}
		switch n {
		case PolicyNone:
		case PolicyGRPC:
			c.Multiplier, c.Jitter = 1.5, 0.5
		default:
			c.Multiplier = 2.5
		}
		out = append(out, c)
	}
	return out
}

// TestDistribution draws 100,000 delays per case with a seeded source and
// checks them against the closed form: every draw inside the support, the
// smallest and largest draws within 0.1 % of the support's ends, the sample
// mean within 5 standard errors (sd/sqrt(n)) plus 1 ns of truncation, the
// sample standard deviation within 2 % and, for decorrelated jitter, the mass
// at the cap within 5 binomial standard errors. With the fixed seed the test
// is deterministic; with a fresh seed a 5-standard-error bound would fail
// about once in 1.7 million cases.
func TestDistribution(t *testing.T) {
	const draws = 100_000
	for _, cfg := range testConfigs() {
		c := mustConfig(t, cfg)
		p := mustNew(t, cfg)
		type kase struct {
			attempt int
			prev    time.Duration
		}
		var cases []kase
		if c.Policy == PolicyDecorrelated {
			for _, prev := range []time.Duration{0, c.Base, 2 * c.Base, c.Cap / 4, c.Cap / 3, c.Cap / 2, c.Cap, 10 * c.Cap} {
				cases = append(cases, kase{attempt: 3, prev: prev})
			}
		} else {
			for n := 0; n <= 14; n++ {
				cases = append(cases, kase{attempt: n})
			}
		}
		for _, k := range cases {
			name := fmt.Sprintf("%s/base=%v/cap=%v/attempt=%d/prev=%v", c.Policy, c.Base, c.Cap, k.attempt, k.prev)
			t.Run(name, func(t *testing.T) {
				want := expected(c, k.attempt, k.prev)
				r := rand.New(rand.NewPCG(uint64(k.attempt), uint64(k.prev)))
				var mean, m2 float64 // Welford's running mean and squared deviations
				lo, hi := math.Inf(1), math.Inf(-1)
				atCap := 0
				for i := range draws {
					d := p.Delay(k.attempt, k.prev, r.Float64())
					x := float64(d)
					delta := x - mean
					mean += delta / float64(i+1)
					m2 += delta * (x - mean)
					lo, hi = math.Min(lo, x), math.Max(hi, x)
					if d == c.Cap {
						atCap++
					}
				}
				sd := math.Sqrt(m2 / draws)
				if lo < want.lo-1 || hi > want.hi+1 {
					t.Errorf("draws span [%v, %v], want inside [%v, %v]", time.Duration(lo), time.Duration(hi), time.Duration(want.lo), time.Duration(want.hi))
				}
				slack := 0.001*(want.hi-want.lo) + 1
				if lo > want.lo+slack || hi < want.hi-slack {
					t.Errorf("draws span [%v, %v], want to reach both ends of [%v, %v]", time.Duration(lo), time.Duration(hi), time.Duration(want.lo), time.Duration(want.hi))
				}
				if tol := 5*want.sd/math.Sqrt(draws) + 1; math.Abs(mean-want.mean) > tol {
					t.Errorf("mean %v, want %v +- %v", time.Duration(mean), time.Duration(want.mean), time.Duration(tol))
				}
				if math.Abs(sd-want.sd) > 0.02*want.sd+1 {
					t.Errorf("standard deviation %v, want %v +- 2%%", time.Duration(sd), time.Duration(want.sd))
				}
				if want.atCap > 0 {
					got := float64(atCap) / draws
					if tol := 5 * math.Sqrt(want.atCap*(1-want.atCap)/draws); math.Abs(got-want.atCap) > tol {
						t.Errorf("share of draws at the cap %.4f, want %.4f +- %.4f", got, want.atCap, tol)
					}
				}
				blo, bhi := Bounds(p, k.attempt, k.prev)
				if math.Abs(float64(blo)-want.lo) > 1 || math.Abs(float64(bhi)-want.hi) > 1 {
					t.Errorf("Bounds = [%v, %v], want [%v, %v]", blo, bhi, time.Duration(want.lo), time.Duration(want.hi))
				}
			})
		}
	}
}

// TestGRPCProtocol checks the gRPC connection backoff defaults and schedule:
// 1 s exactly, then centres 1.6 s, 2.56 s, ... capped at 120 s, each within
// +-20 %, and the 20 s minimum connect timeout.
func TestGRPCProtocol(t *testing.T) {
	p, err := Parse("grpc")
	if err != nil {
		t.Fatal(err)
	}
	g := p.(*GRPC)
	for _, u := range []float64{0, 0.3, 0.999} {
		if d := g.Delay(0, 0, u); d != time.Second {
			t.Errorf("first retry at u=%v: %v, want exactly 1s", u, d)
		}
	}
	centre := float64(time.Second)
	for n := 1; n <= 20; n++ {
		centre = math.Min(centre*1.6, float64(120*time.Second))
		lo, hi := Bounds(g, n, 0)
		if math.Abs(float64(lo)-0.8*centre) > 1 || math.Abs(float64(hi)-1.2*centre) > 1 {
			t.Errorf("attempt %d: bounds [%v, %v], want [%v, %v]", n, lo, hi, time.Duration(0.8*centre), time.Duration(1.2*centre))
		}
		if mid := g.Delay(n, 0, 0.5); math.Abs(float64(mid)-centre) > 1 {
			t.Errorf("attempt %d: median %v, want %v", n, mid, time.Duration(centre))
		}
	}
	if _, hi := Bounds(g, 11, 0); hi != 144*time.Second {
		t.Errorf("attempt 11 (centre at the 120s cap): upper bound %v, want 144s", hi)
	}
	if g.MinConnectTimeout() != 20*time.Second {
		t.Errorf("MinConnectTimeout = %v, want 20s", g.MinConnectTimeout())
	}
	if got := g.ConnectTimeout(time.Second); got != 20*time.Second {
		t.Errorf("ConnectTimeout(1s) = %v, want 20s", got)
	}
	if got := g.ConnectTimeout(90 * time.Second); got != 90*time.Second {
		t.Errorf("ConnectTimeout(90s) = %v, want 90s", got)
	}
}

// TestMonotoneInU checks that Delay is non-decreasing in u for random
// attempts and previous delays, so a cohort can be spread by quantiles.
func TestMonotoneInU(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	us := []float64{0, math.SmallestNonzeroFloat64, 1e-12, 0.5, math.Nextafter(1, 0), 1}
	for range 200 {
		us = append(us, r.Float64())
	}
	sort.Float64s(us)
	for _, cfg := range testConfigs() {
		c := mustConfig(t, cfg)
		p := mustNew(t, cfg)
		for range 200 {
			attempt := r.IntN(80)
			prev := time.Duration(r.Int64N(int64(3 * c.Cap)))
			last := time.Duration(-1)
			for _, u := range us {
				d := p.Delay(attempt, prev, u)
				if d < last {
					t.Fatalf("%s attempt %d prev %v: Delay(u=%v) = %v is below the delay at a smaller u, %v", c.Policy, attempt, prev, u, d, last)
				}
				last = d
			}
		}
	}
}

// TestMonotoneInAttemptAndPrev checks that, at a fixed u, the exponential
// family never shrinks as the attempt grows and decorrelated jitter never
// shrinks as the previous delay grows.
func TestMonotoneInAttemptAndPrev(t *testing.T) {
	for _, cfg := range testConfigs() {
		c := mustConfig(t, cfg)
		p := mustNew(t, cfg)
		for _, u := range []float64{0, 0.25, 0.5, 0.99, 1} {
			last := time.Duration(-1)
			for n := 1; n <= 1100; n++ { // from 1: grpc's attempt 0 is unjittered
				var d time.Duration
				if c.Policy == PolicyDecorrelated {
					d = p.Delay(3, time.Duration(n)*c.Base/10, u)
				} else {
					d = p.Delay(n, 0, u)
				}
				if d < last {
					t.Fatalf("%s u=%v step %d: %v is below the previous step's %v", c.Policy, u, n, d, last)
				}
				last = d
			}
		}
	}
}

// TestUClamp checks the documented handling of u outside [0, 1]: NaN and
// negative values act as 0, values above 1 (and +Inf) act as 1.
func TestUClamp(t *testing.T) {
	for _, cfg := range testConfigs() {
		p := mustNew(t, cfg)
		for _, attempt := range []int{1, 5} {
			lo, hi := Bounds(p, attempt, time.Second)
			for _, u := range []float64{math.NaN(), -0.5, math.Inf(-1), math.Copysign(0, -1)} {
				if d := p.Delay(attempt, time.Second, u); d != lo {
					t.Errorf("%s: Delay(u=%v) = %v, want the lower bound %v", p.Name(), u, d, lo)
				}
			}
			for _, u := range []float64{1.5, math.Inf(1)} {
				if d := p.Delay(attempt, time.Second, u); d != hi {
					t.Errorf("%s: Delay(u=%v) = %v, want the upper bound %v", p.Name(), u, d, hi)
				}
			}
		}
	}
}

// TestOverflow checks that huge attempt numbers, huge previous delays,
// negative inputs and a cap at the largest Duration neither overflow nor go
// negative, and that attempt 1000 sits at the cap.
func TestOverflow(t *testing.T) {
	cfgs := []Config{
		{Policy: PolicyExponential, Base: 1, Cap: math.MaxInt64, Multiplier: 1000},
		{Policy: PolicyFull, Base: time.Hour, Cap: math.MaxInt64},
		{Policy: PolicyEqual, Base: time.Nanosecond, Cap: math.MaxInt64, Multiplier: 1.0000001},
		{Policy: PolicyDecorrelated, Base: time.Hour, Cap: math.MaxInt64, Multiplier: 1e300},
		{Policy: PolicyGRPC, Base: time.Second, Cap: math.MaxInt64},
		{Policy: PolicyNone, Base: math.MaxInt64, Cap: math.MaxInt64},
	}
	cfgs = append(cfgs, testConfigs()...)
	attempts := []int{-1, math.MinInt, 0, 1, 63, 64, 1000, 1 << 20, math.MaxInt32, math.MaxInt}
	prevs := []time.Duration{math.MinInt64, -1, 0, math.MaxInt64 / 3, math.MaxInt64}
	for _, cfg := range cfgs {
		c := mustConfig(t, cfg)
		p := mustNew(t, cfg)
		ceiling := c.Cap
		if c.Policy == PolicyGRPC {
			ceiling = toDuration(float64(c.Cap) * (1 + c.Jitter))
		}
		for _, n := range attempts {
			for _, prev := range prevs {
				for _, u := range []float64{0, 0.5, 1} {
					d := p.Delay(n, prev, u)
					if d < 0 || d > ceiling {
						t.Errorf("%s %+v: Delay(%d, %v, %v) = %v, want within [0, %v]", c.Policy, cfg, n, prev, u, d, ceiling)
					}
				}
			}
		}
		if c.Policy == PolicyExponential {
			if d := p.Delay(1000, 0, 0.5); d != c.Cap {
				t.Errorf("exponential %+v: attempt 1000 = %v, want the cap %v", cfg, d, c.Cap)
			}
		}
	}
	// The envelope past the precomputed table: a multiplier so close to 1
	// that the cap is far away.
	p := mustNew(t, Config{Policy: PolicyExponential, Base: time.Second, Cap: time.Hour, Multiplier: 1.001})
	want := time.Duration(float64(time.Second) * math.Pow(1.001, 1000))
	if d := p.Delay(1000, 0, 0); d < want-1 || d > want+1 {
		t.Errorf("multiplier 1.001, attempt 1000: %v, want %v", d, want)
	}
	if d := p.Delay(math.MaxInt, 0, 0); d != time.Hour {
		t.Errorf("multiplier 1.001, attempt MaxInt: %v, want the cap 1h", d)
	}
}

// hintWidth is the documented relative width of each policy's hint window.
func hintWidth(c Config) float64 {
	switch c.Policy {
	case PolicyFull:
		return 1
	case PolicyEqual:
		return 0.5
	case PolicyDecorrelated:
		return c.Multiplier - 1
	case PolicyGRPC:
		return 2 * c.Jitter
	}
	return 0
}

// TestHintDelay checks the hint rule: the delay lies in [h, h*(1+w)], its
// mean is h*(1+w/2), a hint above the cap is honoured, a hint above MaxHint
// is clamped to it, and a hint of zero or less gives zero.
func TestHintDelay(t *testing.T) {
	for _, cfg := range testConfigs() {
		c := mustConfig(t, cfg)
		p := mustNew(t, cfg)
		w := hintWidth(c)
		for _, h := range []time.Duration{time.Millisecond, 3 * time.Second, 10 * c.Cap, 2 * time.Hour} {
			t.Run(fmt.Sprintf("%s/cap=%v/hint=%v", c.Policy, c.Cap, h), func(t *testing.T) {
				floor := min(h, c.MaxHint)
				top := float64(floor) * (1 + w)
				if lo := p.HintDelay(h, 0); lo != floor {
					t.Errorf("HintDelay(u=0) = %v, want the floor %v", lo, floor)
				}
				if hi := p.HintDelay(h, 1); math.Abs(float64(hi)-top) > 1 {
					t.Errorf("HintDelay(u=1) = %v, want %v", hi, time.Duration(top))
				}
				r := rand.New(rand.NewPCG(9, uint64(h)))
				const draws = 20_000
				var sum float64
				for range draws {
					d := p.HintDelay(h, r.Float64())
					if d < floor || float64(d) > top+1 {
						t.Fatalf("HintDelay = %v, want within [%v, %v]", d, floor, time.Duration(top))
					}
					sum += float64(d)
				}
				want := float64(floor) * (1 + w/2)
				tol := 5*(float64(floor)*w/math.Sqrt(12))/math.Sqrt(draws) + 1
				if mean := sum / draws; math.Abs(mean-want) > tol {
					t.Errorf("mean %v, want %v +- %v", time.Duration(mean), time.Duration(want), time.Duration(tol))
				}
			})
		}
		for _, h := range []time.Duration{0, -time.Second, math.MinInt64} {
			if d := p.HintDelay(h, 0.5); d != 0 {
				t.Errorf("%s: HintDelay(%v) = %v, want 0", c.Policy, h, d)
			}
		}
		if d := p.HintDelay(math.MaxInt64, 1); d < c.MaxHint {
			t.Errorf("%s: HintDelay(MaxInt64) = %v, want at least MaxHint %v", c.Policy, d, c.MaxHint)
		}
	}
	p := mustNew(t, Config{Policy: PolicyFull, MaxHint: math.MaxInt64})
	if d := p.HintDelay(math.MaxInt64, 1); d != math.MaxInt64 {
		t.Errorf("full jitter, MaxHint MaxInt64: HintDelay(MaxInt64, 1) = %v, want MaxInt64 (saturated)", d)
	}
}

// TestZeroValuePolicies checks the documented zero values: every delay is 0
// and nothing panics.
func TestZeroValuePolicies(t *testing.T) {
	for _, p := range []Policy{&None{}, &Exponential{}, &FullJitter{}, &EqualJitter{}, &DecorrelatedJitter{}, &GRPC{}} {
		if d := p.Delay(5, time.Second, 0.5); d != 0 {
			t.Errorf("zero %T: Delay = %v, want 0", p, d)
		}
		if d := p.HintDelay(time.Second, 0.5); d != 0 {
			t.Errorf("zero %T: HintDelay = %v, want 0", p, d)
		}
	}
}
