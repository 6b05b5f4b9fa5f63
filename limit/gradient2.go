package limit

import "fmt"

// Gradient2 is the gradient limit with Netflix's Gradient2 semantics: the
// short-term latency (the window's percentile) is compared with a long-term
// exponential average of it,
//
//	gradient = max(0.5, min(1, Tolerance x long / short))
//	newLimit = limit x (1 - Smoothing) + (limit x gradient + QueueSize) x Smoothing
//
// and the long-term average decays when it is more than twice the
// short-term latency (load that has ended). Unlike the anchor it has a slow
// start, feeds no latency from dropped work, grows only a limit that is in
// use, clamps to [MinLimit, MaxLimit], and its long-term average learns
// upward only from windows that did not use the whole limit, so a
// sustained load cannot drag the reference up and the limit with it (the
// limit settles where latency is Tolerance x the reference). Because its reference is an
// average of recent latency rather than an unloaded latency, it tolerates a
// sustained latency rise; use Gradient to hold latency near its floor.
//
// A Gradient2 is safe for concurrent use. The zero value is not usable; call
// NewGradient2.
type Gradient2 struct {
	k    core
	cfg  Gradient2Config
	long float64 // long-term average latency in ns
}

var _ Limit = (*Gradient2)(nil)

// NewGradient2 returns a Gradient2 limit, or an error for a bad config.
func NewGradient2(cfg Gradient2Config) (*Gradient2, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	g := &Gradient2{cfg: cfg}
	g.k.init(cfg.Common, nil, ProbeConfig{}, 0)
	return g, nil
}

// Update feeds one sample; see Limit.
func (g *Gradient2) Update(s Sample) (int, error) { return g.k.update(s, g.step) }

// Limit returns the current limit.
func (g *Gradient2) Limit() int { return int(g.k.pub.Load()) }

// Stats returns the sample counters; IdealRTT is the long-term average.
func (g *Gradient2) Stats() LimitStats { return g.k.stats() }

// String describes the limit for logs.
func (g *Gradient2) String() string {
	s := g.Stats()
	return fmt.Sprintf("gradient2(limit=%d rtt=%v long=%v)", s.Limit, s.RTT, s.IdealRTT)
}

func (g *Gradient2) step(sum summary) {
	k := &g.k
	if sum.drops > 0 {
		if k.appLimited(sum) {
			return
		}
		k.est *= k.c.DropRatio
		k.congested()
		return
	}
	if sum.count == 0 {
		return
	}
	short := float64(sum.rtt)
	switch {
	case g.long == 0:
		g.long = short
	case short < g.long || sum.peak < int(k.est):
		// The average learns downward always, upward only from windows
		// that did not use the whole limit: the anchor's average follows
		// a sustained load upward and lets the limit creep with it.
		g.long += (short - g.long) * 2 / float64(g.cfg.LongWindows+1)
	}
	if g.long > 2*short {
		g.long *= 0.95
	}
	k.ideal = durationOf(g.long)
	if k.appLimited(sum) {
		return
	}
	grad := max(0.5, min(1, g.cfg.Tolerance*g.long/short))
	if grad >= 1 {
		k.est += k.increase(float64(g.cfg.QueueSize))
		return
	}
	k.congested()
	next := k.est*grad + float64(g.cfg.QueueSize)
	k.est = k.est*(1-g.cfg.Smoothing) + next*g.cfg.Smoothing
}
