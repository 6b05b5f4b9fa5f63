package limit

import (
	"errors"
	"math"
	"testing"
	"time"

	"github.com/corralhq/corral/internal/testkit"
)

// FuzzSample feeds arbitrary samples to every algorithm and to a Limiter
// with explicit times: invalid input is refused with ErrInvalidSample and
// leaves the limit alone, nothing panics, and the limit stays in bounds.
func FuzzSample(f *testing.F) {
	f.Add(int64(0), int64(10_000_000), 5, false, int64(1), 0.01)
	f.Add(int64(-5), int64(-1), -1, true, int64(-1), math.NaN())
	f.Add(int64(1<<62), int64(math.MaxInt64), math.MaxInt, false, int64(math.MaxInt64), math.Inf(1))
	f.Add(int64(1), int64(0), 0, true, int64(0), math.Copysign(0, -1))
	f.Add(int64(7), int64(time.Hour)+1, 3, false, int64(1<<41), 3600.0001)
	f.Fuzz(func(t *testing.T, startNs, rttNs int64, inFlight int, dropped bool, weight int64, secs float64) {
		c := Common{InitialLimit: 10, MinLimit: 2, MaxLimit: 50, Window: time.Millisecond, MinSamples: 1}
		ls := algorithms(t, c)
		fixed, _ := NewFixed(10)
		ls["fixed"] = fixed
		start := simEpoch.Add(time.Duration(startNs % int64(100*365*24*time.Hour)))
		s := Sample{Start: start, RTT: time.Duration(rttNs), InFlight: inFlight, Dropped: dropped, Weight: weight}
		valid := s.Validate() == nil
		for name, l := range ls {
			for i := range 3 { // several windows
				s.Start = start.Add(time.Duration(i) * time.Millisecond)
				before := l.Limit()
				got, err := l.Update(s)
				if valid != (err == nil) {
					t.Fatalf("%s: Validate says valid=%v, Update error %v", name, valid, err)
				}
				if err != nil && (!errors.Is(err, ErrInvalidSample) || got != before) {
					t.Fatalf("%s: invalid sample: error %v, limit %d -> %d", name, err, before, got)
				}
				if lim := l.Limit(); lim < 1 || lim > 50 || (name != "fixed" && lim < 2) {
					t.Fatalf("%s: limit %d out of bounds", name, lim)
				}
			}
		}
		fs, err := SampleFromSeconds(start, secs, inFlight, dropped)
		finite := !math.IsNaN(secs) && !math.IsInf(secs, 0) && secs >= 0 && secs <= MaxRTT.Seconds()
		if err == nil && (!finite || fs.Validate() != nil) {
			t.Fatalf("SampleFromSeconds(%v) accepted", secs)
		}
		if err != nil && !errors.Is(err, ErrInvalidSample) {
			t.Fatalf("SampleFromSeconds(%v): %v", secs, err)
		}
		// A Limiter whose caller passes times that go backwards or jump.
		clock := testkit.NewClock(start)
		lim, err := NewLimiter(LimiterConfig{Limit: ls["gradient"], Clock: clock})
		if err != nil {
			t.Fatal(err)
		}
		tok, ok := lim.TryAcquireAt(start)
		if !ok {
			t.Fatal("rejected on an empty limiter")
		}
		end := start.Add(time.Duration(rttNs))
		if dropped {
			tok.DropAt(end)
		} else {
			tok.SuccessAt(end)
		}
		if n := lim.InFlight(); n != 0 {
			t.Fatalf("in-flight %d after release", n)
		}
	})
}
