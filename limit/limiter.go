package limit

import (
	"fmt"
	"math"
	"math/bits"
	"sync"
	"sync/atomic"
	"time"
)

// Clock tells the time. Tests and simulations inject one; a nil Clock in a
// Config means the system clock.
type Clock interface {
	Now() time.Time
}

// Limiter admits work while the in-flight count is below the limit of its
// Limit, and feeds the latency of finished work back to the Limit.
//
// TryAcquire takes a slot with a compare-and-swap loop, so in-flight never
// exceeds the limit at admission, whatever the number of goroutines (when
// the Limit lowers the limit, work already in flight finishes normally and
// in-flight falls below the new limit). The one exception is P0's reserve
// (see TryAcquirePriority). It returns a Token, a small value
// that costs no allocation; call exactly one of its Success, Ignore or Drop
// methods when the work ends.
//
// Use one Limiter per kind of work: connection admission (the token ends
// when the handshake ends, its sample is the handshake latency) and
// in-flight messages (the sample is the processing latency). A long-lived
// stream is never a sample: end the token when the handshake completes,
// not when the connection closes.
//
// To stay cheap at high rates the Limiter times a subset of tokens: every
// token while fewer than SamplesPerFlush are acquired per flush interval,
// then one in a power of two chosen so that about SamplesPerFlush are timed
// per interval (set TimeEvery to time them all). Latencies go to a
// lock-free histogram that is fed to the Limit every FlushInterval, by the
// goroutine whose Success crosses the interval; no goroutine is started.
//
// A Limiter is safe for concurrent use. The zero value is not usable; call
// NewLimiter. Lock order: the Limiter's flush mutex, then the Limit's own.
type Limiter struct {
	_    [64]byte
	word atomic.Uint64 // low 32 bits: in-flight; high 32 bits: acquisitions
	_    [56]byte

	// read-mostly, written at flush
	ceil    [NumPriorities]atomic.Int64 // admission ceiling per priority; ceil[P0] is the limit
	mask    atomic.Uint64               // timing stride - 1
	flushAt atomic.Int64                // ns since base
	peak    atomic.Int64                // peak in-flight since the last flush
	_       [16]byte

	hist     atomicHist
	drops    atomic.Int64 // since the last flush
	dropped  atomic.Int64 // total
	ignored  atomic.Int64
	rejected atomic.Int64
	invalid  atomic.Int64
	prio     [2]atomic.Int64 // in-flight of P0 and P1 tokens
	res0     atomic.Int64    // P0's reserve in whole slots
	prioPeak [2]atomic.Int64
	prioRej  [NumPriorities]atomic.Int64

	lim   Limit
	clock Clock
	base  time.Time
	cfg   LimiterConfig
	room  *waitingRoom  // nil without Queue.MaxWait
	rate  atomic.Uint64 // admissions per second, float64 bits (Rate)
	busy  atomic.Uint64 // admissions per second while full, float64 bits (BusyRate)
	// emptied is set when in-flight falls to 0, cleared by each flush
	// and set again by a flush that finds nothing in flight: whether the
	// interval had a moment with nothing in flight.
	// It is written once per interval at most (load, then store), so
	// the hot path stays a load.
	emptied atomic.Bool
	rnd     jitter // RetryAfter's draws
	// places, when set, is the rate the virtual queue's places are
	// spaced at, from the node's own capacity (SetPlaceRate).
	places atomic.Pointer[func(own float64) float64]

	mu         sync.Mutex // guards the flush state below
	lastSeq    uint32
	acquired   int64
	lastRej    [2]int64
	reserve    [2]float64
	hold       [2]float64 // decaying recent peak in-flight of P0 and P1
	holdAll    float64    // decaying recent peak demand (in-flight + refused) of all priorities
	lastRejAll int64      // l.rejected at the last flush
	lastNs     int64      // time of the last flush, ns since base
}

// Token is an admitted unit of work. It is a small value: copy it freely,
// but call exactly one of Success, Ignore or Drop once on one copy (a second
// call would release a slot twice). The zero Token, returned with false by
// a failed acquisition, ignores every call.
type Token struct {
	l     *Limiter
	start int64 // ns since the limiter's base, when timed
	timed bool
	prio  int8 // -1 for no priority
}

// NewLimiter returns a Limiter, or an error for a bad config.
func NewLimiter(cfg LimiterConfig) (*Limiter, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	l := &Limiter{lim: cfg.Limit, clock: cfg.Clock, cfg: cfg}
	l.emptied.Store(true) // nothing in flight yet
	if cfg.Queue.MaxWait > 0 {
		l.room = &waitingRoom{}
	}
	l.rnd.src = cfg.Rand
	l.rnd.ctr.Store(cfg.Seed)
	if l.clock != nil {
		l.base = l.clock.Now()
	} else {
		l.base = time.Now()
	}
	l.flushAt.Store(math.MinInt64)
	l.setCeilings(l.lim.Limit(), 0, 0, 0)
	return l, nil
}

// nowNs reads the clock as nanoseconds since the base.
func (l *Limiter) nowNs() int64 {
	if l.clock == nil {
		return int64(time.Since(l.base))
	}
	return int64(l.clock.Now().Sub(l.base))
}

func (l *Limiter) at(t time.Time) int64 { return int64(t.Sub(l.base)) }

// TryAcquire admits one unit of work if in-flight is below the limit.
// Without priorities this is the method most callers want.
func (l *Limiter) TryAcquire() (Token, bool) { return l.acquire(-1, nil) }

// TryAcquireAt is TryAcquire at an explicit time, for tests and simulations.
func (l *Limiter) TryAcquireAt(now time.Time) (Token, bool) { return l.acquire(-1, &now) }

// TryAcquirePriority admits one unit of work of priority p. P0 may use the
// whole limit; P1 may not use the slots reserved for P0, and P2 may not use
// the slots reserved for P0 and P1. A reserve is the larger of its
// configured share of the limit (whole slots) and 1.5 times the recent peak
// in-flight of its priority (a peak that decays with a half-life of one
// second), and it doubles at each flush after that priority was turned
// away. So a higher priority whose demand fits under the limit takes the
// slots it needs from lower ones within a few flush intervals and keeps
// them while it is active. Two floors bound the reserves: while the
// recent demand of all priorities (peak in-flight plus refused work) is
// below half the limit, every priority may use that lower half; otherwise,
// while P0 has nothing in flight and was not refused since the last
// flush, every priority's ceiling is at least one, so an idle Limiter
// admits any priority.
//
// P0's reserved slots are P0's even when lower-priority work (admitted
// under an earlier, higher limit, or in the slots the floors leave it)
// fills the node: a P0 whose priority has fewer tokens in flight than its
// reserve is admitted, so in-flight may then exceed the limit by at most
// the P0 reserve while that work drains. Without priorities (TryAcquire)
// the limit is never exceeded. An invalid p is rejected.
//
// No refusal is decided on stale ceilings: a refusal after the flush
// interval recomputes them first (reading the clock, which an admission
// does not) and tries again.
func (l *Limiter) TryAcquirePriority(p Priority) (Token, bool) {
	if !p.Valid() {
		return Token{}, false
	}
	return l.acquire(int8(p), nil)
}

// TryAcquirePriorityAt is TryAcquirePriority at an explicit time.
func (l *Limiter) TryAcquirePriorityAt(p Priority, now time.Time) (Token, bool) {
	if !p.Valid() {
		return Token{}, false
	}
	return l.acquire(int8(p), &now)
}

// ceiling returns the admission ceiling of prio (-1: none).
func (l *Limiter) ceiling(prio int8) int64 { return l.ceil[max(prio, 0)].Load() }

func (l *Limiter) acquire(prio int8, now *time.Time) (Token, bool) {
	fresh := false // the ceilings were recomputed for this acquisition
	for {
		w := l.word.Load()
		n := int64(uint32(w))
		if n >= l.ceiling(prio) {
			if prio == int8(P0) && l.takeReserve() {
				// Lower-priority work holds the slots below the limit;
				// P0's reserved slots are P0's all the same.
				w = l.word.Add((1 << 32) + 1)
				return l.admitted(w-(1<<32)-1, prio, true, now), true
			}
			var t int64
			if now != nil {
				t = l.at(*now)
			} else {
				t = l.nowNs()
			}
			if !fresh && t >= l.flushAt.Load() {
				// The ceilings are older than the flush interval: the
				// reserves they hold may have decayed, the limit moved.
				fresh = true
				l.flush(t)
				continue
			}
			l.reject(prio, t)
			return Token{}, false
		}
		if l.word.CompareAndSwap(w, w+(1<<32)+1) {
			return l.admitted(w, prio, false, now), true
		}
	}
}

// takeReserve takes one of P0's reserved slots, if P0's in-flight is below
// its reserve.
func (l *Limiter) takeReserve() bool {
	for {
		c := l.prio[P0].Load()
		if c >= l.res0.Load() {
			return false
		}
		if l.prio[P0].CompareAndSwap(c, c+1) {
			return true
		}
	}
}

// admitted builds the token for an acquisition that moved the word from w
// and updates the peaks. counted says the priority's in-flight is already
// incremented.
func (l *Limiter) admitted(w uint64, prio int8, counted bool, now *time.Time) Token {
	n := int64(uint32(w)) + 1
	t := Token{l: l, prio: prio}
	if (w>>32)&l.mask.Load() == 0 {
		t.timed = true
		if now != nil {
			t.start = l.at(*now)
		} else {
			t.start = l.nowNs()
		}
	}
	if n > l.peak.Load() {
		casMax(&l.peak, n)
	}
	if prio == int8(P0) || prio == int8(P1) {
		var c int64
		if counted {
			c = l.prio[prio].Load()
		} else {
			c = l.prio[prio].Add(1)
		}
		if c > l.prioPeak[prio].Load() {
			casMax(&l.prioPeak[prio], c)
		}
	}
	return t
}

// reject counts a refusal at t (ns since the base).
func (l *Limiter) reject(prio int8, t int64) {
	l.rejected.Add(1)
	if prio < 0 {
		return
	}
	l.prioRej[prio].Add(1)
	if prio == int8(P0) {
		// A refused P0 is rare and urgent: recompute the ceilings now so
		// that its reserve doubles and lower priorities stop taking the
		// slots P0 needs.
		l.flushAt.Store(min(l.flushAt.Load(), t))
		l.flush(t)
	}
}

func casMax(a *atomic.Int64, v int64) {
	for {
		cur := a.Load()
		if v <= cur || a.CompareAndSwap(cur, v) {
			return
		}
	}
}

// Success releases the slot and, when the token was timed, records the
// latency since acquisition as a sample.
func (t Token) Success() {
	if t.l == nil {
		return
	}
	if !t.timed {
		t.l.release(t)
		return
	}
	t.l.succeed(t, t.l.nowNs())
}

// SuccessAt is Success at an explicit time.
func (t Token) SuccessAt(now time.Time) {
	if t.l == nil {
		return
	}
	if !t.timed {
		t.l.release(t)
		return
	}
	t.l.succeed(t, t.l.at(now))
}

// Ignore releases the slot without a sample: use it for work whose latency
// says nothing about the server (a client that went away, a validation
// error).
func (t Token) Ignore() {
	if t.l == nil {
		return
	}
	t.l.ignored.Add(1)
	t.l.release(t)
}

// Drop releases the slot and reports the work as dropped from overload
// (timeout, shed downstream). Drops carry no latency; a window with drops
// cuts the limit.
func (t Token) Drop() {
	if t.l == nil {
		return
	}
	t.l.drop(t, t.l.nowNs())
}

// DropAt is Drop at an explicit time.
func (t Token) DropAt(now time.Time) {
	if t.l == nil {
		return
	}
	t.l.drop(t, t.l.at(now))
}

// Priority returns the token's priority, and false for a token acquired
// without one.
func (t Token) Priority() (Priority, bool) {
	if t.l == nil || t.prio < 0 {
		return 0, false
	}
	return Priority(t.prio), true
}

func (l *Limiter) release(t Token) {
	if t.prio == int8(P0) || t.prio == int8(P1) {
		l.prio[t.prio].Add(-1)
	}
	if uint32(l.word.Add(^uint64(0))) == 0 && !l.emptied.Load() { // in-flight - 1; >= 1 before, so no borrow
		l.emptied.Store(true)
	}
	if l.room != nil && l.room.n.Load() > 0 {
		l.dispatch()
	}
}

func (l *Limiter) succeed(t Token, now int64) {
	rtt := time.Duration(now - t.start)
	l.release(t)
	if rtt < 0 || rtt > MaxRTT {
		l.invalid.Add(1)
		return
	}
	l.hist.add(rtt)
	if now >= l.flushAt.Load() {
		l.flush(now)
	}
}

func (l *Limiter) drop(t Token, now int64) {
	l.release(t)
	l.drops.Add(1)
	l.dropped.Add(1)
	if now >= l.flushAt.Load() {
		l.flush(now)
	}
}

// Flush feeds what has been measured to the Limit now instead of at the
// next Success after the flush interval. The Limiter flushes by itself;
// simulations call FlushAt at the end of a step.
func (l *Limiter) Flush() { l.flush(l.nowNs()) }

// FlushAt is Flush at an explicit time.
func (l *Limiter) FlushAt(now time.Time) { l.flush(l.at(now)) }

func (l *Limiter) flush(now int64) {
	due := l.flushAt.Load()
	if !l.flushAt.CompareAndSwap(due, now+int64(l.cfg.FlushInterval)) {
		return // another goroutine flushes
	}
	l.mu.Lock()
	l.flushLocked(now)
	l.mu.Unlock()
	// The limit may have risen: waiting work takes the new slots.
	l.dispatch()
}

// flushLocked is flush's work, with l.mu held.
func (l *Limiter) flushLocked(now int64) {
	w := l.word.Load()
	seq := uint32(w >> 32)
	acquired := int64(seq - l.lastSeq)
	l.lastSeq = seq
	l.acquired += acquired
	peak := int(l.peak.Swap(int64(uint32(w))))
	// Demand is what was admitted plus what was refused: a Limiter whose
	// ceilings keep in-flight low while it turns work away is not far
	// from full.
	rej := l.rejected.Load()
	refused := rej - l.lastRejAll
	demand := float64(peak) + float64(refused)
	l.lastRejAll = rej
	l.holdAll = max(demand, l.holdAll*halfLife(time.Duration(now-l.lastNs)))
	start := l.base.Add(time.Duration(now))
	l.hist.drain(func(d time.Duration, n int64) {
		_, _ = l.lim.Update(Sample{Start: start, RTT: d, InFlight: peak, Weight: n})
	})
	if d := l.drops.Swap(0); d > 0 {
		_, _ = l.lim.Update(Sample{Start: start, Dropped: true, InFlight: peak, Weight: d})
	}
	elapsed := time.Duration(now - l.lastNs)
	l.lastNs = now
	emptied := l.emptied.Swap(false)
	if uint32(w) == 0 {
		// Nothing in flight now: the interval that starts here has its
		// empty moment at its start. Without it a flush that came with
		// the last release took the release's mark, and the quiet spell
		// after it was not a gap: the next herd's first flush spread its
		// admissions over the spell and replaced the busy rate (16 a
		// second against 276 in kraken's 10x storm;
		// TestBusyRateOfASecondHerd).
		l.emptied.Store(true)
	}
	if elapsed > 0 {
		d, span := halfLife(elapsed), elapsed
		// An idle gap: an interval over four flush intervals long in
		// which nothing was in flight at some moment. The flush comes
		// with the first timed release after the gap, so the
		// acquisitions counted came within about one interval, not over
		// the gap (over the gap, a herd's first flush read 2 a second
		// and its hints were minutes long). Work that holds its slots
		// longer than four intervals, flushed only at its releases, has
		// long intervals too, but never an empty moment: taken for
		// gaps, its intervals read 12 times too slow.
		idle := elapsed > 4*l.cfg.FlushInterval && emptied
		if idle {
			d, span = 0, l.cfg.FlushInterval
		}
		inst := float64(acquired) / span.Seconds()
		l.rate.Store(math.Float64bits(l.Rate()*d + inst*(1-d)))
		// Only an interval in which the Limiter was full (in-flight at
		// its limit, work refused or waiting) says what the node can
		// take; a quiet one says only that little was asked, and leaves
		// the busy rate where the last full interval put it. Nor does an
		// interval with an idle gap in it: its peak may be from the
		// busy moment before the gap, and the few acquisitions of that
		// moment read as a rate replaced the busy rate
		// (TestBusyRateHoldsThroughAQuietSpell failed 1 run in 5 on it).
		full := peak >= int(l.ceil[P0].Load()) || refused > 0 || (l.room != nil && l.room.n.Load() > 0)
		if full && !idle {
			if b := l.BusyRate(); b > 0 {
				inst = b*d + inst*(1-d)
			}
			l.busy.Store(math.Float64bits(inst))
		}
	}
	if !l.cfg.TimeEvery {
		// Acquisitions per flush interval, over what may have been a
		// longer gap, divided by the timed tokens wanted per interval.
		rate := float64(acquired)
		if elapsed > l.cfg.FlushInterval {
			rate *= float64(l.cfg.FlushInterval) / float64(elapsed)
		}
		stride := uint64(1)
		if per := int64(rate) / int64(l.cfg.SamplesPerFlush); per > 1 {
			stride = min(uint64(1)<<bits.Len64(uint64(per-1)), 1<<16)
		}
		l.mask.Store(stride - 1)
	}
	var peaks [2]int64
	for i := range peaks {
		peaks[i] = l.prioPeak[i].Swap(l.prio[i].Load())
	}
	l.setCeilings(l.lim.Limit(), peaks[0], peaks[1], elapsed)
}

// setCeilings computes the admission ceiling of each priority from the
// limit and the recent demand of P0 and P1. Called with l.mu held (or
// before the Limiter is shared).
func (l *Limiter) setCeilings(limit int, peak0, peak1 int64, elapsed time.Duration) {
	decay := halfLife(elapsed)
	lim := float64(limit)
	peaks := [2]int64{peak0, peak1}
	mins := [2]float64{l.cfg.Reserve.P0, l.cfg.Reserve.P1}
	refused0 := false // P0 was turned away since the last flush
	for i := range 2 {
		rej := l.prioRej[i].Load()
		// The recent peak halves every second; below 0.1 it is gone.
		h := max(float64(peaks[i]), l.hold[i]*decay)
		if h < 0.1 {
			h = 0
		}
		l.hold[i] = h
		// The floor is whole slots of the configured share (none at tiny
		// limits); demand earns 1.5 x its recent peak, rounded up.
		r := max(math.Floor(mins[i]*lim), math.Ceil(1.5*h))
		if i == 0 && (lim >= 2 || h > 0) {
			// P0 always has a reserved slot once the limit allows one,
			// and while it is active: kept free below the limit, or taken
			// above it (takeReserve) when the limit is one.
			r = max(r, 1)
		}
		if rej != l.lastRej[i] {
			r = max(r, 2*l.reserve[i], 1) // this priority was turned away: make room fast
			refused0 = refused0 || i == 0
		}
		l.lastRej[i] = rej
		l.reserve[i] = min(r, lim)
	}
	l.res0.Store(int64(l.reserve[0]))
	// Two floors bound what the reserves take from lower priorities.
	// While the recent peak demand of all priorities (in-flight plus
	// refused work, same half-life) is below half the limit, the
	// reserves leave that lower half to every priority: the limiter is
	// far from full, a slot taken there costs a higher priority nothing
	// (P0 still finds its reserved slots, above the limit if need be:
	// takeReserve), and reserves sized on each priority's own recent peak
	// add up to more than the load they come from. Refused work counts
	// because ceilings that turn it away also keep in-flight low: under
	// an overload in-flight alone looked far from full, and the floor
	// handed P1 and P2 the room P0's reserve kept.
	//
	// Otherwise the reserves leave the last slot (once the limit is two
	// or more) while P0 is idle, with nothing in flight and no refusal
	// since the last flush: a priority shut out then is refused for
	// nothing. While P0 is active the reserve is room its demand needs,
	// and the last slot is P0's too.
	var floor float64
	switch {
	case l.holdAll < lim/2:
		floor = lim - math.Floor(lim/2)
	case !refused0 && l.prio[P0].Load() == 0:
		floor = min(1, lim-1)
	}
	c1 := max(floor, lim-l.reserve[0])
	c2 := max(floor, c1-l.reserve[1])
	l.ceil[P0].Store(int64(limit))
	l.ceil[P1].Store(int64(c1))
	l.ceil[P2].Store(int64(c2))
}

// halfLife returns the decay over elapsed of a quantity with a half-life
// of one second.
func halfLife(elapsed time.Duration) float64 { return math.Pow(0.5, max(0, elapsed.Seconds())) }

// Limit returns the current limit.
func (l *Limiter) Limit() int { return int(l.ceil[P0].Load()) }

// InFlight returns the current number of admitted, unreleased tokens.
func (l *Limiter) InFlight() int { return int(uint32(l.word.Load())) }

// Algorithm returns the Limit the Limiter feeds.
func (l *Limiter) Algorithm() Limit { return l.lim }

// String describes the limiter for logs.
func (l *Limiter) String() string {
	return fmt.Sprintf("limiter(limit=%d inflight=%d)", l.Limit(), l.InFlight())
}
