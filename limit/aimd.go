package limit

import (
	"fmt"
	"sync/atomic"
)

// AIMD is the additive-increase, multiplicative-decrease limit: a window
// with dropped work or a latency percentile above Timeout multiplies the
// limit by BackoffRatio; an uncongested window that used the limit adds
// Increase (after a slow start that doubles the limit until the first
// congested window). A window that used less than AppLimitRatio of the
// limit changes neither way (see Common.AppLimitRatio). The limit stays in
// [MinLimit, MaxLimit].
//
// An AIMD is safe for concurrent use. The zero value is not usable; call
// NewAIMD.
type AIMD struct {
	k   core
	cfg AIMDConfig
}

var _ Limit = (*AIMD)(nil)

// NewAIMD returns an AIMD limit, or an error for a bad config.
func NewAIMD(cfg AIMDConfig) (*AIMD, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	a := &AIMD{cfg: cfg}
	a.k.init(cfg.Common, nil, ProbeConfig{}, 0)
	return a, nil
}

// Update feeds one sample; see Limit.
func (a *AIMD) Update(s Sample) (int, error) { return a.k.update(s, a.step) }

// Limit returns the current limit.
func (a *AIMD) Limit() int { return int(a.k.pub.Load()) }

// Stats returns the sample counters.
func (a *AIMD) Stats() LimitStats { return a.k.stats() }

// String describes the limit for logs.
func (a *AIMD) String() string {
	return fmt.Sprintf("aimd(limit=%d)", a.Limit())
}

func (a *AIMD) step(sum summary) {
	k := &a.k
	if k.appLimited(sum) {
		return
	}
	if sum.drops > 0 || (sum.count > 0 && sum.rtt > a.cfg.Timeout) {
		k.est *= a.cfg.BackoffRatio
		k.congested()
		return
	}
	if sum.count == 0 {
		return
	}
	if k.slowStart {
		k.est *= 2
		return
	}
	k.est += float64(a.cfg.Increase)
}

// Fixed is a constant limit. It validates and counts samples like the
// adaptive limits but never changes. It is safe for concurrent use; the
// zero value is a limit of 0, which admits nothing; call NewFixed.
type Fixed struct {
	limit   int
	samples atomic.Int64
	invalid atomic.Int64
}

var _ Limit = (*Fixed)(nil)

// NewFixed returns a limit that stays at n, or an error when n is outside
// [1, 1<<30].
func NewFixed(n int) (*Fixed, error) {
	if n < 1 || n > maxLimitCeiling {
		return nil, fmt.Errorf("limit: fixed: limit %d outside [1, %d]", n, maxLimitCeiling)
	}
	return &Fixed{limit: n}, nil
}

// Update validates and counts s and returns the fixed limit.
func (f *Fixed) Update(s Sample) (int, error) {
	if err := s.Validate(); err != nil {
		f.invalid.Add(1)
		return f.limit, err
	}
	f.samples.Add(s.weight())
	return f.limit, nil
}

// Limit returns the fixed limit.
func (f *Fixed) Limit() int { return f.limit }

// Stats returns the sample counters.
func (f *Fixed) Stats() LimitStats {
	return LimitStats{Limit: f.limit, Samples: f.samples.Load(), Invalid: f.invalid.Load()}
}
