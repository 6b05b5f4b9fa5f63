package backoff

import (
	"math"
	"testing"
	"time"
)

// FuzzPolicy feeds arbitrary configurations and inputs to every policy. A
// configuration is either rejected by Validate with a "backoff: " error, or
// it builds a policy whose Delay and HintDelay never panic, never go
// negative, stay within the documented bounds and are monotone in u.
func FuzzPolicy(f *testing.F) {
	f.Add(uint8(2), int64(time.Second), int64(time.Minute), 2.0, 0.0, 3, int64(0), 0.5, 0.6, int64(time.Second))
	f.Add(uint8(5), int64(0), int64(0), 0.0, 0.0, 1000, int64(math.MaxInt64), math.NaN(), 2.0, int64(-1))
	f.Add(uint8(4), int64(1), int64(math.MaxInt64), 1e300, 0.0, math.MaxInt, int64(math.MinInt64), -1.0, math.Inf(1), int64(math.MaxInt64))
	f.Add(uint8(0), int64(-5), int64(10), math.Inf(1), 2.0, -7, int64(5), 0.0, 1.0, int64(0))
	f.Fuzz(func(t *testing.T, kind uint8, base, capv int64, mult, jitter float64, attempt int, prev int64, u1, u2 float64, hint int64) {
		names := Names()
		cfg := Config{
			Policy:     names[int(kind)%len(names)],
			Base:       time.Duration(base),
			Cap:        time.Duration(capv),
			Multiplier: mult,
			Jitter:     jitter,
		}
		if kind >= 200 {
			cfg.Policy = "bogus"
		}
		p, err := New(cfg)
		if err != nil {
			if verr := cfg.Validate(); verr == nil || verr.Error() != err.Error() {
				t.Fatalf("New error %v but Validate %v", err, verr)
			}
			if err.Error()[:9] != "backoff: " {
				t.Fatalf("error %q does not start with backoff: ", err)
			}
			return
		}
		c, _ := cfg.WithDefaults()
		ceiling := c.Cap
		if c.Policy == PolicyGRPC {
			ceiling = toDuration(float64(c.Cap) * (1 + c.Jitter))
		}
		// NaN is documented to act as 0; order the two u values with that.
		nan0 := func(u float64) float64 {
			if math.IsNaN(u) {
				return 0
			}
			return u
		}
		lo, hi := min(nan0(u1), nan0(u2)), max(nan0(u1), nan0(u2))
		dlo := p.Delay(attempt, time.Duration(prev), lo)
		dhi := p.Delay(attempt, time.Duration(prev), hi)
		if dlo < 0 || dhi < 0 || dlo > ceiling || dhi > ceiling {
			t.Fatalf("%+v: delays %v, %v outside [0, %v]", c, dlo, dhi, ceiling)
		}
		if dlo > dhi {
			t.Fatalf("%+v: Delay(u=%v) = %v > Delay(u=%v) = %v", c, lo, dlo, hi, dhi)
		}
		h := p.HintDelay(time.Duration(hint), u1)
		switch {
		case hint <= 0:
			if h != 0 {
				t.Fatalf("HintDelay(%d) = %v, want 0", hint, h)
			}
		default:
			floor := min(time.Duration(hint), c.MaxHint)
			if h < floor {
				t.Fatalf("HintDelay(%v) = %v below the floor %v", time.Duration(hint), h, floor)
			}
		}
	})
}
