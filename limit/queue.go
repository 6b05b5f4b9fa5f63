package limit

import (
	"container/list"
	"math"
	"sync"
	"sync/atomic"
	"time"
)

// The waiting room (LimiterConfig.Queue, AcquireOrWait).
//
// A refusal is expensive in a herd: the refused device backs off
// exponentially (its next delay is drawn from a doubled envelope), so a
// burst a Limiter turns away at once comes back late and spread thin while
// the node it protects sits idle. Measured (docs/benchmarks.md, the edge
// storm): with refusals only, 20,000 devices dropped at once took 82 s to
// come back through two edges whose fleet takes them in 3 s without
// admission. A short wait for a slot turns the burst into a queue the
// node drains at its own pace, highest priority first, and bounds it: a
// request waits at most MaxWait, at most Max of them wait, and a refusal
// carries a hint sized by the backlog ahead of it (RetryAfter), not a
// constant. This is the blocking limiter of Netflix's concurrency-limits
// (a bounded backlog in front of the limit) with priorities in front.

// Wait is the outcome of AcquireOrWait.
type Wait uint8

const (
	// Acquired: a slot was free; the token is returned and the callback
	// is never called.
	Acquired Wait = iota
	// Queued: the request waits; the callback is called exactly once, on
	// its own goroutine, with a token or with false (the wait expired).
	Queued
	// Refused: no slot and no room to wait (no queue configured, or Max
	// requests already wait); the callback is never called.
	Refused
)

// String returns the outcome's name.
func (w Wait) String() string {
	switch w {
	case Acquired:
		return "acquired"
	case Queued:
		return "queued"
	}
	return "refused"
}

// waitingRoom holds the requests waiting for a slot, one FIFO per
// priority.
type waitingRoom struct {
	mu      sync.Mutex
	fifo    [NumPriorities]list.List // of *waiter
	n       atomic.Int64             // requests waiting, all priorities
	queued  atomic.Int64             // requests that waited, total
	expired atomic.Int64             // waits that ended without a slot, total

	// promised counts the places handed out with refusals' hints that
	// the node has not yet had time to serve, per priority: the virtual
	// queue that spaces the hints of a refused herd (RetryAfter). Guarded
	// by mu, drained at the admission rate.
	promised   [NumPriorities]float64
	promisedAt int64   // ns since the Limiter's base
	servedAt   float64 // the rate the places were last drained at, a second
}

// drain takes from promised what the node served at rate since
// promisedAt, highest priority first. Called with r.mu held.
func (r *waitingRoom) drain(now int64, rate float64) {
	if dt := time.Duration(now - r.promisedAt).Seconds(); dt > 0 && rate > 0 {
		served := rate * dt
		for q := range r.promised {
			d := min(served, r.promised[q])
			r.promised[q] -= d
			served -= d
		}
	}
	r.promisedAt, r.servedAt = now, rate
}

type waiter struct {
	p     Priority
	done  func(Token, bool)
	timer *time.Timer
	el    *list.Element
}

// ahead returns how many requests of priority p or higher wait. Called
// with w.mu held.
func (r *waitingRoom) ahead(p Priority) int {
	n := 0
	for q := P0; q <= p; q++ {
		n += r.fifo[q].Len()
	}
	return n
}

// AcquireOrWait takes a slot for priority p like TryAcquirePriority when
// one is free and nobody of p or a higher priority waits for one. Else,
// with a waiting room (LimiterConfig.Queue), the request waits for at most
// Queue.MaxWait: freed slots go to the highest priority waiting, in
// arrival order within a priority, and done is then called once on its
// own goroutine with the token (start the work; end the token as usual)
// or, when the wait expires, with false (refuse the work: RetryAfter is
// its hint). A token handed to done is timed from the moment it was
// handed over, so the Limit's samples are the work's latency, not the
// wait. The wait runs on the runtime's timers (testing/synctest fakes
// them), whatever Clock the Limiter has.
//
// With a waiting room the priority reserves of TryAcquirePriority give
// way to the room's order, which is work-conserving: any priority may use
// the whole limit but its last slot, which is kept for P0 (once the limit
// is 2 or more), and a slot freed goes to the highest priority waiting. A
// burst of P0 therefore earns no reserve that shuts P2 out for seconds
// after it (the reserves' one-second half-life), and a P0 that arrives
// while lower priorities fill the node waits only for the next release.
//
// A request that can neither take a slot nor wait (no waiting room, a nil
// done, or Queue.Max requests already wait) is Refused and counted as a
// refusal; so is a wait that expires. An invalid p is refused.
func (l *Limiter) AcquireOrWait(p Priority, done func(tok Token, ok bool)) (Token, Wait) {
	if !p.Valid() {
		return Token{}, Refused
	}
	r := l.room
	if r == nil || done == nil {
		if tok, ok := l.TryAcquirePriority(p); ok {
			return tok, Acquired
		}
		return Token{}, Refused
	}
	r.mu.Lock()
	if r.ahead(p) == 0 {
		if tok, ok := l.acquireQuiet(int8(p)); ok {
			r.mu.Unlock()
			return tok, Acquired
		}
	}
	if r.n.Load() >= int64(l.cfg.Queue.Max) {
		r.mu.Unlock()
		l.reject(int8(p), l.nowNs())
		return Token{}, Refused
	}
	w := &waiter{p: p, done: done}
	w.el = r.fifo[p].PushBack(w)
	r.n.Add(1)
	r.queued.Add(1)
	w.timer = time.AfterFunc(l.cfg.Queue.MaxWait, func() { l.expire(w) })
	r.mu.Unlock()
	// A slot freed between the failed try above and the push saw nobody
	// waiting: hand it over now.
	l.dispatch()
	return Token{}, Queued
}

// capacity is the node's admissions per second as the waiting room
// estimates them. While the Limiter is full (requests waiting, or
// in-flight at the limit) and has been full before, it is the rate it
// admits at while full (BusyRate): that is what the node serves. Else
// it is the largest of the measured rate (Rate), BusyRate and the limit
// over the ideal latency, or over the last window's latency, the Limit
// measured (Little's law), known from the first windows. Zero when none
// is known. (The largest while full overstated a storm's capacity 2.5 to
// 4.5 times in kraken's 10x storm: Rate reads the slots filling at the
// herd's first flush after an idle hold as a rate, and decays over
// seconds; BusyRate read 113 to 130 a second per edge, the stand-in
// hubs' 120.)
func (l *Limiter) capacity() float64 {
	if b := l.BusyRate(); b > 0 && l.full() {
		return b
	}
	c := max(l.Rate(), l.BusyRate())
	st := l.lim.Stats()
	for _, rtt := range []time.Duration{st.IdealRTT, st.RTT} {
		if rtt > 0 {
			c = max(c, float64(l.Limit())/rtt.Seconds())
		}
	}
	return c
}

// full reports whether requests wait for a slot or in-flight is at the
// limit.
func (l *Limiter) full() bool {
	if l.room != nil && l.room.n.Load() > 0 {
		return true
	}
	return int64(uint32(l.word.Load())) >= l.ceil[P0].Load()
}

// acquireQuiet takes a slot for prio under the waiting room's ceilings
// (the limit for P0, the limit but its last slot for the others) without
// counting a refusal or recomputing the ceilings: it must not re-enter a
// flush (a flush dispatches).
func (l *Limiter) acquireQuiet(prio int8) (Token, bool) {
	for {
		w := l.word.Load()
		ceil := l.ceil[P0].Load()
		if prio != int8(P0) && ceil >= 2 {
			ceil--
		}
		if int64(uint32(w)) >= ceil {
			return Token{}, false
		}
		if l.word.CompareAndSwap(w, w+(1<<32)+1) {
			return l.admitted(w, prio, false, nil), true
		}
	}
}

// dispatch hands free slots to the waiting requests, highest priority
// first. The ceilings fall with the priority (the others' is at most
// P0's), so the first priority that finds no slot ends the round.
func (l *Limiter) dispatch() {
	r := l.room
	if r == nil || r.n.Load() == 0 {
		return
	}
	type grant struct {
		w   *waiter
		tok Token
	}
	var grants []grant
	r.mu.Lock()
	for p := P0; p < NumPriorities; p++ {
		stop := false
		for r.fifo[p].Len() > 0 {
			tok, ok := l.acquireQuiet(int8(p))
			if !ok {
				stop = true
				break
			}
			w := r.fifo[p].Remove(r.fifo[p].Front()).(*waiter)
			w.el = nil
			w.timer.Stop()
			r.n.Add(-1)
			grants = append(grants, grant{w, tok})
		}
		if stop {
			break
		}
	}
	r.mu.Unlock()
	for _, g := range grants {
		go g.w.done(g.tok, true)
	}
}

// expire ends a wait that found no slot in time.
func (l *Limiter) expire(w *waiter) {
	r := l.room
	r.mu.Lock()
	if w.el == nil { // handed a slot meanwhile
		r.mu.Unlock()
		return
	}
	r.fifo[w.p].Remove(w.el)
	w.el = nil
	r.n.Add(-1)
	r.expired.Add(1)
	r.mu.Unlock()
	l.reject(int8(w.p), l.nowNs())
	w.done(Token{}, false)
}

// Waiting returns how many requests wait for a slot.
func (l *Limiter) Waiting() int {
	if l.room == nil {
		return 0
	}
	return int(l.room.n.Load())
}

// RetryAfter returns the jittered retry hint for work of priority p the
// Limiter refused now, and takes a place in the virtual queue of refused
// work: the requests of a higher priority waiting in the room (at most
// Queue.MaxWait's worth: the rest will expire and take places of their
// own, as p's own waiting requests do if they are not served), plus the
// places earlier refusals were promised that the node has not had time
// to serve yet, over the node's capacity (the waiting at the capacity or
// the places' rate, whichever is higher; capacity: the measured
// admission rate, or the limit over the ideal latency if higher; the
// promised places at that rate raised by the clients' own spread,
// ClientSpread), plus Retry.Min, at most Retry.Max, spread uniformly over
// [e, e x (1 + Spread)) (Spread 0.1 for a Limiter: the places spread a
// herd already; the spread breaks ties between nodes). The k-th device of
// a herd refused at once is told to come back k places later than the
// first, so the herd returns at about the rate the node admits, not in a
// second burst, and is not told to wait longer than the node needs.
// Without a waiting room it is Retry.Min.
func (l *Limiter) RetryAfter(p Priority) time.Duration {
	return l.RetryWindow(p).At(l.rnd.float64())
}

// RetryWindow takes a place in the virtual queue as RetryAfter does and
// returns the whole window RetryAfter would draw from, [e, e x (1 +
// Spread)), to send to clients that draw within it themselves (wire's
// retry_within_ms, backoff's HintWithin). Clients that add their own
// policy's jitter above a hint instead would come back over as long again
// as the node needs (ClientSpread).
func (l *Limiter) RetryWindow(p Priority) Retry { return retryOf(l.retryRange(p, true, 0)) }

// RetryWindowWaited is RetryWindow for a request that already waited in
// the room for waited (one whose AcquireOrWait expired: Queue.MaxWait).
// Retry.Min counts from the request's arrival, so it has that much less
// of it: a herd whose waits expire together is told its places from
// then, not Retry.Min later. (With Retry.Min added after a 2 s wait,
// kraken's 10x storm found the node idle for the second between the room
// draining and the first refused coming back.)
func (l *Limiter) RetryWindowWaited(p Priority, waited time.Duration) Retry {
	return retryOf(l.retryRange(p, true, waited))
}

// RetryRange returns the range [lo, hi) the next RetryAfter of priority
// p draws from, without taking a place.
func (l *Limiter) RetryRange(p Priority) (lo, hi time.Duration) { return l.retryRange(p, false, 0) }

// minHint is the least hint retryRange gives: a zero hint reads as none.
const minHint = time.Millisecond

func (l *Limiter) retryRange(p Priority, take bool, waited time.Duration) (lo, hi time.Duration) {
	if !p.Valid() {
		p = P2
	}
	rc := l.cfg.Retry
	est := max(rc.Min-max(waited, 0), minHint)
	if r := l.room; r != nil {
		c := l.capacity()
		// The places are served at the node's own rate, or at the
		// rate SetPlaceRate gives for it (a fleet whose refused come
		// back to any node: its share of the fleet's).
		pc := c
		if f := l.places.Load(); f != nil && c > 0 {
			if v := (*f)(c); v > 0 && !math.IsInf(v, 0) {
				pc = v
			}
		}
		// Promised places are handed out faster than they are served,
		// by the spread of the clients' returns above a place: a client
		// told k/r comes back uniformly within [k/r, (1 + j) k/r], so
		// devices told k/r (k = 1, 2, ...) arrive at r ln(1 + j) / j a
		// second; at r = c j / ln(1 + j) they arrive at the node's rate c
		// (1.05 c for clients that draw within the window, j = Spread =
		// 0.1; 1.44 c for clients that add full jitter above a hint, j =
		// 1).
		rate := pc
		if j := l.clientSpread(); j > 0 {
			rate = pc * j / math.Log1p(j)
		}
		now := l.nowNs()
		r.mu.Lock()
		// The node serves the waiting requests first (they are in the
		// room), then the promised places, highest priority first.
		if pc > 0 {
			r.drain(now, rate)
		} else {
			r.promisedAt = now
		}
		// Requests of p's own priority waiting now are served within
		// MaxWait or expire into places of their own (promised); the
		// refused one comes back behind the higher priorities waiting.
		waiting, promised := float64(r.ahead(p)-r.fifo[p].Len()), 0.0
		for q := P0; q <= p; q++ {
			promised += r.promised[q]
		}
		if take {
			r.promised[p]++
		}
		r.mu.Unlock()
		switch {
		case c > 0:
			// Of those, the node serves at most MaxWait's worth before
			// the rest expire (and take places of their own). They
			// are gone at the node's capacity if the room serves them,
			// at the places' rate if they expire into places; the
			// sooner of the two, because a refused device that comes
			// back early waits in the room, while one that comes back
			// late leaves the node idle. (A herd whose waits expire
			// together: the higher priorities still waiting when a P2
			// expires expire a moment later and are placed at the
			// places' rate. Counted at the capacity, an edge of
			// kraken's 10x storm told its first refused P2 1.22 s for
			// the 116 P1 waiting, at its 95/s; those P1 expired into
			// places at 156/s that ran out after 0.74 s: half a second
			// with no returns due.)
			wait := min(waiting/max(c, rate), l.cfg.Queue.MaxWait.Seconds())
			est += time.Duration((wait + promised/rate) * float64(time.Second))
		case waiting+promised > 0:
			est += l.cfg.Queue.MaxWait
		}
	}
	est = min(est, rc.Max)
	return est, est + time.Duration(rc.Spread*float64(est))
}

// SetPlaceRate sets the rate, in admissions per second, at which the
// virtual queue's places are spaced (RetryAfter, RetryWindow): f is
// given the node's own capacity (Capacity) and returns the rate its
// refused are served at; a result that is not positive keeps the own.
// nil, the default, spaces them at the node's own capacity.
//
// It is for a fleet of nodes in front of shared origins whose refused
// work comes back to any of them at random (devices that pick an edge
// from a DNS answer): each node's places are served by the whole fleet,
// so each should space its own at its share of the fleet's capacity,
// the share of its Backlog in the fleet's: then every node's places run
// out together, when the fleet has served them all.
// Spaced at each node's own, the fleet admits at the slowest node's
// pace once the fastest node's places have run out (kraken's 10x storm:
// two edges whose limits split the origins 89 to 151 placed their
// refused over 6.0 s and 2.6 s, and the fleet took 90 of its 240 a
// second for the last seconds). f is called on the refusing goroutine
// with none of the Limiter's locks held: it must be quick.
func (l *Limiter) SetPlaceRate(f func(own float64) float64) {
	if f == nil {
		l.places.Store(nil)
		return
	}
	l.places.Store(&f)
}

// Backlog returns the requests waiting in the room plus the places
// promised to refused ones that the node has not had time to serve
// (drained at the rate the last hint was spaced by): the work the node
// has ahead of it. Zero without a waiting room.
func (l *Limiter) Backlog() float64 {
	r := l.room
	if r == nil {
		return 0
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.drain(l.nowNs(), r.servedAt)
	b := float64(r.n.Load())
	for _, p := range r.promised {
		b += p
	}
	return b
}

// Capacity returns the node's admissions per second as the waiting room
// estimates them (the rate its places are spaced at without
// SetPlaceRate): while the Limiter is full, the rate it admits at while
// full (BusyRate); else the largest of Rate, BusyRate and the limit over
// the Limit's latency. Zero when none is known.
func (l *Limiter) Capacity() float64 { return l.capacity() }

// clientSpread is the spread j of the clients' returns above a place:
// ClientSpread, or the window's own (Retry.Spread) when they draw within
// it (ClientSpread 0); none for negative.
func (l *Limiter) clientSpread() float64 {
	if j := l.cfg.ClientSpread; j != 0 {
		return j
	}
	return l.cfg.Retry.Spread
}

// Rate returns the admissions per second measured by the flushes, a
// moving average with a one-second half-life; zero before any.
func (l *Limiter) Rate() float64 { return math.Float64frombits(l.rate.Load()) }

// BusyRate returns the admissions per second measured over the flush
// intervals in which the Limiter was full (in-flight at its limit, work
// refused or waiting), with Rate's half-life; it holds through quiet
// spells. Zero before the Limiter was first full.
func (l *Limiter) BusyRate() float64 { return math.Float64frombits(l.busy.Load()) }
