package limit

import (
	"errors"
	"fmt"
	"math"
	"time"
)

// MaxRTT is the largest latency a Sample may carry. Longer latencies are
// not request latencies (a stream that lives for hours is not a sample) and
// are rejected with ErrInvalidSample.
const MaxRTT = time.Hour

// ErrInvalidSample is wrapped by every error returned for a sample that a
// Limit refuses: negative, NaN, infinite or huge latency, negative in-flight
// count or weight, or a zero start time.
var ErrInvalidSample = errors.New("limit: invalid sample")

// Sample is one observation fed to a Limit: when the work started, how long
// it took, how much work was in flight when it started and whether it was
// dropped (timed out, failed from overload).
//
// A Sample may stand for many requests at once: Weight says how many. The
// cohort simulator feeds one aggregated Sample per simulated step and origin
// (RTT the step's latency, Weight the number of requests it stands for); the
// Limiter feeds one Sample per histogram bucket when it flushes.
//
// The zero Sample is invalid because its Start is zero.
type Sample struct {
	// Start is when the work started. Limits use it only to cut their
	// measurement windows, so simulated time works as well as wall time.
	// Samples that arrive out of order are counted in the open window.
	Start time.Time
	// RTT is the latency of the work: for connection admission the
	// handshake latency, for in-flight messages the processing latency.
	// It must be in [0, MaxRTT]. It is ignored when Dropped is true, so
	// rejected or dropped work never reports a zero latency.
	RTT time.Duration
	// InFlight is the number of units of work in flight when this one
	// started (including itself). Limits use it to tell an application that
	// does not use its limit from one that hits it.
	InFlight int
	// Dropped reports that the work failed from overload (timeout, shed
	// downstream). A window with drops decreases the limit.
	Dropped bool
	// Weight is the number of requests this Sample stands for. Zero means 1.
	Weight int64
}

// weight returns the effective weight of s.
func (s Sample) weight() int64 {
	if s.Weight == 0 {
		return 1
	}
	return s.Weight
}

// Validate reports whether s can be fed to a Limit. The error wraps
// ErrInvalidSample and names the bad field.
func (s Sample) Validate() error {
	switch {
	case s.Start.IsZero():
		return fmt.Errorf("%w: zero start time", ErrInvalidSample)
	case s.RTT < 0 && !s.Dropped:
		return fmt.Errorf("%w: negative rtt %v", ErrInvalidSample, s.RTT)
	case s.RTT > MaxRTT && !s.Dropped:
		return fmt.Errorf("%w: rtt %v above %v", ErrInvalidSample, s.RTT, MaxRTT)
	case s.InFlight < 0:
		return fmt.Errorf("%w: negative in-flight %d", ErrInvalidSample, s.InFlight)
	case s.Weight < 0:
		return fmt.Errorf("%w: negative weight %d", ErrInvalidSample, s.Weight)
	case s.Weight > maxWeight:
		return fmt.Errorf("%w: weight %d above %d", ErrInvalidSample, s.Weight, int64(maxWeight))
	}
	return nil
}

// maxWeight bounds Sample.Weight so that window totals cannot overflow.
const maxWeight = 1 << 40

// SampleFromSeconds builds a Sample from a latency in seconds, as a
// simulator that computes latencies in floating point has them. It returns
// an error wrapping ErrInvalidSample for NaN, infinite, negative or huge
// latencies instead of converting them silently.
func SampleFromSeconds(start time.Time, seconds float64, inFlight int, dropped bool) (Sample, error) {
	if math.IsNaN(seconds) || math.IsInf(seconds, 0) {
		return Sample{}, fmt.Errorf("%w: rtt %v seconds", ErrInvalidSample, seconds)
	}
	if seconds < 0 || seconds > MaxRTT.Seconds() {
		return Sample{}, fmt.Errorf("%w: rtt %v seconds outside [0, %v]", ErrInvalidSample, seconds, MaxRTT)
	}
	s := Sample{Start: start, RTT: time.Duration(seconds * float64(time.Second)), InFlight: inFlight, Dropped: dropped}
	return s, s.Validate()
}

// Limit is a concurrency limit algorithm: it turns observed samples into a
// limit on how much work may be in flight. Implementations are Gradient,
// Gradient2, Vegas, AIMD and Fixed; all are safe for concurrent use.
//
// Limit is the algorithm only; admission is the Limiter's job, and the
// cohort simulator calls Update directly with simulated times.
type Limit interface {
	// Update feeds one sample and returns the limit after it. An invalid
	// sample changes nothing and returns the current limit with an error
	// wrapping ErrInvalidSample; the Limit counts it (see Stats).
	Update(s Sample) (int, error)
	// Limit returns the current limit.
	Limit() int
	// Stats returns counters about the samples seen so far.
	Stats() LimitStats
}

// LimitStats counts what a Limit has seen.
type LimitStats struct {
	// Limit is the current limit.
	Limit int
	// Samples is the total weight of valid samples.
	Samples int64
	// Invalid is the number of rejected samples.
	Invalid int64
	// Windows is the number of measurement windows closed.
	Windows int64
	// SlowStart reports whether the limit is still in its slow-start
	// phase (doubling each uncongested window).
	SlowStart bool
	// RTT is the high-percentile latency of the last closed window.
	RTT time.Duration
	// IdealRTT is the current estimate of the latency without queueing.
	IdealRTT time.Duration
	// Probing reports that the current window runs at a reduced probe
	// limit to re-measure the ideal latency.
	Probing bool
}
