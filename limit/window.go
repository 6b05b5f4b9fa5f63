package limit

import (
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// window collects samples over one measurement window. Windows are
// contiguous: each starts where the previous one closed.
type window struct {
	dur        time.Duration
	minSamples int64
	pct        float64

	open  bool
	start time.Time
	h     hist
	drops int64
	peak  int
}

// summary is what a closed window tells an algorithm.
type summary struct {
	end   time.Time
	rtt   time.Duration // latency at the configured percentile, 0 if no successes
	count int64         // weight of successful samples
	drops int64         // weight of dropped samples
	peak  int           // highest in-flight seen
}

// add puts s in the window and reports whether the window closed; when it
// did, sum describes it and a new empty window starts at s.Start.
func (w *window) add(s Sample) (sum summary, closed bool) {
	if !w.open {
		w.open, w.start = true, s.Start
	}
	if s.Dropped {
		w.drops += s.weight()
	} else {
		w.h.add(s.RTT, s.weight())
	}
	w.peak = max(w.peak, s.InFlight)
	// A window closes once it has lasted dur and holds minSamples of
	// weight, successes and drops together. One with fewer stays open for
	// as long as it takes: a trickle of traffic must not produce p99s of
	// two requests, nor cut the limit on one drop (closing such windows
	// after a timeout made a near-idle limiter's limit drift down on the
	// noise of a few samples).
	if s.Start.Sub(w.start) < w.dur || w.h.total+w.drops < w.minSamples {
		return summary{}, false
	}
	sum = summary{end: s.Start, rtt: w.h.quantile(w.pct), count: w.h.total, drops: w.drops, peak: w.peak}
	if sum.count > 0 {
		sum.rtt = max(sum.rtt, 1) // a zero latency would divide by zero
	}
	w.h.reset()
	w.drops, w.peak, w.start = 0, 0, s.Start
	return sum, true
}

// baseline estimates the latency without queueing: a low percentile of the
// high-percentile latencies of the last n windows. A single lucky window
// cannot set it, and it follows a real change of the no-load latency once
// the old windows have aged out. Probes (short windows at a reduced limit,
// scheduled with jitter) keep unloaded windows in the ring.
type baseline struct {
	ring []time.Duration
	next int
	full bool
	pct  float64
	tmp  []time.Duration
}

func newBaseline(n int, pct float64) baseline {
	return baseline{ring: make([]time.Duration, n), pct: pct, tmp: make([]time.Duration, n)}
}

func (b *baseline) push(d time.Duration) {
	if d <= 0 {
		return
	}
	b.ring[b.next] = d
	b.next++
	if b.next == len(b.ring) {
		b.next, b.full = 0, true
	}
}

// raise lifts every stored latency below d to d: the ideal cannot be
// below a latency measured where nothing queued (see core.learnFloor).
func (b *baseline) raise(d time.Duration) {
	for i := range b.ring {
		if b.ring[i] > 0 && b.ring[i] < d {
			b.ring[i] = d
		}
	}
}

// ideal returns the estimate, or 0 before the first window.
func (b *baseline) ideal() time.Duration {
	n := b.next
	if b.full {
		n = len(b.ring)
	}
	if n == 0 {
		return 0
	}
	t := b.tmp[:n]
	copy(t, b.ring[:n])
	// Insertion sort: n is a few dozen.
	for i := 1; i < n; i++ {
		for j := i; j > 0 && t[j] < t[j-1]; j-- {
			t[j], t[j-1] = t[j-1], t[j]
		}
	}
	i := int(b.pct * float64(n))
	return t[min(i, n-1)]
}

// core is the state every windowed algorithm shares: the window, the
// published limit, slow start, growth, probing and counters. The mutex
// guards everything but the atomics.
type core struct {
	mu     sync.Mutex
	pub    atomic.Int64 // the published limit
	invald atomic.Int64

	c         Common
	est       float64
	win       window
	samples   int64
	windows   int64
	slowStart bool
	grow      int // consecutive uncongested, saturated windows
	lastRTT   time.Duration
	ideal     time.Duration

	// probing, used by algorithms with a baseline
	base       *baseline
	probe      ProbeConfig
	ratio      float64       // probe ratio in use (deepens while probes find queues)
	preProbe   time.Duration // latency of the window before the probe
	probing    bool
	drained    bool // the first probe window (the drain) has closed
	saved      float64
	nextProbe  time.Time
	rng        splitmix
	probeArmed bool

	// the windows closed at the floor in a row (see learnFloor)
	floor     [floorWindows]time.Duration
	floorN    int
	floorNeed int  // floor windows in a row before the ideal is raised
	raised    bool // the floor raised the ideal and the limit has not recovered since
}

// floorWindows is how many consecutive windows at MinLimit re-learn the
// ideal.
const floorWindows = 3

func (k *core) init(c Common, b *baseline, p ProbeConfig, seed uint64) {
	k.c = c
	k.est = float64(c.InitialLimit)
	k.win = window{dur: c.Window, minSamples: int64(c.MinSamples), pct: c.Percentile}
	k.slowStart = true
	k.base = b
	k.probe = p
	k.ratio = p.Ratio
	k.rng = splitmix{state: seed}
	k.pub.Store(int64(c.InitialLimit))
}

// update validates s, adds it and runs step when a window closes. step
// sees the window summary and changes k.est; update then clamps and
// publishes.
func (k *core) update(s Sample, step func(sum summary)) (int, error) {
	if err := s.Validate(); err != nil {
		k.invald.Add(1)
		return int(k.pub.Load()), err
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	k.samples += s.weight()
	sum, closed := k.win.add(s)
	if !closed {
		return int(k.pub.Load()), nil
	}
	k.windows++
	if sum.count > 0 {
		k.lastRTT = sum.rtt
	}
	if k.base != nil {
		atFloor := k.pub.Load() <= int64(k.c.MinLimit) && !k.probing
		if k.afterProbe(sum) {
			return k.publish(), nil
		}
		if sum.count > 0 {
			k.base.push(sum.rtt)
		}
		k.learnFloor(sum, atFloor)
		k.ideal = k.base.ideal()
	}
	used := k.saturated(sum)
	step(sum)
	k.publish()
	if k.base != nil && used {
		// A probe measures the latency without the queue the limit lets
		// build; a window that did not use the limit had none, so probes
		// wait for one that does.
		k.maybeProbe(sum.end)
	}
	return int(k.pub.Load()), nil
}

// learnFloor re-learns the ideal from windows closed at MinLimit. There
// the limit cannot be lowered and admits nothing beyond the floor: such a
// window measures the latency at a pinned low concurrency, which is what
// the probes look for (Envoy's adaptive concurrency measures its minimum
// latency the same way). After floorWindows of them in a row, without
// drops, the ideal is at least their median p99: without it, an ideal
// learned before (or the lowest of many noisy few-sample windows) stays
// below every latency the floor can show, each window's gradient is at
// MinGradient and the limit never leaves its floor, however long the
// overload has been over (a machine whose latency is now slower and
// noisier for good). A server still overloaded at the floor shows its
// queue again as soon as the limit rises, and the gradient cuts it back.
//
// A limit that climbs from there and falls back to the floor found the
// server overloaded at the floor (latency rose with the limit: the knee
// is at the floor), so the next raise waits twice as many floor windows,
// up to the baseline's own length (by then the floor windows have
// replaced the old ones anyway). Reaching InitialLimit resets the wait.
func (k *core) learnFloor(sum summary, atFloor bool) {
	if k.floorNeed == 0 || k.est >= float64(k.c.InitialLimit) {
		k.floorNeed, k.raised = floorWindows, false
	}
	if !atFloor {
		k.floorN = 0
		return
	}
	if k.floorN == 0 && k.raised {
		k.floorNeed = min(2*k.floorNeed, max(floorWindows, len(k.base.ring)))
		k.raised = false
	}
	if sum.drops > 0 || sum.count == 0 {
		k.floorN = 0
		return
	}
	k.floor[k.floorN%floorWindows] = sum.rtt
	k.floorN++
	if k.floorN < k.floorNeed {
		return
	}
	f := k.floor
	slices.Sort(f[:])
	k.base.raise(f[floorWindows/2])
	k.raised = true
}

// afterProbe handles the windows that ran at a probe limit. The first
// drains what was admitted at the full limit and is ignored; the second's
// latency goes to the baseline and the limit from before the probe comes
// back.
func (k *core) afterProbe(sum summary) bool {
	if !k.probing {
		return false
	}
	if !k.drained {
		k.drained = true
		return true
	}
	k.probing, k.drained = false, false
	if sum.count > 0 {
		k.base.push(sum.rtt)
		// A probe that cut the latency by more than a tenth found a queue
		// it did not drain: the limit is above the knee by more than the
		// probe ratio, so the next probe goes deeper. One that found none
		// resets the ratio.
		if k.preProbe > 0 && float64(sum.rtt) < 0.9*float64(k.preProbe) {
			k.ratio = max(minProbeRatio, k.ratio*k.probe.Ratio)
		} else {
			k.ratio = k.probe.Ratio
		}
	}
	k.ideal = k.base.ideal()
	k.est = k.saved
	k.scheduleProbe(sum.end)
	return true
}

// maybeProbe lowers the limit for two windows when a probe is due, so that
// queues drain and the baseline sees an unloaded latency.
func (k *core) maybeProbe(now time.Time) {
	if k.probe.Interval <= 0 || k.slowStart {
		return
	}
	if !k.probeArmed {
		k.scheduleProbe(now)
		return
	}
	if now.Before(k.nextProbe) {
		return
	}
	if int64(max(float64(k.c.MinLimit), k.est*k.ratio)) >= int64(k.est) {
		// A probe would not lower the limit (it is at or near the floor,
		// where every window is a probe's: learnFloor).
		k.scheduleProbe(now)
		return
	}
	k.probing = true
	k.saved = k.est
	k.preProbe = k.lastRTT
	k.est = max(float64(k.c.MinLimit), k.est*k.ratio)
	k.publish()
}

// scheduleProbe draws the next probe time in [0.5, 1.5) x Interval.
func (k *core) scheduleProbe(now time.Time) {
	f := 0.5 + k.rng.float64()
	k.nextProbe = now.Add(time.Duration(f * float64(k.probe.Interval)))
	k.probeArmed = true
}

// saturated reports whether the window used enough of the limit for an
// increase to be earned; an application that uses a fraction of its
// limit must not make the limit creep up.
func (k *core) saturated(sum summary) bool {
	return float64(sum.peak) >= k.est*k.c.AppLimitRatio
}

// appLimited reports whether the window used less than AppLimitRatio of
// the limit, and handles such a window: it neither raises the limit
// (which would creep up while idle) nor lowers it. Work that arrives
// faster than it completes piles up to the limit (Little's law), so a
// window whose in-flight stayed below half the limit saw no overload that
// the limit could relieve: its slow latencies or drops come from
// elsewhere (storage noise, a failing dependency), and cutting on them
// made a near-idle limiter's limit drift down to its floor. A limit below
// InitialLimit, cut by an overload that has passed, returns toward it
// (doubling per window without drops): InitialLimit is what the limiter
// trusts without evidence. Netflix's Gradient2 likewise leaves an
// app-limited window's limit alone.
func (k *core) appLimited(sum summary) bool {
	if k.saturated(sum) {
		return false
	}
	if sum.drops == 0 && k.est < float64(k.c.InitialLimit) {
		k.est = min(float64(k.c.InitialLimit), 2*k.est)
	}
	return true
}

// increase returns the increase for an uncongested, saturated window:
// doubling in slow start, else q doubled for each consecutive such window,
// never more than doubling the limit.
func (k *core) increase(q float64) float64 {
	if k.slowStart {
		return k.est
	}
	inc := q * math.Pow(2, float64(min(k.grow, 30)))
	k.grow++
	return min(inc, k.est)
}

// congested ends slow start and accelerated growth.
func (k *core) congested() {
	k.slowStart = false
	k.grow = 0
}

// publish clamps the estimate and stores the integer limit.
func (k *core) publish() int {
	if math.IsNaN(k.est) || math.IsInf(k.est, 0) {
		k.est = float64(k.pub.Load()) // never reached, but never published either
	}
	k.est = max(float64(k.c.MinLimit), min(k.est, float64(k.c.MaxLimit)))
	l := int64(k.est)
	k.pub.Store(l)
	return int(l)
}

func (k *core) stats() LimitStats {
	k.mu.Lock()
	defer k.mu.Unlock()
	return LimitStats{
		Limit:     int(k.pub.Load()),
		Samples:   k.samples,
		Invalid:   k.invald.Load(),
		Windows:   k.windows,
		SlowStart: k.slowStart,
		RTT:       k.lastRTT,
		IdealRTT:  k.ideal,
		Probing:   k.probing,
	}
}

// minProbeRatio bounds how deep adaptive probes go.
const minProbeRatio = 0.25

// splitmix is a small deterministic random source (SplitMix64).
type splitmix struct{ state uint64 }

// golden is SplitMix64's increment (2^64 / the golden ratio).
const golden = 0x9e3779b97f4a7c15

func (s *splitmix) next() uint64 {
	s.state += golden
	return mix64(s.state)
}

func mix64(z uint64) uint64 {
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// float64 returns a value in [0, 1).
func (s *splitmix) float64() float64 { return unit(s.next()) }

// unit maps 64 random bits to [0, 1) using the top 53.
func unit(x uint64) float64 { return float64(x>>11) / (1 << 53) }
