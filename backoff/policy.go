package backoff

import (
	"math"
	"time"
)

// Policy is a reconnect delay policy written as a pure function. Build one
// with New or Parse.
//
// Delay returns the delay before retry number attempt (0 is the first retry,
// after the first failure), given the previous delay prev (0 when there is
// none) and a uniform number u. Delay is deterministic and monotone
// non-decreasing in u, so it is the quantile function of the delay the policy
// draws: u = 0 gives the smallest possible delay and u = 1 the largest. A u
// outside [0, 1] is clamped into it and a NaN u is treated as 0; a negative
// attempt is treated as 0 and a negative prev as 0. Delay never overflows and
// never returns a negative duration, whatever the attempt number.
//
// HintDelay returns the delay to use instead when the server sent a
// retry-after hint: it is drawn from [h, h*(1+w)] by the same u, where h is
// the hint clamped to the policy's maximum hint and w the relative width of
// the policy's jitter (see the package documentation). A hint of zero or less
// gives zero.
//
// Name returns the policy's configuration name ("full", "grpc", ...).
//
// Implementations in this package are immutable and safe for concurrent use.
type Policy interface {
	Name() string
	Delay(attempt int, prev time.Duration, u float64) time.Duration
	HintDelay(retryAfter time.Duration, u float64) time.Duration
}

// Compile-time checks that every policy implements Policy.
var (
	_ Policy = (*None)(nil)
	_ Policy = (*Exponential)(nil)
	_ Policy = (*FullJitter)(nil)
	_ Policy = (*EqualJitter)(nil)
	_ Policy = (*DecorrelatedJitter)(nil)
	_ Policy = (*GRPC)(nil)
)

// Bounds returns the smallest and the largest delay p can return for this
// attempt and previous delay: p.Delay at u = 0 and at u = 1.
func Bounds(p Policy, attempt int, prev time.Duration) (lo, hi time.Duration) {
	return p.Delay(attempt, prev, 0), p.Delay(attempt, prev, 1)
}

// maxSteps bounds the table of precomputed exponential steps. Attempts past
// the table fall back to math.Pow, which only happens when the multiplier is
// so close to 1 that the cap is not reached in maxSteps attempts.
const maxSteps = 128

// shape holds what every policy shares: the base, the cap, the multiplier of
// the exponential envelope, a table of the envelope's values below the cap,
// and the hint rule. It is immutable after newShape.
type shape struct {
	base, cap   time.Duration
	fbase, fcap float64 // base and cap in nanoseconds
	mult        float64
	steps       []float64 // steps[n] = base*mult^n while that is below cap
	capped      bool      // every attempt >= len(steps) is at the cap
	maxHint     time.Duration
	hintWidth   float64 // relative width w of the hint window [h, h*(1+w)]
}

func newShape(base, cap time.Duration, mult float64, maxHint time.Duration, hintWidth float64) shape {
	s := shape{
		base:      base,
		cap:       cap,
		fbase:     float64(base),
		fcap:      float64(cap),
		mult:      mult,
		maxHint:   maxHint,
		hintWidth: hintWidth,
	}
	steps := make([]float64, 0, 16)
	for n := 0; n < maxSteps; n++ {
		v := s.fbase * math.Pow(mult, float64(n))
		if !(v < s.fcap) {
			s.capped = true
			break
		}
		steps = append(steps, v)
	}
	s.steps = steps
	return s
}

// envelope returns min(cap, base*mult^n) in nanoseconds. It cannot overflow:
// past the table the power is computed in floating point, where a huge value
// becomes +Inf and is then replaced by the cap.
func (s *shape) envelope(n int) float64 {
	if n < 0 {
		n = 0
	}
	if n < len(s.steps) {
		return s.steps[n]
	}
	if s.capped {
		return s.fcap
	}
	v := s.fbase * math.Pow(s.mult, float64(n))
	if !(v < s.fcap) {
		return s.fcap
	}
	return v
}

// hinted implements HintDelay for every policy.
func (s *shape) hinted(h time.Duration, u float64) time.Duration {
	if h <= 0 {
		return 0
	}
	if h > s.maxHint {
		h = s.maxHint
	}
	fh := float64(h)
	d := toDuration(fh + clampU(u)*s.hintWidth*fh)
	if d < h { // float rounding must never take the delay below the hint
		d = h
	}
	return d
}

// limit returns d limited to the cap. Converting a float64 near a huge cap
// back to a Duration can round up past it, so the final clamp is done in
// integers.
func (s *shape) limit(d time.Duration) time.Duration {
	if d > s.cap {
		return s.cap
	}
	return d
}

// clampU maps u into [0, 1]; NaN and negative values become 0.
func clampU(u float64) float64 {
	if !(u > 0) {
		return 0
	}
	if u > 1 {
		return 1
	}
	return u
}

// twoTo63 is 2^63, the first float64 that does not fit in a Duration.
const twoTo63 = float64(1 << 63)

// toDuration converts nanoseconds to a Duration, mapping NaN and negative
// values to 0 and values past the int64 range to the largest Duration.
func toDuration(ns float64) time.Duration {
	if !(ns > 0) {
		return 0
	}
	if ns >= twoTo63 {
		return math.MaxInt64
	}
	return time.Duration(ns)
}

// None retries after a constant delay: the base, limited by the cap. A base
// of zero retries at once, the naive client of a thundering herd. It ignores
// the attempt number, the previous delay and u; a hint is followed exactly.
// The zero value always returns 0. None is safe for concurrent use.
type None struct{ s shape }

// Name returns "none".
func (p *None) Name() string { return "none" }

// Delay returns min(base, cap).
func (p *None) Delay(attempt int, prev time.Duration, u float64) time.Duration {
	return p.s.limit(p.s.base)
}

// HintDelay returns the hint clamped to the maximum hint, without jitter.
func (p *None) HintDelay(retryAfter time.Duration, u float64) time.Duration {
	return p.s.hinted(retryAfter, u)
}

// Exponential is exponential backoff without jitter: min(cap,
// base*multiplier^attempt). Every client that failed at the same moment
// retries at the same moment, which is what the AWS study shows to be the
// worst choice under contention; it is here as the baseline. A hint is
// followed exactly. The zero value always returns 0. Exponential is safe for
// concurrent use.
type Exponential struct{ s shape }

// Name returns "exponential".
func (p *Exponential) Name() string { return "exponential" }

// Delay returns min(cap, base*multiplier^attempt); u and prev are ignored.
func (p *Exponential) Delay(attempt int, prev time.Duration, u float64) time.Duration {
	return p.s.limit(toDuration(p.s.envelope(attempt)))
}

// HintDelay returns the hint clamped to the maximum hint, without jitter.
func (p *Exponential) HintDelay(retryAfter time.Duration, u float64) time.Duration {
	return p.s.hinted(retryAfter, u)
}

// FullJitter is the AWS study's full jitter: a delay drawn uniformly from
// [0, v] where v = min(cap, base*multiplier^attempt), so Delay is u*v. A hint
// h gives a delay in [h, 2h]. The zero value always returns 0. FullJitter is
// safe for concurrent use.
type FullJitter struct{ s shape }

// Name returns "full".
func (p *FullJitter) Name() string { return "full" }

// Delay returns u*min(cap, base*multiplier^attempt); prev is ignored.
func (p *FullJitter) Delay(attempt int, prev time.Duration, u float64) time.Duration {
	return p.s.limit(toDuration(clampU(u) * p.s.envelope(attempt)))
}

// HintDelay returns h + u*h for the clamped hint h.
func (p *FullJitter) HintDelay(retryAfter time.Duration, u float64) time.Duration {
	return p.s.hinted(retryAfter, u)
}

// EqualJitter is the AWS study's equal jitter: half of v =
// min(cap, base*multiplier^attempt) is kept and the other half drawn
// uniformly, so Delay is v/2 + u*v/2. A hint h gives a delay in [h, 1.5h].
// The zero value always returns 0. EqualJitter is safe for concurrent use.
type EqualJitter struct{ s shape }

// Name returns "equal".
func (p *EqualJitter) Name() string { return "equal" }

// Delay returns v/2 + u*v/2 with v = min(cap, base*multiplier^attempt); prev
// is ignored.
func (p *EqualJitter) Delay(attempt int, prev time.Duration, u float64) time.Duration {
	v := p.s.envelope(attempt)
	return p.s.limit(toDuration(v/2 + clampU(u)*v/2))
}

// HintDelay returns h + u*h/2 for the clamped hint h.
func (p *EqualJitter) HintDelay(retryAfter time.Duration, u float64) time.Duration {
	return p.s.hinted(retryAfter, u)
}

// DecorrelatedJitter is the AWS study's decorrelated jitter: the next delay
// is min(cap, uniform(base, prev*multiplier)), with multiplier 3 in the
// study. It depends on the previous delay, not on the attempt number; a prev
// below the base (0 before the first retry) counts as the base. Because the
// draw is cut at the cap, once prev*multiplier passes the cap a large share of
// draws (about 2/3 with multiplier 3) land exactly on the cap. A hint h gives
// a delay in [h, h*multiplier]. The zero value always returns 0.
// DecorrelatedJitter is safe for concurrent use.
type DecorrelatedJitter struct{ s shape }

// Name returns "decorrelated".
func (p *DecorrelatedJitter) Name() string { return "decorrelated" }

// Delay returns min(cap, base + u*(max(base, prev*multiplier) - base)), with
// prev raised to the base when it is below it; attempt is ignored.
func (p *DecorrelatedJitter) Delay(attempt int, prev time.Duration, u float64) time.Duration {
	lo := p.s.fbase
	hi := float64(prev)
	if hi < lo {
		hi = lo
	}
	hi *= p.s.mult
	if hi < lo {
		hi = lo
	}
	d := lo + clampU(u)*(hi-lo)
	if !(d < p.s.fcap) {
		return p.s.cap
	}
	return p.s.limit(toDuration(d))
}

// HintDelay returns h + u*h*(multiplier-1) for the clamped hint h.
func (p *DecorrelatedJitter) HintDelay(retryAfter time.Duration, u float64) time.Duration {
	return p.s.hinted(retryAfter, u)
}

// GRPC is the gRPC connection backoff protocol
// (github.com/grpc/grpc doc/connection-backoff.md): the first retry waits
// INITIAL_BACKOFF (the base) exactly, and retry n waits
// c*(1 + jitter*(2u-1)) with c = min(MAX_BACKOFF, base*multiplier^n), so a
// delay lies within +-jitter of c. As in the protocol and in grpc-go, the cap
// bounds c, not the jittered delay, which can reach (1+jitter)*cap (144 s
// with the defaults), and the first retry is not jittered, so clients that
// failed together make their second attempt together. Defaults: base 1 s,
// multiplier 1.6, jitter 0.2, cap 120 s, minimum connect timeout 20 s. A hint
// h gives a delay in [h, h*(1+2*jitter)].
//
// The protocol measures a delay from the start of the failed attempt and
// gives each attempt a deadline of max(delay, MIN_CONNECT_TIMEOUT); see
// ConnectTimeout. The zero value always returns 0. GRPC is safe for
// concurrent use.
type GRPC struct {
	s          shape
	jitter     float64
	minConnect time.Duration
}

// Name returns "grpc".
func (p *GRPC) Name() string { return "grpc" }

// Delay returns the base for attempt 0 and c*(1 + jitter*(2u-1)) with
// c = min(cap, base*multiplier^attempt) after that; prev is ignored.
func (p *GRPC) Delay(attempt int, prev time.Duration, u float64) time.Duration {
	if attempt <= 0 {
		return p.s.limit(p.s.base)
	}
	c := p.s.envelope(attempt)
	return toDuration(c * (1 + p.jitter*(2*clampU(u)-1)))
}

// HintDelay returns h + u*h*2*jitter for the clamped hint h.
func (p *GRPC) HintDelay(retryAfter time.Duration, u float64) time.Duration {
	return p.s.hinted(retryAfter, u)
}

// MinConnectTimeout returns MIN_CONNECT_TIMEOUT, the least time an attempt is
// given to connect.
func (p *GRPC) MinConnectTimeout() time.Duration { return p.minConnect }

// ConnectTimeout returns the deadline the protocol gives a connection attempt
// that will be followed, on failure, by a wait of delay measured from the
// attempt's start: max(delay, MinConnectTimeout).
func (p *GRPC) ConnectTimeout(delay time.Duration) time.Duration {
	return max(delay, p.minConnect)
}
