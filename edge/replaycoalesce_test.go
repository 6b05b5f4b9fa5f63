package edge

import (
	"context"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// rpResumer counts how the goroutines of a coalescing test were answered.
type rpResumer struct {
	mu    sync.Mutex
	kinds map[string]int
	offs  [][]uint64
}

// TestReplayCoalescing: of N identical concurrent misses, one leads
// upstream and the others wait for it, then are answered from the cache
// (or go upstream themselves when the leader fails or times out).
func TestReplayCoalescing(t *testing.T) {
	const waiters = 50
	for _, tc := range []struct {
		name    string
		release func(c *ReplayCache, tk *ReplayTicket)
		want    map[string]int
		stats   ReplayStats
	}{
		{name: "leader done: waiters answered from the cache",
			release: func(c *ReplayCache, tk *ReplayTicket) {
				rpAdd(c, "ch", "e1", rpRange(4, 9)...) // the leader's catch-up
				tk.Done(rpPos("e1", 9))
			},
			want:  map[string]int{"hit+coalesced": waiters},
			stats: ReplayStats{Misses: 2, Coalesced: waiters}},
		{name: "leader done with nothing to catch up",
			release: func(c *ReplayCache, tk *ReplayTicket) { tk.Done(rpPos("e1", 3)) },
			want:    map[string]int{"hit+coalesced": waiters},
			stats:   ReplayStats{Misses: 2, Coalesced: waiters}},
		{name: "leader done but the catch-up has a hole",
			release: func(c *ReplayCache, tk *ReplayTicket) {
				rpAdd(c, "ch", "e1", 4, 5, 7, 8)
				tk.Done(rpPos("e1", 8))
			},
			want:  map[string]int{"miss": waiters},
			stats: ReplayStats{Misses: 2 + waiters}},
		{name: "leader done in another epoch",
			release: func(c *ReplayCache, tk *ReplayTicket) {
				rpAdd(c, "ch", "e2", 1, 2)
				tk.Done(rpPos("e2", 2))
			},
			want:  map[string]int{"miss": waiters},
			stats: ReplayStats{Misses: 2 + waiters}},
		{name: "leader fails: waiters go upstream",
			release: func(c *ReplayCache, tk *ReplayTicket) { tk.Fail() },
			want:    map[string]int{"miss": waiters},
			stats:   ReplayStats{Misses: 2 + waiters}},
		{name: "leader fails but the cache covers by then",
			release: func(c *ReplayCache, tk *ReplayTicket) {
				rpAdd(c, "ch", "e1", rpRange(4, 9)...) // another session's catch-up
				tk.Fail()
			},
			want:  map[string]int{"hit+coalesced": waiters},
			stats: ReplayStats{Misses: 2, Coalesced: waiters}},
		{name: "leader never releases: waiters go upstream at the timeout",
			release: func(c *ReplayCache, tk *ReplayTicket) { time.Sleep(DefaultReplayCoalesceTimeout) },
			want:    map[string]int{"miss": waiters},
			stats:   ReplayStats{Misses: 2 + waiters}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				c := rpCache(t, ReplayConfig{}, nil) // time.Now: the bubble's clock
				from := rpPos("e1", 3)
				lead := c.Resume(rpTenant, "ch", from)
				if lead.Kind != ReplayLead || lead.Ticket == nil {
					t.Fatalf("first miss answered %v, want lead", lead.Kind)
				}
				r := &rpResumer{kinds: map[string]int{}}
				var wg sync.WaitGroup
				for range waiters {
					r.run(t, c, t.Context(), from, &wg)
				}
				synctest.Wait() // every waiter blocks in Answer
				if s := c.Stats(); s.Leads != 1 || s.Misses != 1 || s.Coalesced != 0 {
					t.Fatalf("while waiting: %+v", s)
				}
				// (The stats below count one more miss: this lead.)
				// A different resume of the channel does not wait for it.
				if a := c.Resume(rpTenant, "ch", rpPos("e1", 2)); a.Kind != ReplayLead {
					t.Fatalf("a resume from another offset answered %v, want its own lead", a.Kind)
				} else {
					a.Ticket.Fail()
				}
				start := time.Now()
				tc.release(c, lead.Ticket)
				wg.Wait()
				if waited := time.Since(start); waited > DefaultReplayCoalesceTimeout {
					t.Fatalf("the waiters waited %v, longer than the coalescing timeout", waited)
				}
				if !rpSameCounts(r.kinds, tc.want) {
					t.Fatalf("answers %v, want %v", r.kinds, tc.want)
				}
				for _, o := range r.offs {
					if len(o) > 0 && !slices.Equal(o, rpRange(4, 9)) {
						t.Fatalf("a waiter got %v, want 4..9", o)
					}
				}
				s := c.Stats()
				if s.Hits != tc.stats.Hits || s.Misses != tc.stats.Misses || s.Coalesced != tc.stats.Coalesced || s.Leads != 0 {
					t.Fatalf("stats %+v, want hits %d misses %d coalesced %d, no lead", s, tc.stats.Hits, tc.stats.Misses, tc.stats.Coalesced)
				}
				// The lead is gone: the next miss leads again.
				if a := c.Resume(rpTenant, "ch", rpPos("e1", 1)); a.Kind != ReplayLead {
					t.Fatalf("after the lead: %v, want a new lead", a.Kind)
				}
			})
		})
	}
}

func rpSameCounts(a, b map[string]int) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// TestReplayWaiterContext: a waiter whose context ends goes upstream at
// once; the others keep waiting.
func TestReplayWaiterContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := rpCache(t, ReplayConfig{}, nil)
		from := rpPos("e1", 0)
		lead := c.Resume(rpTenant, "ch", from)
		w1, w2 := c.Resume(rpTenant, "ch", from), c.Resume(rpTenant, "ch", from)
		if w1.Kind != ReplayWait || w2.Kind != ReplayWait {
			t.Fatalf("%v %v, want two waits", w1.Kind, w2.Kind)
		}
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		if a := w1.Wait.Answer(ctx); a.Kind != ReplayMiss {
			t.Fatalf("a cancelled waiter answered %v", a.Kind)
		}
		select {
		case <-w2.Wait.Ready():
			t.Fatal("Ready before the leader is done")
		default:
		}
		rpAdd(c, "ch", "e1", 1, 2)
		lead.Ticket.Done(rpPos("e1", 2))
		<-w2.Wait.Ready()
		if got := rpOffsets(t, w2.Wait.Answer(context.Background()), "e1"); !slices.Equal(got, []uint64{1, 2}) {
			t.Fatalf("second waiter: %v", got)
		}
		if again := w2.Wait.Answer(context.Background()); again.Kind != ReplayHit || c.Stats().Coalesced != 1 {
			t.Fatalf("a second Answer changed the answer or the count: %v %+v", again.Kind, c.Stats())
		}
		if s := c.Stats(); s.Misses != 2 || s.Coalesced != 1 {
			t.Fatalf("stats %+v, want 2 misses (leader, cancelled) and 1 coalesced", s)
		}
		// ResumeWait does the same in one call; a hit comes at once.
		if a := c.ResumeWait(t.Context(), rpTenant, "ch", from); a.Kind != ReplayHit || a.Coalesced {
			t.Fatalf("ResumeWait of a covered resume: %v", a.Kind)
		}
	})
}

// TestReplayTicketRelease: releasing twice, Fail after Done and a nil
// ticket are harmless; the first release decides.
func TestReplayTicketRelease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := rpCache(t, ReplayConfig{}, nil)
		from := rpPos("e1", 0)
		lead := c.Resume(rpTenant, "ch", from)
		w := c.Resume(rpTenant, "ch", from)
		lead.Ticket.Done(from) // nothing to catch up: the answer rests on the Done
		lead.Ticket.Done(nil)
		lead.Ticket.Fail()
		var nilTicket *ReplayTicket
		nilTicket.Done(from)
		nilTicket.Fail()
		if a := w.Wait.Answer(t.Context()); a.Kind != ReplayHit {
			t.Fatalf("Fail after Done undid the Done: %v", a.Kind)
		}
		time.Sleep(2 * DefaultReplayCoalesceTimeout) // the stopped timer does nothing
		if s := c.Stats(); s.Leads != 0 || s.Misses != 1 || s.Coalesced != 1 {
			t.Fatalf("stats %+v", s)
		}
	})
}
