package limit

import (
	"errors"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

// algorithms returns one of each adaptive Limit built from c.
func algorithms(t *testing.T, c Common) map[string]Limit {
	t.Helper()
	g, err := NewGradient(GradientConfig{Common: c})
	if err != nil {
		t.Fatal(err)
	}
	g2, err := NewGradient2(Gradient2Config{Common: c})
	if err != nil {
		t.Fatal(err)
	}
	v, err := NewVegas(VegasConfig{Common: c})
	if err != nil {
		t.Fatal(err)
	}
	a, err := NewAIMD(AIMDConfig{Common: c})
	if err != nil {
		t.Fatal(err)
	}
	return map[string]Limit{"gradient": g, "gradient2": g2, "vegas": v, "aimd": a}
}

// feedWindow feeds one window's worth of samples (20 of them) at a
// constant latency and in-flight count and returns the limit after it.
func feedWindow(t *testing.T, l Limit, at *time.Time, window time.Duration, rtt time.Duration, inFlight func(limit int) int) int {
	t.Helper()
	step := window / 20
	var lim int
	for range 20 {
		*at = at.Add(step)
		var err error
		lim, err = l.Update(Sample{Start: *at, RTT: rtt, InFlight: inFlight(l.Limit())})
		if err != nil {
			t.Fatal(err)
		}
	}
	return lim
}

func saturated(limit int) int { return limit }

func TestSlowStartReachesTenThousandInSeconds(t *testing.T) {
	for name, l := range algorithms(t, Common{}) {
		t.Run(name, func(t *testing.T) {
			at := simEpoch
			windows := 0
			for l.Limit() < 10_000 && windows < 1000 {
				feedWindow(t, l, &at, 500*time.Millisecond, 10*time.Millisecond, saturated)
				windows++
			}
			took := at.Sub(simEpoch)
			t.Logf("20 -> %d in %d windows (%v of samples)", l.Limit(), windows, took)
			if l.Limit() != 10_000 {
				t.Fatalf("limit %d after %d windows, want the max 10000", l.Limit(), windows)
			}
			if took > 6*time.Second {
				t.Errorf("20 -> 10000 took %v, want seconds (<= 6 s)", took)
			}
		})
	}
}

func TestLimitStaysWithinBounds(t *testing.T) {
	c := Common{InitialLimit: 50, MinLimit: 5, MaxLimit: 400, Window: 100 * time.Millisecond}
	for name, l := range algorithms(t, c) {
		t.Run(name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(1, 2))
			at := simEpoch
			for i := range 20_000 {
				at = at.Add(time.Duration(rng.IntN(20)) * time.Millisecond)
				s := Sample{
					Start:    at,
					RTT:      time.Duration(rng.ExpFloat64() * float64(time.Duration(1+rng.IntN(100))*time.Millisecond)),
					InFlight: rng.IntN(800),
					Dropped:  rng.IntN(50) == 0,
				}
				got, err := l.Update(s)
				if err != nil {
					t.Fatal(err)
				}
				if got < 5 || got > 400 || got != l.Limit() {
					t.Fatalf("sample %d: limit %d (Limit() %d) outside [5, 400]", i, got, l.Limit())
				}
			}
		})
	}
}

func TestIdleLimitDoesNotCreep(t *testing.T) {
	for _, tc := range []struct {
		name   string
		demand int
		max    int
	}{
		{name: "demand far below the limit", demand: 5, max: 20},
		{name: "demand near half the limit", demand: 15, max: 64},
	} {
		for name, l := range algorithms(t, Common{}) {
			t.Run(tc.name+"/"+name, func(t *testing.T) {
				at := simEpoch
				for range 2000 {
					feedWindow(t, l, &at, 500*time.Millisecond, 10*time.Millisecond, func(int) int { return tc.demand })
				}
				if l.Limit() > tc.max {
					t.Errorf("limit crept to %d after 2000 windows with %d in flight, want <= %d", l.Limit(), tc.demand, tc.max)
				}
			})
		}
	}
}

func TestOneLuckyWindowDoesNotSetTheIdeal(t *testing.T) {
	g, err := NewGradient(GradientConfig{Ideal: IdealConfig{Probe: ProbeConfig{Interval: -1}}})
	if err != nil {
		t.Fatal(err)
	}
	at := simEpoch
	half := func(limit int) int { return limit / 2 }
	for range 40 {
		feedWindow(t, g, &at, 500*time.Millisecond, 10*time.Millisecond, half)
	}
	before := g.Limit()
	// One window of very fast answers (a cache hit, an error path).
	feedWindow(t, g, &at, 500*time.Millisecond, 100*time.Microsecond, half)
	for range 5 {
		feedWindow(t, g, &at, 500*time.Millisecond, 10*time.Millisecond, half)
	}
	s := g.Stats()
	if s.IdealRTT < 9*time.Millisecond {
		t.Errorf("ideal %v after one lucky window, want about 10ms", s.IdealRTT)
	}
	if g.Limit() < before/2 {
		t.Errorf("limit fell from %d to %d after one lucky window", before, g.Limit())
	}
}

func TestDroppedSamplesCarryNoLatency(t *testing.T) {
	for name, l := range algorithms(t, Common{InitialLimit: 100}) {
		t.Run(name, func(t *testing.T) {
			at := simEpoch
			half := func(limit int) int { return limit / 2 }
			for range 3 {
				feedWindow(t, l, &at, 500*time.Millisecond, 10*time.Millisecond, half)
			}
			before := l.Stats()
			// A window of work rejected downstream, reported with zero
			// latency as the anchors' users see it.
			for range 20 {
				at = at.Add(25 * time.Millisecond)
				if _, err := l.Update(Sample{Start: at, RTT: 0, InFlight: before.Limit, Dropped: true}); err != nil {
					t.Fatal(err)
				}
			}
			after := l.Stats()
			if after.Limit >= before.Limit {
				t.Errorf("limit %d -> %d after a window of drops, want a decrease", before.Limit, after.Limit)
			}
			if after.RTT != before.RTT || (after.IdealRTT != 0 && after.IdealRTT < before.IdealRTT) {
				t.Errorf("latency estimates moved on dropped work: rtt %v -> %v, ideal %v -> %v", before.RTT, after.RTT, before.IdealRTT, after.IdealRTT)
			}
		})
	}
}

func TestInvalidSamplesAreRejectedAndCounted(t *testing.T) {
	f, _ := NewFixed(10)
	ls := algorithms(t, Common{})
	ls["fixed"] = f
	bad := []struct {
		name string
		s    Sample
		want string
	}{
		{name: "zero start", s: Sample{RTT: time.Millisecond}, want: "zero start"},
		{name: "negative rtt", s: Sample{Start: simEpoch, RTT: -time.Millisecond}, want: "negative rtt"},
		{name: "huge rtt", s: Sample{Start: simEpoch, RTT: MaxRTT + 1}, want: "above"},
		{name: "negative in-flight", s: Sample{Start: simEpoch, InFlight: -1}, want: "in-flight"},
		{name: "negative weight", s: Sample{Start: simEpoch, Weight: -3}, want: "weight"},
		{name: "huge weight", s: Sample{Start: simEpoch, Weight: 1 << 50}, want: "weight"},
	}
	for name, l := range ls {
		for i, tc := range bad {
			t.Run(name+"/"+tc.name, func(t *testing.T) {
				before := l.Limit()
				got, err := l.Update(tc.s)
				if !errors.Is(err, ErrInvalidSample) || !strings.HasPrefix(err.Error(), "limit: ") || !strings.Contains(err.Error(), tc.want) {
					t.Errorf("error %v, want ErrInvalidSample mentioning %q", err, tc.want)
				}
				if got != before || l.Limit() != before {
					t.Errorf("limit moved %d -> %d on an invalid sample", before, got)
				}
				if n := l.Stats().Invalid; n != int64(i+1) {
					t.Errorf("invalid count %d, want %d", n, i+1)
				}
			})
		}
	}
}

func TestSampleFromSeconds(t *testing.T) {
	for _, tc := range []struct {
		name string
		secs float64
		ok   bool
	}{
		{name: "10 ms", secs: 0.01, ok: true},
		{name: "zero", secs: 0, ok: true},
		{name: "NaN", secs: math.NaN()},
		{name: "+Inf", secs: math.Inf(1)},
		{name: "-Inf", secs: math.Inf(-1)},
		{name: "negative", secs: -1},
		{name: "two hours", secs: 7200},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := SampleFromSeconds(simEpoch, tc.secs, 3, false)
			if tc.ok != (err == nil) {
				t.Fatalf("SampleFromSeconds(%v) error %v, want ok=%v", tc.secs, err, tc.ok)
			}
			if err != nil && !errors.Is(err, ErrInvalidSample) {
				t.Errorf("error %v does not wrap ErrInvalidSample", err)
			}
			if tc.ok && s.RTT != time.Duration(tc.secs*float64(time.Second)) {
				t.Errorf("rtt %v", s.RTT)
			}
		})
	}
}

func TestConfigValidation(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
	}{
		{name: "gradient max below min", err: GradientConfig{Common: Common{MinLimit: 10, MaxLimit: 5, InitialLimit: 7}}.Validate()},
		{name: "gradient initial above max", err: GradientConfig{Common: Common{MaxLimit: 10, InitialLimit: 11}}.Validate()},
		{name: "gradient percentile above 1", err: GradientConfig{Common: Common{Percentile: 1.5}}.Validate()},
		{name: "gradient tolerance below 1", err: GradientConfig{Tolerance: 0.5}.Validate()},
		{name: "gradient negative queue", err: GradientConfig{QueueSize: -1}.Validate()},
		{name: "gradient negative window", err: GradientConfig{Common: Common{Window: -time.Second}}.Validate()},
		{name: "gradient huge max", err: GradientConfig{Common: Common{MaxLimit: 1 << 31}}.Validate()},
		{name: "gradient2 smoothing above 1", err: Gradient2Config{Smoothing: 2}.Validate()},
		{name: "vegas ideal windows", err: VegasConfig{Ideal: IdealConfig{Windows: -1}}.Validate()},
		{name: "aimd backoff above 1", err: AIMDConfig{BackoffRatio: 1.1}.Validate()},
		{name: "aimd negative timeout", err: AIMDConfig{Timeout: -1}.Validate()},
		{name: "limiter reserves sum to 1", err: LimiterConfig{Reserve: Reserve{P0: 0.5, P1: 0.5}}.Validate()},
		{name: "shedder negative target", err: ShedderConfig{Target: -time.Second}.Validate()},
		{name: "shedder low above high", err: ShedderConfig{Resources: ResourceConfig{Low: 0.95, High: 0.9}}.Validate()},
		{name: "shedder retry max below min", err: ShedderConfig{Retry: RetryConfig{Min: time.Minute, Max: time.Second}}.Validate()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.err == nil || !strings.HasPrefix(tc.err.Error(), "limit: ") {
				t.Errorf("got %v, want an error starting with \"limit: \"", tc.err)
			}
		})
	}
	for _, err := range []error{GradientConfig{}.Validate(), Gradient2Config{}.Validate(), VegasConfig{}.Validate(),
		AIMDConfig{}.Validate(), LimiterConfig{}.Validate(), ShedderConfig{}.Validate()} {
		if err != nil {
			t.Errorf("zero config invalid: %v", err)
		}
	}
	if _, err := NewFixed(0); err == nil {
		t.Error("NewFixed(0) accepted")
	}
}
