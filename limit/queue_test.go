package limit

import (
	"math"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// fixedLimiter returns a Limiter with a fixed limit of n and the waiting
// room q.
func fixedLimiter(t *testing.T, n int, q QueueConfig) *Limiter {
	t.Helper()
	f, err := NewFixed(n)
	if err != nil {
		t.Fatal(err)
	}
	l, err := NewLimiter(LimiterConfig{Limit: f, Queue: q})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// TestWaitingRoomServesHighestPriorityFirst: with the only slot held,
// P2, P1 and P0 requests wait in that order; each freed slot goes to the
// highest priority waiting, in arrival order within a priority.
func TestWaitingRoomServesHighestPriorityFirst(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := fixedLimiter(t, 1, QueueConfig{MaxWait: time.Minute})
		held, w := l.AcquireOrWait(P2, nil)
		if w != Acquired {
			t.Fatalf("first acquisition: %v, want acquired", w)
		}
		var mu sync.Mutex
		var order []string
		var toks []Token
		enqueue := func(name string, p Priority) {
			if _, w := l.AcquireOrWait(p, func(tok Token, ok bool) {
				if !ok {
					t.Errorf("%s: wait expired", name)
					return
				}
				mu.Lock()
				order = append(order, name)
				toks = append(toks, tok)
				mu.Unlock()
			}); w != Queued {
				t.Fatalf("%s: %v, want queued", name, w)
			}
		}
		enqueue("p2a", P2)
		enqueue("p1a", P1)
		enqueue("p2b", P2)
		enqueue("p0a", P0)
		enqueue("p1b", P1)
		if got := l.Waiting(); got != 5 {
			t.Fatalf("waiting %d, want 5", got)
		}
		held.Success()
		for range 5 {
			synctest.Wait()
			mu.Lock()
			last := toks[len(toks)-1]
			mu.Unlock()
			last.Success()
		}
		synctest.Wait()
		want := []string{"p0a", "p1a", "p1b", "p2a", "p2b"}
		if len(order) != len(want) {
			t.Fatalf("served %v, want %v", order, want)
		}
		for i := range want {
			if order[i] != want[i] {
				t.Fatalf("served %v, want %v", order, want)
			}
		}
	})
}

// TestWaitingRoomKeepsItsOrder: a new request does not take a slot past
// a waiting one of the same or a higher priority.
func TestWaitingRoomKeepsItsOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := fixedLimiter(t, 1, QueueConfig{MaxWait: time.Minute})
		held, _ := l.AcquireOrWait(P0, nil)
		got := make(chan Token, 1)
		if _, w := l.AcquireOrWait(P1, func(tok Token, ok bool) { got <- tok }); w != Queued {
			t.Fatalf("P1 behind a held slot: %v, want queued", w)
		}
		held.Success()
		synctest.Wait()
		tok := <-got
		// The slot is the waiting P1's: a P2 arriving now waits too.
		if _, w := l.AcquireOrWait(P2, func(Token, bool) {}); w != Queued {
			t.Fatalf("P2 behind a served P1: %v, want queued", w)
		}
		tok.Success()
	})
}

// TestWaitExpiresWithAHint: a request that finds no slot within MaxWait
// is told so (done with false), counted as a refusal, and its hint is at
// least Retry.Min.
func TestWaitExpiresWithAHint(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := fixedLimiter(t, 1, QueueConfig{MaxWait: 2 * time.Second})
		held, _ := l.AcquireOrWait(P0, nil)
		start := time.Now()
		var ended time.Duration
		var served atomic.Bool
		l.AcquireOrWait(P1, func(_ Token, ok bool) {
			served.Store(ok)
			ended = time.Since(start)
		})
		time.Sleep(3 * time.Second)
		synctest.Wait()
		if served.Load() || ended != 2*time.Second {
			t.Fatalf("wait ended after %v, served %v; want refused after 2s", ended, served.Load())
		}
		if s := l.Snapshot(); s.Rejected != 1 || s.RejectedByPriority[P1] != 1 {
			t.Fatalf("refusals %d (P1 %d), want the expired wait counted", s.Rejected, s.RejectedByPriority[P1])
		}
		if l.Waiting() != 0 {
			t.Fatalf("still waiting: %d", l.Waiting())
		}
		if lo, hi := l.RetryRange(P1); lo < time.Second || hi < lo {
			t.Fatalf("hint range [%v, %v), want at least Retry.Min", lo, hi)
		}
		held.Success()
	})
}

// TestWaitingRoomIsBounded: at most Queue.Max requests wait; one more is
// refused at once.
func TestWaitingRoomIsBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := fixedLimiter(t, 1, QueueConfig{MaxWait: time.Second, Max: 3})
		l.AcquireOrWait(P0, nil)
		for i := range 3 {
			if _, w := l.AcquireOrWait(P2, func(Token, bool) {}); w != Queued {
				t.Fatalf("request %d: %v, want queued", i, w)
			}
		}
		if _, w := l.AcquireOrWait(P0, func(Token, bool) { t.Error("a refused request's callback ran") }); w != Refused {
			t.Fatalf("a fourth waiter: %v, want refused", w)
		}
		time.Sleep(2 * time.Second)
		synctest.Wait()
	})
}

// TestNoWaitingRoomRefusesAtOnce: without Queue.MaxWait AcquireOrWait is a
// try.
func TestNoWaitingRoomRefusesAtOnce(t *testing.T) {
	l := fixedLimiter(t, 1, QueueConfig{})
	if _, w := l.AcquireOrWait(P0, nil); w != Acquired {
		t.Fatalf("%v, want acquired", w)
	}
	if _, w := l.AcquireOrWait(P0, func(Token, bool) { t.Error("callback ran") }); w != Refused {
		t.Fatalf("%v, want refused", w)
	}
}

// herd offers n requests at once to a Limiter with a fixed limit of 10
// whose work takes 10 ms (1,000 per second), P0 every tenth, and returns
// how many were served and refused and when the last P0 and the first P2
// started.
func herd(t *testing.T, n int, q QueueConfig) (served, refused int, lastP0, firstP2 time.Duration) {
	l := fixedLimiter(t, 10, q)
	start := time.Now()
	var mu sync.Mutex
	firstP2 = time.Hour
	run := func(p Priority, tok Token) {
		mu.Lock()
		served++
		at := time.Since(start)
		if p == P0 {
			lastP0 = max(lastP0, at)
		} else {
			firstP2 = min(firstP2, at)
		}
		mu.Unlock()
		time.Sleep(10 * time.Millisecond)
		tok.Success()
	}
	for i := range n {
		p := P2
		if i%10 == 0 {
			p = P0
		}
		tok, w := l.AcquireOrWait(p, func(tok Token, ok bool) {
			if !ok {
				mu.Lock()
				refused++
				mu.Unlock()
				return
			}
			run(p, tok)
		})
		switch w {
		case Acquired:
			go run(p, tok)
		case Refused:
			mu.Lock()
			refused++
			mu.Unlock()
		}
	}
	time.Sleep(time.Minute)
	synctest.Wait()
	return served, refused, lastP0, firstP2
}

// TestWaitingRoomTakesAHerd: 2,000 requests at once on a node that
// serves 1,000 a second. With a 5 s waiting room every one is served
// (in about 2 s) and P0 goes first; without one, all but the first ten
// (and P0's reserved slots) are refused.
func TestWaitingRoomTakesAHerd(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		served, refused, lastP0, firstP2 := herd(t, 2000, QueueConfig{MaxWait: 5 * time.Second})
		if served != 2000 || refused != 0 {
			t.Errorf("with a waiting room: %d served, %d refused; want all served", served, refused)
		}
		// The ten first slots went to whoever came first; from then on
		// every P0 is served before any waiting P2.
		if lastP0 > 250*time.Millisecond {
			t.Errorf("the last P0 started after %v, want P0 first (within 0.25 s of the 2 s herd)", lastP0)
		}
		t.Logf("waiting room: %d served, %d refused, last P0 at %v, first P2 at %v", served, refused, lastP0, firstP2)
		served, refused, _, _ = herd(t, 2000, QueueConfig{})
		if served > 20 || served+refused != 2000 {
			t.Errorf("without: %d served, %d refused; want at most the limit and P0's reserve served", served, refused)
		}
	})
}

// closedLoop starts n P0 workers on l, each holding its slot for hold and
// acquiring the next at once (n / hold admissions a second), and returns
// the function that stops them.
func closedLoop(t *testing.T, l *Limiter, n int, hold time.Duration) (stop func()) {
	t.Helper()
	done := make(chan struct{})
	var worker func(tok Token, ok bool)
	worker = func(tok Token, ok bool) {
		if !ok {
			return
		}
		time.Sleep(hold)
		tok.Success()
		select {
		case <-done:
			return
		default:
		}
		if tok, w := l.AcquireOrWait(P0, worker); w == Acquired {
			go worker(tok, true)
		}
	}
	for range n {
		tok, w := l.AcquireOrWait(P0, nil)
		if w != Acquired {
			t.Fatalf("worker: %v", w)
		}
		go worker(tok, true)
	}
	return func() { close(done) }
}

// TestRetryAfterIsSizedByTheBacklog: a request refused behind a queue
// the node takes seconds to serve is told to come back after about that
// long, not after Retry.Min.
func TestRetryAfterIsSizedByTheBacklog(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := fixedLimiter(t, 10, QueueConfig{MaxWait: time.Minute, Max: 100_000})
		// Ten closed-loop P0 workers: 1,000 admissions a second.
		stop := closedLoop(t, l, 10, 10*time.Millisecond)
		time.Sleep(3 * time.Second)
		// 4,000 P1 requests of 10 ms each arrive behind them: 4 s of work
		// at that rate. (Work that ended at once drained the whole room in
		// no time whenever the scheduler ran the callbacks first: the
		// test failed 1 run in 20.)
		for range 4000 {
			l.AcquireOrWait(P1, func(tok Token, ok bool) {
				if ok {
					time.AfterFunc(10*time.Millisecond, tok.Success)
				}
			})
		}
		// The workers' freed slots go to waiting P1 between their own
		// acquisitions, so a few of the 4,000 are served by now.
		lo, hi := l.RetryRange(P2)
		if lo < 2500*time.Millisecond || lo > 7*time.Second || (hi-lo-lo/10).Abs() > time.Microsecond {
			t.Errorf("hint range [%v, %v) behind %d waiting at %.0f/s; want Retry.Min + waiting / rate (up to 5.6 s), spread 0.1", lo, hi, l.Waiting(), l.Rate())
		}
		if lo0, _ := l.RetryRange(P0); lo0 > 1500*time.Millisecond {
			t.Errorf("P0's hint starts at %v with at most a few P0 waiting, want about Retry.Min", lo0)
		}
		stop()
		time.Sleep(2 * time.Minute)
		synctest.Wait()
	})
}

// TestWaitingRoomRace: many goroutines acquire, wait and release on a
// small limit; in-flight never exceeds it and every request ends exactly
// once, served or refused.
func TestWaitingRoomRace(t *testing.T) {
	l := fixedLimiter(t, 4, QueueConfig{MaxWait: 50 * time.Millisecond, Max: 64})
	var inflight, peak, ended atomic.Int64
	work := func(tok Token) {
		n := inflight.Add(1)
		casMax(&peak, n)
		time.Sleep(time.Millisecond)
		inflight.Add(-1)
		tok.Success()
	}
	var wg sync.WaitGroup
	const n = 2000
	wg.Add(n)
	for i := range n {
		go func() {
			p := Priority(i % 3)
			tok, w := l.AcquireOrWait(p, func(tok Token, ok bool) {
				if ok {
					work(tok)
				}
				ended.Add(1)
				wg.Done()
			})
			switch w {
			case Acquired:
				work(tok)
				ended.Add(1)
				wg.Done()
			case Refused:
				ended.Add(1)
				wg.Done()
			}
		}()
	}
	wg.Wait()
	// P0's reserve may lift in-flight above the limit by its reserve.
	if p := peak.Load(); p > 4+1 {
		t.Errorf("peak in-flight %d above the limit 4 (+1 reserve)", p)
	}
	if ended.Load() != n || l.Waiting() != 0 || l.InFlight() != 0 {
		t.Errorf("ended %d of %d, waiting %d, in flight %d", ended.Load(), n, l.Waiting(), l.InFlight())
	}
}

// TestRefusedHerdIsSpacedByTheVirtualQueue: each refusal's hint takes a
// place behind the earlier ones, so a herd refused at one instant is told
// to come back over the time the node needs to serve it (1,000 refusals
// at about 900 admissions a second; the places are handed out faster by
// the spread of the clients' returns above them, j / ln(1 + j): 1.05 for
// clients that draw within the window, j = Spread = 0.1, the default;
// 1.44 for clients that add full jitter above a point hint, ClientSpread
// 1), a higher priority's hint does not queue behind a lower one's
// places, and the places drain as the node serves.
func TestRefusedHerdIsSpacedByTheVirtualQueue(t *testing.T) {
	for _, tc := range []struct {
		name   string
		spread float64 // ClientSpread
		j      float64 // the spread the places account for
	}{{"window", 0, 0.1}, {"full jitter above the hint", 1, 1}} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f, err := NewFixed(10)
				if err != nil {
					t.Fatal(err)
				}
				l, err := NewLimiter(LimiterConfig{Limit: f, Queue: QueueConfig{MaxWait: time.Minute}, ClientSpread: tc.spread})
				if err != nil {
					t.Fatal(err)
				}
				stop := closedLoop(t, l, 10, 10*time.Millisecond)
				time.Sleep(3 * time.Second)
				first := l.RetryWindow(P2)
				if first.After != time.Second || first.Within != 100*time.Millisecond {
					t.Errorf("the first window %+v, want [1s, 1.1s]: Retry.Min and Spread", first)
				}
				for range 1000 {
					l.RetryAfter(P2)
				}
				last, _ := l.RetryRange(P2)
				p1, _ := l.RetryRange(P1)
				want := time.Duration(1000 / (l.capacity() * tc.j / math.Log1p(tc.j)) * float64(time.Second))
				if d := last - first.After; d < want*9/10 || d > want*11/10 {
					t.Errorf("1,000 refusals at a capacity of %.0f/s moved the hint from %v to %v; want %v later", l.capacity(), first.After, last, want)
				}
				if p1 > 1100*time.Millisecond {
					t.Errorf("P1's hint %v queued behind P2's places", p1)
				}
				time.Sleep(2 * time.Second)
				if again, _ := l.RetryRange(P2); again > first.After+100*time.Millisecond {
					t.Errorf("2 s later the hint still starts at %v (first %v): the places did not drain", again, first.After)
				}
				stop()
				time.Sleep(time.Second)
				synctest.Wait()
			})
		})
	}
}

// TestRateAfterAnIdleSpell: the first flushes of a herd that follows ten
// idle seconds read the herd's rate, not its admissions spread over the
// idle gap (which made a fresh edge's first hints minutes long).
func TestRateAfterAnIdleSpell(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := fixedLimiter(t, 10, QueueConfig{MaxWait: time.Second})
		time.Sleep(10 * time.Second)
		stop := closedLoop(t, l, 10, 10*time.Millisecond)
		time.Sleep(100 * time.Millisecond)
		if r := l.Rate(); r < 500 || r > 2000 {
			t.Errorf("rate %.0f/s 100 ms into a herd of 1,000/s after 10 s idle; want about 1,000", r)
		}
		stop()
		time.Sleep(time.Second)
		synctest.Wait()
	})
}

// TestBusyRateOfASecondHerd: a flush that finds nothing in flight starts
// an interval with an empty moment, so a quiet spell after it is an idle
// gap. A Limiter full at about 1,000 admissions a second, a flush once
// all is released (as the flush that comes with the last release does),
// 7 s quiet, then a second herd: 150 ms into it the busy rate still reads
// about 1,000, not the herd's first admissions spread over the 7 s (16 a
// second for one of kraken's 10x storm's edges, whose refused were then
// spaced at 190 of the fleet's 240 a second).
func TestBusyRateOfASecondHerd(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := fixedLimiter(t, 10, QueueConfig{MaxWait: time.Second})
		stop := closedLoop(t, l, 10, 10*time.Millisecond)
		time.Sleep(2 * time.Second)
		stop()
		time.Sleep(100 * time.Millisecond)
		synctest.Wait()
		l.Flush()
		time.Sleep(7 * time.Second)
		stop = closedLoop(t, l, 10, 10*time.Millisecond)
		time.Sleep(150 * time.Millisecond)
		if b := l.BusyRate(); b < 500 || b > 2000 {
			t.Errorf("busy rate %.0f/s 150 ms into a second herd of about 1,000/s after 7 s quiet; want about 1,000", b)
		}
		stop()
		time.Sleep(time.Second)
		synctest.Wait()
	})
}

// TestBusyRateHoldsThroughAQuietSpell: the capacity a herd's hints are
// spaced by is the rate the Limiter admitted at while it was last full,
// not what a quiet spell before the herd asked of it. A Limiter full at
// about 1,000 admissions a second, then a trickle of one slow request a
// second for 20 s (Rate falls to 50, the limit over the latency to 20),
// then 1,000 refusals at once: their places are spaced at the busy rate
// (0.7 s for all of them), not at the trickle's (14 s; a 10x storm
// through two edges had its goodput halved by that).
func TestBusyRateHoldsThroughAQuietSpell(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := fixedLimiter(t, 10, QueueConfig{MaxWait: time.Second})
		stop := closedLoop(t, l, 10, 10*time.Millisecond)
		time.Sleep(2 * time.Second)
		stop()
		time.Sleep(100 * time.Millisecond)
		busy := l.BusyRate()
		if busy < 500 || busy > 2000 {
			t.Fatalf("busy rate %.0f/s after 2 s full at about 1,000/s", busy)
		}
		for range 20 {
			tok, ok := l.TryAcquirePriority(P2)
			if !ok {
				t.Fatal("a trickle request refused")
			}
			time.Sleep(500 * time.Millisecond)
			tok.Success()
			time.Sleep(500 * time.Millisecond)
		}
		// The flush after each idle second counts its one admission over
		// one flush interval: Rate reads 50/s, not 1.
		if r := l.Rate(); r > 100 {
			t.Fatalf("rate %.1f/s after 20 s of one request a second", r)
		}
		if b := l.BusyRate(); b != busy {
			t.Errorf("busy rate moved from %.0f to %.0f/s in a spell that was never full", busy, b)
		}
		first, _ := l.RetryRange(P2)
		for range 1000 {
			l.RetryAfter(P2)
		}
		last, _ := l.RetryRange(P2)
		if d := last - first; d > 3*time.Second {
			t.Errorf("1,000 refusals after the quiet spell moved the hint by %v; want about 0.7 s (the busy rate's spacing)", d)
		}
		synctest.Wait()
	})
}

// TestRetryMinCountsFromArrival: a request refused after it waited in the
// room has that much less of Retry.Min to wait (RetryWindowWaited): a herd
// whose waits expired together is told its places from the expiry, so the
// node is not left idle for Retry.Min between the room draining and the
// first refused coming back.
func TestRetryMinCountsFromArrival(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := fixedLimiter(t, 10, QueueConfig{MaxWait: 2 * time.Second})
		stop := closedLoop(t, l, 10, 10*time.Millisecond)
		time.Sleep(3 * time.Second)
		if w := l.RetryWindowWaited(P2, 2*time.Second); w.After > 10*time.Millisecond {
			t.Errorf("the first refused after a 2 s wait is told %+v, want its place (about 1 ms) with Retry.Min (1 s) spent waiting", w)
		}
		if w := l.RetryWindowWaited(P2, 300*time.Millisecond); w.After < 700*time.Millisecond || w.After > 750*time.Millisecond {
			t.Errorf("refused after a 300 ms wait: %+v, want the rest of Retry.Min (700 ms) and its place", w)
		}
		if w := l.RetryWindow(P2); w.After < time.Second {
			t.Errorf("refused at once: %+v, want at least Retry.Min", w)
		}
		stop()
		time.Sleep(time.Second)
		synctest.Wait()
	})
}

// TestPlacesFollowTheHigherPrioritiesExpiring: a herd whose waits expire
// together. When a P2 expires, the P1 still waiting expire a moment later
// and are placed at the places' rate; the P2's place follows theirs, it
// is not pushed past them by the time the node's own capacity would need
// to serve them (a Limiter whose places are served at three times its
// capacity, SetPlaceRate: a fleet's edge with a large part of the fleet's
// backlog). Counted at the capacity, the P2 was told three times the P1's
// last place, and the fleet had a hole in its returns between the two.
func TestPlacesFollowTheHigherPrioritiesExpiring(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := fixedLimiter(t, 10, QueueConfig{MaxWait: 2 * time.Second})
		l.SetPlaceRate(func(own float64) float64 { return 3 * own })
		stop := closedLoop(t, l, 10, 10*time.Millisecond)
		// Between the workers' 10 ms turns, once each holds its slot
		// again: at a turn's instant a worker may have released its
		// slot and not yet taken the next (CI once saw a P1 acquire).
		time.Sleep(3*time.Second + 5*time.Millisecond)
		synctest.Wait()
		const p1 = 300
		for range p1 {
			if _, w := l.AcquireOrWait(P1, func(tok Token, ok bool) {
				if ok {
					tok.Success()
				}
			}); w != Queued {
				t.Fatalf("a P1 behind a full limit: %v, want queued", w)
			}
		}
		p2 := l.RetryWindowWaited(P2, 2*time.Second)
		var last Retry
		for range p1 {
			last = l.RetryWindowWaited(P1, 2*time.Second)
		}
		if p2.After > last.After*6/5+5*time.Millisecond {
			t.Errorf("a P2 refused with %d P1 waiting is told %v; the P1, placed as they expire, up to %v (capacity %.0f/s): want the P2 at about the P1's last place", p1, p2.After, last.After, l.Capacity())
		}
		stop()
		time.Sleep(3 * time.Second)
		synctest.Wait()
	})
}

// TestCapacityWhileFullIsTheBusyRate: a herd that follows an idle spell
// fills the free slots at once, and a flush soon after reads that fill as
// a rate (40 slots in 25 ms: 1,600 a second) while the node serves 100. While the Limiter is full, the places of refused work are
// spaced at the rate it admits at while full (BusyRate), not at that fill.
func TestCapacityWhileFullIsTheBusyRate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := fixedLimiter(t, 40, QueueConfig{MaxWait: time.Minute})
		stop := closedLoop(t, l, 40, 400*time.Millisecond)
		time.Sleep(3 * time.Second)
		stop()
		time.Sleep(10 * time.Second)
		stop = closedLoop(t, l, 40, 400*time.Millisecond)
		time.Sleep(25 * time.Millisecond)
		// A refusal 25 ms into the herd flushes: the 40 slots taken in
		// those 25 ms read as 1,600 a second.
		if _, ok := l.TryAcquirePriority(P2); ok {
			t.Fatal("a 41st slot while 40 workers hold the limit of 40")
		}
		if l.Rate() < 500 {
			t.Fatalf("rate %.0f/s after the fill; the test needs the fill read as a rate", l.Rate())
		}
		for range 100 {
			l.RetryWindow(P2)
		}
		// 100 places at the busy rate (about 100 a second, handed out
		// 1.05 times faster): about 0.95 s after Retry.Min.
		if lo, _ := l.RetryRange(P2); lo < 1700*time.Millisecond {
			t.Errorf("100 refusals while full at a busy rate of %.0f/s (rate %.0f/s) are told to come back from %v; want about 1.95 s", l.BusyRate(), l.Rate(), lo)
		}
		stop()
		time.Sleep(2 * time.Second)
		synctest.Wait()
	})
}

// TestRateOfSlowWork: work that holds its slots longer than four flush
// intervals is flushed only at its releases, so every interval is long;
// that is not an idle gap. 40 slots of 400 ms: 100 a second, read as
// such by Rate and BusyRate (20 times that while any long interval was
// taken for a gap).
func TestRateOfSlowWork(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := fixedLimiter(t, 40, QueueConfig{MaxWait: time.Minute})
		stop := closedLoop(t, l, 40, 400*time.Millisecond)
		// The first flush reads the fill after the idle start as a herd
		// (TestRateAfterAnIdleSpell); ten half-lives later that is gone.
		time.Sleep(10 * time.Second)
		if r, b := l.Rate(), l.BusyRate(); r < 70 || r > 140 || b < 70 || b > 140 {
			t.Errorf("rate %.0f/s, busy rate %.0f/s for 40 slots of 400 ms; want about 100", r, b)
		}
		stop()
		time.Sleep(time.Second)
		synctest.Wait()
	})
}

// TestPlaceRateSpacesThePlaces: a Limiter told that its refused are
// served at three times its own capacity (SetPlaceRate: its share of a
// fleet's) spaces 1,000 refusals over a third of the time; the rate is
// given the Limiter's own capacity, and a rate that is not positive, or
// none, keeps the own spacing.
func TestPlaceRateSpacesThePlaces(t *testing.T) {
	for _, tc := range []struct {
		name   string
		factor float64 // the rate SetPlaceRate returns, times the own capacity; 0: none set
		want   float64 // the spacing against the own capacity's
	}{{"own", 0, 1}, {"fleet of three", 3, 3}, {"not positive", -1, 1}} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				l := fixedLimiter(t, 10, QueueConfig{MaxWait: time.Minute})
				var given float64
				if tc.factor != 0 {
					l.SetPlaceRate(func(own float64) float64 { given = own; return own * tc.factor })
				}
				stop := closedLoop(t, l, 10, 10*time.Millisecond)
				time.Sleep(3 * time.Second)
				first, _ := l.RetryRange(P2)
				c := l.Capacity()
				for range 1000 {
					l.RetryWindow(P2)
				}
				last, _ := l.RetryRange(P2)
				j := l.clientSpread()
				want := time.Duration(1000 / (c * tc.want * j / math.Log1p(j)) * float64(time.Second))
				if d := last - first; d < want*9/10 || d > want*11/10 {
					t.Errorf("1,000 refusals at a capacity of %.0f/s moved the hint by %v; want %v", c, d, want)
				}
				if tc.factor != 0 && (given < c*0.9 || given > c*1.1) {
					t.Errorf("the place rate was given %.0f/s; want the own capacity, %.0f/s", given, c)
				}
				stop()
				time.Sleep(time.Second)
				synctest.Wait()
			})
		})
	}
}

// TestBacklog: the Backlog is the requests waiting plus the places
// promised and not yet served: 1,000 refusals read 1,000, and they drain
// at the rate their places were spaced by (half of them after half the
// time the node needs for them); without a room it is 0.
func TestBacklog(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := fixedLimiter(t, 10, QueueConfig{MaxWait: time.Minute})
		stop := closedLoop(t, l, 10, 10*time.Millisecond)
		time.Sleep(3 * time.Second)
		if b := l.Backlog(); b != 0 {
			t.Fatalf("backlog %v before any refusal", b)
		}
		for range 1000 {
			l.RetryWindow(P2)
		}
		if b := l.Backlog(); b < 999 || b > 1001 {
			t.Fatalf("backlog %v after 1,000 refusals", b)
		}
		j := l.clientSpread()
		half := time.Duration(500 / (l.Capacity() * j / math.Log1p(j)) * float64(time.Second))
		time.Sleep(half)
		if b := l.Backlog(); b < 450 || b > 550 {
			t.Fatalf("backlog %v after %v, half the time 1,000 places need; want about 500", b, half)
		}
		stop()
		time.Sleep(time.Second)
		synctest.Wait()
	})
	f, err := NewFixed(10)
	if err != nil {
		t.Fatal(err)
	}
	l, err := NewLimiter(LimiterConfig{Limit: f})
	if err != nil {
		t.Fatal(err)
	}
	l.RetryWindow(P2)
	if b := l.Backlog(); b != 0 {
		t.Fatalf("backlog %v without a waiting room", b)
	}
}
