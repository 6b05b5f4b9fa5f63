package limit

import (
	"fmt"
	"math"
	"time"
)

// Vegas is the TCP Vegas style limit: once per window it estimates the
// queue as limit x (1 - ideal / rtt) and, with lg = log10(limit), grows by
// 6 lg when the queue is below lg, by lg when it is below 3 lg, and shrinks
// by lg when it is above 6 lg. The ideal latency is estimated as in
// Gradient (a low percentile of recent windows, re-probed with jitter), it
// has a slow start, dropped work feeds no latency (it cuts the limit by
// DropRatio) and the limit stays in [MinLimit, MaxLimit].
//
// A Vegas is safe for concurrent use. The zero value is not usable; call
// NewVegas.
type Vegas struct {
	k    core
	base baseline
}

var _ Limit = (*Vegas)(nil)

// NewVegas returns a Vegas limit, or an error for a bad config.
func NewVegas(cfg VegasConfig) (*Vegas, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	v := &Vegas{}
	v.base = newBaseline(cfg.Ideal.Windows, cfg.Ideal.Percentile)
	v.k.init(cfg.Common, &v.base, cfg.Ideal.Probe, cfg.Seed)
	return v, nil
}

// Update feeds one sample; see Limit.
func (v *Vegas) Update(s Sample) (int, error) { return v.k.update(s, v.step) }

// Limit returns the current limit.
func (v *Vegas) Limit() int { return int(v.k.pub.Load()) }

// Stats returns the sample counters and the latency estimates.
func (v *Vegas) Stats() LimitStats { return v.k.stats() }

// String describes the limit for logs.
func (v *Vegas) String() string {
	s := v.Stats()
	return fmt.Sprintf("vegas(limit=%d rtt=%v ideal=%v)", s.Limit, s.RTT, s.IdealRTT)
}

func (v *Vegas) step(sum summary) {
	k := &v.k
	if k.appLimited(sum) {
		return
	}
	if sum.drops > 0 {
		k.est *= k.c.DropRatio
		k.congested()
		return
	}
	if sum.count == 0 || k.ideal == 0 {
		return
	}
	queue := math.Ceil(k.est * (1 - float64(k.ideal)/float64(sum.rtt)))
	lg := max(1, math.Log10(k.est))
	switch {
	case queue <= lg:
		if k.slowStart {
			k.est *= 2
			return
		}
		k.est += 6 * lg
	case queue < 3*lg:
		k.congested()
		k.est += lg
	case queue > 6*lg:
		k.congested()
		k.est -= lg
	default:
		k.congested()
	}
}

// durationOf converts float nanoseconds to a Duration.
func durationOf(ns float64) time.Duration { return time.Duration(ns) }
