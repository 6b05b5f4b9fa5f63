package limit

import "fmt"

// Gradient is the gradient concurrency limit: once per window,
//
//	newLimit = limit x gradient + QueueSize,  gradient = min(1, Tolerance x ideal / rtt)
//
// where rtt is the window's high-percentile latency (p99 by default) and
// ideal the no-queueing latency estimated by a low percentile of recent
// windows, re-probed at jittered intervals (see IdealConfig). It differs
// from the anchors' gradient controllers in what users of those report:
//
//   - the ideal is never one lucky sample: it is a low percentile over a
//     ring of per-window percentiles, and it ages out;
//   - dropped work feeds no latency (it decreases the limit by DropRatio);
//   - a window that used less than Common.AppLimitRatio of the limit
//     neither raises it (an idle limit does not creep up) nor lowers it
//     (a trickle's noisy latencies do not ratchet it down), and a limit
//     below InitialLimit returns toward it on such windows;
//   - a window closes only with MinSamples of weight, so a trickle does
//     not decide on the slowest of two requests;
//   - a slow start doubles the limit every uncongested window, so 20 to
//     10,000 takes nine windows (4.5 s by default), and later growth doubles
//     its step each consecutive uncongested window to find a raised knee;
//   - windows at MinLimit measure the latency at a pinned low concurrency:
//     three in a row without drops raise the ideal to at least their
//     median, so a limit cut to its floor climbs back once its latency is
//     stable, also on a server that has become slower for good;
//   - the limit never leaves [MinLimit, MaxLimit].
//
// A Gradient is safe for concurrent use. The zero value is not usable; call
// NewGradient.
type Gradient struct {
	k    core
	cfg  GradientConfig
	base baseline
}

var _ Limit = (*Gradient)(nil)

// NewGradient returns a Gradient limit, or an error for a bad config.
func NewGradient(cfg GradientConfig) (*Gradient, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	g := &Gradient{cfg: cfg}
	g.base = newBaseline(cfg.Ideal.Windows, cfg.Ideal.Percentile)
	g.k.init(cfg.Common, &g.base, cfg.Ideal.Probe, cfg.Seed)
	return g, nil
}

// Update feeds one sample; see Limit.
func (g *Gradient) Update(s Sample) (int, error) { return g.k.update(s, g.step) }

// Limit returns the current limit.
func (g *Gradient) Limit() int { return int(g.k.pub.Load()) }

// Stats returns the sample counters and the latency estimates.
func (g *Gradient) Stats() LimitStats { return g.k.stats() }

// String describes the limit for logs.
func (g *Gradient) String() string {
	s := g.Stats()
	return fmt.Sprintf("gradient(limit=%d rtt=%v ideal=%v)", s.Limit, s.RTT, s.IdealRTT)
}

func (g *Gradient) step(sum summary) {
	k := &g.k
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
	q := float64(g.cfg.QueueSize)
	grad := min(1, g.cfg.Tolerance*float64(k.ideal)/float64(sum.rtt))
	grad = max(g.cfg.MinGradient, grad)
	if grad < 1 {
		k.congested()
		// The headroom shrinks with the gradient: full at the knee, none
		// at MinGradient. A constant headroom would hold the limit at
		// QueueSize / (1 - MinGradient) however congested the server is.
		q *= max(0, (grad-g.cfg.MinGradient)/(1-g.cfg.MinGradient))
		k.est = k.est*grad + q
		return
	}
	k.est += k.increase(q)
}
