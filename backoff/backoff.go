package backoff

import (
	"math"
	"math/rand/v2"
	"time"
)

// Rand is the source of uniform numbers a Backoff draws from. *rand.Rand of
// math/rand/v2 implements it; seed one (rand.New(rand.NewPCG(s1, s2))) to
// reproduce a run. Float64 should return a number in [0, 1); anything else is
// clamped by the policy.
type Rand interface {
	Float64() float64
}

// globalRand draws from math/rand/v2's top-level generator, which is safe for
// concurrent use and seeded by the runtime.
type globalRand struct{}

func (globalRand) Float64() float64 { return rand.Float64() }

// Backoff is the stateful reconnect schedule of one connection: Next returns
// the delay before the next attempt, Reset starts over after a success and
// Hint records a server's retry-after for the next delay. Next is the method
// most callers want.
//
// The zero value is usable: it is full jitter with the default parameters,
// drawing from math/rand/v2's top-level generator. A Backoff is not safe for
// concurrent use; each connection owns its own.
type Backoff struct {
	policy     Policy
	rnd        Rand
	minConnect time.Duration
	attempt    int
	prev       time.Duration
	hint       time.Duration // pending retry-after hint, 0 when none
	within     time.Duration // the pending hint's retry window, 0 when none
}

// NewBackoff builds a Backoff for the policy c describes, drawing its
// uniform numbers from rnd. A nil rnd uses math/rand/v2's top-level
// generator, which cannot be seeded; pass a seeded *rand.Rand for
// reproducible runs.
func NewBackoff(c Config, rnd Rand) (*Backoff, error) {
	c, err := c.WithDefaults()
	if err != nil {
		return nil, err
	}
	if rnd == nil {
		rnd = globalRand{}
	}
	return &Backoff{policy: newPolicy(c), rnd: rnd, minConnect: c.MinConnectTimeout}, nil
}

// init makes the zero value usable.
func (b *Backoff) init() {
	if b.policy == nil {
		// The zero Config is valid, so New cannot fail here.
		b.policy, _ = New(Config{})
	}
	if b.rnd == nil {
		b.rnd = globalRand{}
	}
}

// Next returns the delay to wait before the next attempt and advances the
// schedule. When a hint is pending it returns Policy.HintDelay of the hint
// instead of Policy.Delay (or, when the hint came with a retry window, a
// delay drawn uniformly within it: HintWithin) and consumes the hint;
// either way the attempt
// count advances and the returned delay becomes the previous delay that
// decorrelated jitter grows from. Next draws exactly one number from the
// random source per call.
func (b *Backoff) Next() time.Duration {
	b.init()
	u := b.rnd.Float64()
	var d time.Duration
	switch {
	case b.hint > 0 && b.within > 0:
		d = WindowDelay(b.policy, b.hint, b.within, u)
		b.hint, b.within = 0, 0
	case b.hint > 0:
		d = b.policy.HintDelay(b.hint, u)
		b.hint = 0
	default:
		d = b.policy.Delay(b.attempt, b.prev, u)
	}
	b.prev = d
	if b.attempt < math.MaxInt {
		b.attempt++
	}
	return d
}

// NextAfter is the delay before the next attempt after a failure that came
// with the server's retry hint retryAfter (zero or less: none): Hint then
// Next. With a hint the delay is drawn above it by Policy.HintDelay (the
// floor the server asked for, spread by the policy's own jitter, the rule
// sim applies to its cohorts); without one it is the schedule's next
// delay. Waiting the larger of the hint and the schedule's delay instead
// would land every device handed the same hint on the hint itself, in
// lock-step: the herd the hint was meant to spread. The client SDK and
// kraken reconnect by this rule.
func (b *Backoff) NextAfter(retryAfter time.Duration) time.Duration {
	b.Hint(retryAfter)
	return b.Next()
}

// NextAfterWithin is NextAfter for a hint that came with the server's
// retry window (wire.Close's RetryWithin): HintWithin then Next.
func (b *Backoff) NextAfterWithin(retryAfter, within time.Duration) time.Duration {
	b.HintWithin(retryAfter, within)
	return b.Next()
}

// Reset starts the schedule over, as after a successful connection: the
// attempt count and the previous delay go back to zero and a pending hint is
// dropped.
func (b *Backoff) Reset() {
	b.attempt, b.prev, b.hint, b.within = 0, 0, 0, 0
}

// Hint records a server's retry-after for the next call of Next. A hint of
// zero or less is ignored. When several hints arrive before Next, the
// largest wins, since each is a floor the server asked for.
func (b *Backoff) Hint(retryAfter time.Duration) { b.HintWithin(retryAfter, 0) }

// HintWithin records a server's retry-after with the retry window the
// server gave beside it: the next delay is drawn uniformly from
// [retryAfter, retryAfter + within] instead of above the hint by the
// policy's own jitter. A server that spaces the clients it refuses (a
// virtual queue handing out places at the rate it admits) knows the slot
// each should come back in; the policy's jitter on top, [h, 2h] for full
// jitter, would stretch the herd's return over as long again as the
// server planned (the shape of issue 14's 10x storm). The hint is clamped
// to the policy's maximum hint as Hint's is, and so is the window; a
// window of zero or less is none (the policy's jitter). When several hints
// arrive before Next, the largest wins with its own window.
func (b *Backoff) HintWithin(retryAfter, within time.Duration) {
	if retryAfter > b.hint {
		b.hint, b.within = retryAfter, max(within, 0)
	}
}

// WindowDelay is the delay of a hint h that came with a retry window w,
// at u in [0, 1]: h + u·w, the hint and the window each clamped to p's
// maximum hint (HintDelay at u = 0 is the clamped hint, without jitter).
// It is what Next draws after HintWithin, and, monotone in u, the
// quantile function of that delay, as HintDelay is of a point hint's: the
// cohort simulator spreads a refused cohort within the window by it. A
// window of zero or less gives the hint exactly (Next takes HintDelay
// then: no window is the policy's jitter).
func WindowDelay(p Policy, h, w time.Duration, u float64) time.Duration {
	h, w = p.HintDelay(h, 0), p.HintDelay(w, 0)
	d := h + time.Duration(clampU(u)*float64(w))
	if d < h {
		d = h
	}
	return d
}

// HintAt records a retry-after given as a point in time (an HTTP-date
// Retry-After), read against now: it is Hint(until.Sub(now)).
func (b *Backoff) HintAt(until, now time.Time) {
	b.Hint(until.Sub(now))
}

// Attempt returns the number of delays Next has returned since the last
// Reset; it saturates at math.MaxInt.
func (b *Backoff) Attempt() int { return b.attempt }

// Policy returns the policy the Backoff follows.
func (b *Backoff) Policy() Policy {
	b.init()
	return b.policy
}

// ConnectTimeout returns the deadline of a connection attempt whose slot in
// the schedule is delay, following the gRPC protocol: the caller takes
// d := Next() before the attempt, gives the attempt ConnectTimeout(d) =
// max(d, MinConnectTimeout) to connect and, if it fails, waits until the
// attempt's start plus d. It returns 0 when the configuration sets no minimum
// connect timeout (every policy but grpc by default), meaning the policy
// prescribes no deadline and the caller uses its own.
func (b *Backoff) ConnectTimeout(delay time.Duration) time.Duration {
	if b.minConnect <= 0 {
		return 0
	}
	return max(delay, b.minConnect)
}
