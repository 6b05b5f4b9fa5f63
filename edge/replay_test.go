package edge

import (
	"context"
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/protobuf/proto"

	"github.com/corralhq/corral/internal/testkit"
	"github.com/corralhq/corral/wire/corralv1"
)

const rpTenant = "acme"

// rpCache returns a cache on clock (nil: time.Now) with cfg.
func rpCache(t testing.TB, cfg ReplayConfig, clock *testkit.Clock) *ReplayCache {
	t.Helper()
	var opts ReplayOptions
	if clock != nil {
		opts.Now = clock.Now
	}
	c, err := NewReplayCache(cfg, opts)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func rpClock() *testkit.Clock { return testkit.NewClock(time.Unix(1_700_000_000, 0)) }

func rpMsg(channel, epoch string, off uint64, p corralv1.Priority, size int) *corralv1.Message {
	return &corralv1.Message{Channel: channel, Epoch: epoch, Offset: off, Priority: p,
		Data: []byte(fmt.Sprintf("%s/%s/%d%s", channel, epoch, off, strings.Repeat("x", max(size, 0))))}
}

// rpAdd adds the P0 messages offs of channel in epoch.
func rpAdd(c *ReplayCache, channel, epoch string, offs ...uint64) {
	for _, o := range offs {
		c.Add(rpTenant, rpMsg(channel, epoch, o, corralv1.Priority_PRIORITY_P0, 0))
	}
}

func rpRange(lo, hi uint64) []uint64 {
	var out []uint64
	for o := lo; o <= hi; o++ {
		out = append(out, o)
	}
	return out
}

func rpPos(epoch string, off uint64) *corralv1.Position {
	return &corralv1.Position{Epoch: epoch, Offset: off}
}

// rpOffsets returns the offsets of a hit, or nil for a miss.
func rpOffsets(t testing.TB, a ReplayAnswer, epoch string) []uint64 {
	t.Helper()
	if a.Kind != ReplayHit {
		return nil
	}
	offs := []uint64{}
	for _, m := range a.Messages {
		if m.Epoch != epoch || !strings.HasPrefix(string(m.Data), fmt.Sprintf("%s/%s/%d", m.Channel, epoch, m.Offset)) {
			t.Fatalf("message %d carries %q in epoch %q", m.Offset, m.Data, m.Epoch)
		}
		offs = append(offs, m.Offset)
	}
	if want := rpPos(epoch, a.Last.GetOffset()); a.Last.GetEpoch() != want.Epoch {
		t.Fatalf("Last %v in another epoch than %q", a.Last, epoch)
	}
	if n := len(offs); n > 0 && offs[n-1] != a.Last.GetOffset() {
		t.Fatalf("last message %d, Last %d", offs[n-1], a.Last.GetOffset())
	}
	return offs
}

// TestReplayCoverage: a resume from X is covered exactly when the cache's
// epoch is X's and it holds every offset X+1 .. L (L its newest); the
// answer is those messages in order and L. Holes (offsets of uncached
// priorities, or not seen) leave everything below them uncovered.
func TestReplayCoverage(t *testing.T) {
	tests := []struct {
		name     string
		add      []uint64 // P0 messages of epoch "e1", in this order
		addP2    []uint64 // P2 messages (not cached)
		from     *corralv1.Position
		want     []uint64 // nil: a miss
		wantLast uint64
	}{
		{name: "from before the first held", add: rpRange(1, 10), from: rpPos("e1", 0), want: rpRange(1, 10), wantLast: 10},
		{name: "from the middle", add: rpRange(1, 10), from: rpPos("e1", 6), want: rpRange(7, 10), wantLast: 10},
		{name: "at the newest: nothing to send", add: rpRange(1, 10), from: rpPos("e1", 10), want: []uint64{}, wantLast: 10},
		{name: "beyond the newest", add: rpRange(1, 10), from: rpPos("e1", 11)},
		{name: "below the oldest held", add: rpRange(5, 10), from: rpPos("e1", 3)},
		{name: "just below the oldest held", add: rpRange(5, 10), from: rpPos("e1", 4), want: rpRange(5, 10), wantLast: 10},
		{name: "another epoch", add: rpRange(1, 10), from: rpPos("e0", 5)},
		{name: "no epoch", add: rpRange(1, 10), from: rpPos("", 5)},
		{name: "hole in X+1..L", add: append(rpRange(1, 5), rpRange(7, 10)...), from: rpPos("e1", 4)},
		{name: "above the hole", add: append(rpRange(1, 5), rpRange(7, 10)...), from: rpPos("e1", 6), want: rpRange(7, 10), wantLast: 10},
		{name: "hole of an uncached P2", add: append(rpRange(1, 5), rpRange(7, 10)...), addP2: []uint64{6}, from: rpPos("e1", 2)},
		{name: "hole filled later, out of order", add: []uint64{1, 2, 5, 6, 7, 3, 4}, from: rpPos("e1", 0), want: rpRange(1, 7), wantLast: 7},
		{name: "catch-up after live", add: []uint64{8, 9, 10, 4, 5, 6, 7}, from: rpPos("e1", 3), want: rpRange(4, 10), wantLast: 10},
		{name: "catch-up not yet joined", add: []uint64{8, 9, 10, 4, 5, 6}, from: rpPos("e1", 3)},
		{name: "descending", add: []uint64{5, 4, 3, 2}, from: rpPos("e1", 1), want: rpRange(2, 5), wantLast: 5},
		{name: "nil position", add: rpRange(1, 3), from: nil},
		{name: "empty cache", from: rpPos("e1", 0)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := rpCache(t, ReplayConfig{}, rpClock())
			rpAdd(c, "ch", "e1", tc.add...)
			for _, o := range tc.addP2 {
				c.Add(rpTenant, rpMsg("ch", "e1", o, corralv1.Priority_PRIORITY_P2, 0))
			}
			a := c.Lookup(rpTenant, "ch", tc.from)
			got := rpOffsets(t, a, "e1")
			if (got == nil) != (tc.want == nil) || !slices.Equal(got, tc.want) {
				t.Fatalf("Lookup(%v) = %v %v, want %v", tc.from, a.Kind, got, tc.want)
			}
			if tc.want != nil && a.Last.GetOffset() != tc.wantLast {
				t.Fatalf("Last = %v, want %d", a.Last, tc.wantLast)
			}
			if tc.want != nil && c.Lookup("other", "ch", tc.from).Kind != ReplayMiss {
				t.Fatal("another tenant's channel of the same name is covered")
			}
		})
	}
}

// TestReplayPriorities: only the configured priorities are kept (a
// message without a priority counts as P2).
func TestReplayPriorities(t *testing.T) {
	for _, tc := range []struct {
		name   string
		prios  []string
		msg    corralv1.Priority
		cached bool
	}{
		{name: "default P0 keeps P0", msg: corralv1.Priority_PRIORITY_P0, cached: true},
		{name: "default P0 drops P1", msg: corralv1.Priority_PRIORITY_P1},
		{name: "default P0 drops P2", msg: corralv1.Priority_PRIORITY_P2},
		{name: "P2 configured keeps unspecified", prios: []string{"P0", "p2"}, msg: corralv1.Priority_PRIORITY_UNSPECIFIED, cached: true},
		{name: "P1 only drops P0", prios: []string{"P1"}, msg: corralv1.Priority_PRIORITY_P0},
		{name: "out of the enum", prios: []string{"P0", "P1", "P2"}, msg: corralv1.Priority(9)},
		{name: "empty list keeps nothing", prios: []string{}, msg: corralv1.Priority_PRIORITY_P0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := rpCache(t, ReplayConfig{Priorities: tc.prios}, rpClock())
			c.Add(rpTenant, rpMsg("ch", "e1", 1, tc.msg, 0))
			if got := c.Lookup(rpTenant, "ch", rpPos("e1", 0)).Kind == ReplayHit; got != tc.cached {
				t.Fatalf("cached = %v, want %v", got, tc.cached)
			}
			if got := c.Caches(tc.msg); got != tc.cached {
				t.Fatalf("Caches = %v, want %v", got, tc.cached)
			}
		})
	}
}

// TestReplayEpochChange: a message of a new epoch drops the old epoch's
// messages, and late messages of the dropped epoch do not bring it back.
func TestReplayEpochChange(t *testing.T) {
	c := rpCache(t, ReplayConfig{}, rpClock())
	rpAdd(c, "ch", "e1", rpRange(1, 5)...)
	rpAdd(c, "ch", "e2", 1, 2, 3)
	if a := c.Lookup(rpTenant, "ch", rpPos("e1", 2)); a.Kind != ReplayMiss {
		t.Fatalf("the old epoch is still covered: %v", rpOffsets(t, a, "e1"))
	}
	if got := rpOffsets(t, c.Lookup(rpTenant, "ch", rpPos("e2", 0)), "e2"); !slices.Equal(got, rpRange(1, 3)) {
		t.Fatalf("new epoch: %v, want 1..3", got)
	}
	if s := c.Stats(); s.Messages != 3 {
		t.Fatalf("%d messages held, want the new epoch's 3", s.Messages)
	}
	rpAdd(c, "ch", "e1", 6) // a lagging session
	if got := rpOffsets(t, c.Lookup(rpTenant, "ch", rpPos("e2", 0)), "e2"); !slices.Equal(got, rpRange(1, 3)) {
		t.Fatalf("a late message of the dropped epoch changed the cache: %v", got)
	}
	if s := c.Stats(); s.Messages != 3 || s.Evictions != 0 || s.Expired != 0 {
		t.Fatalf("stats %+v: an epoch change is neither eviction nor expiry", s)
	}
}

// TestReplayExpiry: a message stays for exactly the window after the edge
// took it (injected clock).
func TestReplayExpiry(t *testing.T) {
	clock := rpClock()
	c := rpCache(t, ReplayConfig{Window: 30 * time.Second}, clock)
	rpAdd(c, "ch", "e1", rpRange(1, 5)...)
	clock.Advance(10 * time.Second)
	rpAdd(c, "ch", "e1", rpRange(6, 10)...)
	clock.Advance(20*time.Second - time.Nanosecond) // 1..5 are 30s - 1ns old
	if got := rpOffsets(t, c.Lookup(rpTenant, "ch", rpPos("e1", 0)), "e1"); !slices.Equal(got, rpRange(1, 10)) {
		t.Fatalf("just inside the window: %v, want 1..10", got)
	}
	clock.Advance(time.Nanosecond) // 1..5 are 30s old: gone
	if a := c.Lookup(rpTenant, "ch", rpPos("e1", 0)); a.Kind != ReplayMiss {
		t.Fatalf("expired messages still cover: %v", rpOffsets(t, a, "e1"))
	}
	if got := rpOffsets(t, c.Lookup(rpTenant, "ch", rpPos("e1", 5)), "e1"); !slices.Equal(got, rpRange(6, 10)) {
		t.Fatalf("after the first expiry: %v, want 6..10", got)
	}
	clock.Advance(10 * time.Second) // everything is 30s old or more
	if a := c.Lookup(rpTenant, "ch", rpPos("e1", 10)); a.Kind != ReplayMiss {
		t.Fatal("an edge that saw nothing for a window still claims to know the newest offset")
	}
	c.Resume(rpTenant, "ch", rpPos("e1", 10)).Ticket.Fail() // a Resume sweeps when due
	if s := c.Stats(); s.Messages != 0 || s.Channels != 0 || s.Bytes != 0 || s.Expired != 10 {
		t.Fatalf("after the window: %+v, want an empty cache and 10 expired", s)
	}
}

// TestReplayExpiryOutOfOrder: a message that arrives after its successor
// (a catch-up behind live messages) expires with it, not a window after
// its own arrival.
func TestReplayExpiryOutOfOrder(t *testing.T) {
	clock := rpClock()
	c := rpCache(t, ReplayConfig{Window: 30 * time.Second}, clock)
	rpAdd(c, "ch", "e1", 5, 6)
	clock.Advance(20 * time.Second)
	rpAdd(c, "ch", "e1", 4)
	clock.Advance(10*time.Second - time.Nanosecond)
	if got := rpOffsets(t, c.Lookup(rpTenant, "ch", rpPos("e1", 3)), "e1"); !slices.Equal(got, rpRange(4, 6)) {
		t.Fatalf("inside the window: %v, want 4..6", got)
	}
	clock.Advance(time.Nanosecond)
	if a := c.Lookup(rpTenant, "ch", rpPos("e1", 3)); a.Kind != ReplayMiss {
		t.Fatalf("5 and 6 expired, yet %v is covered", rpOffsets(t, a, "e1"))
	}
	c.Resume(rpTenant, "ch", rpPos("e1", 3)).Ticket.Fail() // sweeps
	if s := c.Stats(); s.Messages != 0 || s.Expired != 3 {
		t.Fatalf("stats %+v, want all 3 expired", s)
	}
}

// TestReplayDuplicatesCountedOnce: the same message from many sessions is
// stored once, and a message dropped from the cache is not taken again.
func TestReplayDuplicatesCountedOnce(t *testing.T) {
	clock := rpClock()
	c := rpCache(t, ReplayConfig{}, clock)
	for range 100 {
		rpAdd(c, "ch", "e1", 1, 2, 3) // fresh *Message values each time
	}
	rpAdd(c, "ch", "e1", 5)
	for range 100 {
		rpAdd(c, "ch", "e1", 5, 1) // a duplicate below a hole and above
	}
	one := replaySize(c.Lookup(rpTenant, "ch", rpPos("e1", 4)).Messages[0])
	s := c.Stats()
	wantBytes := 4*one + int64(replayChanOverhead+len(rpTenant)+len("ch")+len("e1"))
	if s.Messages != 4 || s.Bytes != wantBytes || s.Channels != 1 {
		t.Fatalf("stats %+v, want 4 messages in %d bytes in 1 channel", s, wantBytes)
	}
	// Below the floor: offsets expired (or evicted) are not taken again.
	clock.Advance(31 * time.Second)
	rpAdd(c, "ch", "e1", 6)
	rpAdd(c, "ch", "e1", 4, 2)
	if got := rpOffsets(t, c.Lookup(rpTenant, "ch", rpPos("e1", 5)), "e1"); !slices.Equal(got, []uint64{6}) {
		t.Fatalf("after expiry: %v, want 6", got)
	}
	if s := c.Stats(); s.Messages != 1 {
		t.Fatalf("%d messages, want 1: offsets below the floor were taken again", s.Messages)
	}
}

// TestReplayCopies: the cache keeps its own copy; the caller may reuse its
// message.
func TestReplayCopies(t *testing.T) {
	c := rpCache(t, ReplayConfig{}, rpClock())
	m := rpMsg("ch", "e1", 1, corralv1.Priority_PRIORITY_P0, 0)
	c.Add(rpTenant, m)
	m.Data[0] = '!' // the caller reuses its buffer
	m.Offset, m.Data = 2, []byte("ch/e1/2")
	c.Add(rpTenant, m)
	if got := rpOffsets(t, c.Lookup(rpTenant, "ch", rpPos("e1", 0)), "e1"); !slices.Equal(got, []uint64{1, 2}) {
		t.Fatalf("%v, want 1 and 2", got) // rpOffsets checks each payload
	}
}

func (r *rpResumer) run(t *testing.T, c *ReplayCache, ctx context.Context, from *corralv1.Position, wg *sync.WaitGroup) {
	wg.Go(func() {
		a := c.Resume(rpTenant, "ch", from)
		if a.Kind != ReplayWait {
			t.Errorf("a resume behind the leader answered %v, want wait", a.Kind)
			return
		}
		a = a.Wait.Answer(ctx)
		r.mu.Lock()
		defer r.mu.Unlock()
		k := a.Kind.String()
		if a.Coalesced {
			k += "+coalesced"
		}
		r.kinds[k]++
		if a.Kind == ReplayHit {
			r.offs = append(r.offs, rpOffsets(t, a, from.Epoch))
		}
	})
}

// TestReplayMemoryBound: under a flood the accounted bytes never pass
// max_bytes; the largest channels lose their oldest messages first, the
// small ones keep theirs, and evicted offsets leave the covered run.
func TestReplayMemoryBound(t *testing.T) {
	const max = 256 << 10
	c := rpCache(t, ReplayConfig{MaxBytes: max}, rpClock())
	for _, ch := range []string{"small-a", "small-b", "small-c"} {
		for o := uint64(1); o <= 20; o++ {
			c.Add(rpTenant, rpMsg(ch, "e1", o, corralv1.Priority_PRIORITY_P0, 100))
		}
	}
	for o := uint64(1); o <= 5000; o++ {
		c.Add(rpTenant, rpMsg("big", "e1", o, corralv1.Priority_PRIORITY_P0, 200))
		if b := c.Stats().Bytes; b > max {
			t.Fatalf("after message %d: %d bytes, above %d", o, b, max)
		}
	}
	s := c.Stats()
	if s.Evictions == 0 || s.Bytes > max || s.Bytes < max/2 {
		t.Fatalf("stats %+v: want evictions and bytes in (max/2, max]", s)
	}
	for _, ch := range []string{"small-a", "small-b", "small-c"} {
		if got := rpOffsets(t, c.Lookup(rpTenant, ch, rpPos("e1", 0)), "e1"); !slices.Equal(got, rpRange(1, 20)) {
			t.Fatalf("%s lost messages to the big channel: %v", ch, got)
		}
	}
	if c.Lookup(rpTenant, "big", rpPos("e1", 0)).Kind != ReplayMiss {
		t.Fatal("the big channel's evicted offsets are still covered")
	}
	got := rpOffsets(t, c.Lookup(rpTenant, "big", rpPos("e1", 4990)), "e1")
	if !slices.Equal(got, rpRange(4991, 5000)) {
		t.Fatalf("the big channel's newest are not covered: %v", got)
	}
	// Evicted offsets are not taken again.
	before := c.Stats().Messages
	c.Add(rpTenant, rpMsg("big", "e1", 1, corralv1.Priority_PRIORITY_P0, 200))
	if c.Stats().Messages != before {
		t.Fatal("an evicted offset was taken again")
	}
}

// TestReplayMemoryBoundFlood: many goroutines on many channels at once.
func TestReplayMemoryBoundFlood(t *testing.T) {
	const max = 512 << 10
	c := rpCache(t, ReplayConfig{MaxBytes: max}, nil)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(g), 1))
			for o := uint64(1); o <= 2000; o++ {
				ch := fmt.Sprintf("ch-%d", rng.IntN(50))
				c.Add(rpTenant, rpMsg(ch, "e1", o, corralv1.Priority_PRIORITY_P0, rng.IntN(1000)))
			}
		})
	}
	wg.Wait()
	s := c.Stats()
	if s.Bytes > max || s.Evictions == 0 {
		t.Fatalf("after the flood: %+v, want at most %d bytes and evictions", s, max)
	}
	var sum int64
	var msgs int64
	for i := range c.shards {
		for _, ch := range c.shards[i].m {
			sum += ch.bytes.Load()
			msgs += int64(len(ch.msgs))
		}
	}
	if sum != s.Bytes || msgs != s.Messages {
		t.Fatalf("channels hold %d bytes in %d messages, the gauges say %d in %d", sum, msgs, s.Bytes, s.Messages)
	}
}

// TestReplayLevel: the water level cuts the largest sizes first.
func TestReplayLevel(t *testing.T) {
	sized := func(b ...int64) ([]replaySized, int64) {
		var out []replaySized
		var sum int64
		for _, x := range b {
			out = append(out, replaySized{bytes: x})
			sum += x
		}
		return out, sum
	}
	for _, tc := range []struct {
		sizes  []int64
		target int64
		want   int64
	}{
		{[]int64{100, 10, 10}, 60, 40},
		{[]int64{100, 10, 10}, 200, 100},
		{[]int64{50, 50, 10}, 70, 30},
		{[]int64{50, 50, 10}, 30, 10},
		{[]int64{50, 50, 10}, 0, 0},
	} {
		s, sum := sized(tc.sizes...)
		if got := replayLevel(s, sum, tc.target); got != tc.want {
			t.Errorf("level of %v to %d = %d, want %d", tc.sizes, tc.target, got, tc.want)
		}
	}
}

// TestReplayRace: concurrent adds (in any order, duplicates, epoch
// changes), lookups and resumes; every hit is a run X+1..L of one epoch.
// Run with -race.
func TestReplayRace(t *testing.T) {
	c := rpCache(t, ReplayConfig{MaxBytes: 256 << 10}, nil)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(g), 2))
			for i := range 3000 {
				ch := fmt.Sprintf("ch-%d", rng.IntN(4))
				epoch := "e1"
				if i > 2000 {
					epoch = "e2"
				}
				c.Add(rpTenant, rpMsg(ch, epoch, uint64(i/2+rng.IntN(5)+1), corralv1.Priority_PRIORITY_P0, rng.IntN(300)))
			}
		})
	}
	for g := range 4 {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(g), 3))
			for range 3000 {
				ch := fmt.Sprintf("ch-%d", rng.IntN(4))
				from := rpPos([]string{"e1", "e2"}[rng.IntN(2)], uint64(rng.IntN(1500)))
				a := c.Resume(rpTenant, ch, from)
				switch a.Kind {
				case ReplayLead:
					if rng.IntN(2) == 0 {
						a.Ticket.Done(rpPos(from.Epoch, from.Offset+3))
					} else {
						a.Ticket.Fail()
					}
				case ReplayWait:
					a = a.Wait.Answer(ctx)
				}
				if a.Kind == ReplayHit {
					for _, m := range a.Messages { // shared: sessions encode them at once
						if _, err := proto.Marshal(m); err != nil {
							t.Error(err)
						}
					}
					offs := rpOffsets(t, a, from.Epoch)
					for j, o := range offs {
						if o != from.Offset+uint64(j)+1 {
							t.Errorf("resume from %d got %v", from.Offset, offs)
							return
						}
					}
				}
			}
		})
	}
	wg.Wait()
	s := c.Stats()
	if s.Bytes > 256<<10 || s.Hits+s.Misses+s.Coalesced != 4*3000 {
		t.Fatalf("stats %+v: bound passed or resumes not counted once each", s)
	}
}

// TestReplayAccountedBytesMatchHeap measures what cached messages really
// cost (runtime.MemStats over 100,000 messages, of several shapes) and
// fails when the accounted bytes stray more than 15 % from it: the fixed
// overheads replayMsgOverhead and replayChanOverhead come from here.
func TestReplayAccountedBytesMatchHeap(t *testing.T) {
	if testing.Short() || rpRace {
		t.Skip("adds 100,000 messages per shape; run without -race and -short")
	}
	for _, tc := range []struct{ chans, per, size int }{
		{1, 100_000, 0}, {100, 1000, 100}, {10_000, 10, 100}, {100_000, 1, 0}, {1000, 100, 1000}, {100, 1000, 1025},
	} {
		t.Run(fmt.Sprintf("%d channels of %d messages of %d bytes", tc.chans, tc.per, tc.size), func(t *testing.T) {
			c := rpCache(t, ReplayConfig{MaxBytes: 1 << 40, Window: time.Hour}, nil)
			in := make([]*corralv1.Message, tc.chans) // reused: the cache copies
			for i := range in {
				in[i] = &corralv1.Message{Channel: fmt.Sprintf("channel-%06d", i), Epoch: "epoch-0123456",
					Priority: corralv1.Priority_PRIORITY_P0, Data: make([]byte, tc.size)}
			}
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			for o := 1; o <= tc.per; o++ {
				for _, m := range in {
					m.Offset = uint64(o)
					c.Add(rpTenant, m)
				}
			}
			runtime.GC()
			runtime.ReadMemStats(&after)
			// The channel names and epoch are the caller's strings here; in
			// an edge they are the decoded message's, held by the cache.
			strs := int64(tc.chans) * int64(len(rpTenant)+len(in[0].Channel)+len(in[0].Epoch))
			heap := float64(int64(after.HeapAlloc-before.HeapAlloc) + strs)
			acc := float64(c.Stats().Bytes)
			n := float64(tc.chans * tc.per)
			t.Logf("heap %.1f B a message, accounted %.1f", heap/n, acc/n)
			if acc < 0.85*heap || acc > 1.15*heap {
				t.Errorf("accounted %.0f B, heap %.0f B: more than 15 %% apart", acc, heap)
			}
			runtime.KeepAlive(in)
			runtime.KeepAlive(c)
		})
	}
}

// TestReplayDuplicateAddAllocatesNothing: the path every session but the
// first takes.
func TestReplayDuplicateAddAllocatesNothing(t *testing.T) {
	c := rpCache(t, ReplayConfig{}, nil)
	m := rpMsg("ch", "e1", 1, corralv1.Priority_PRIORITY_P0, 100)
	c.Add(rpTenant, m)
	below := rpMsg("ch", "e1", 3, corralv1.Priority_PRIORITY_P0, 100)
	c.Add(rpTenant, below)
	c.Add(rpTenant, rpMsg("ch", "e1", 5, corralv1.Priority_PRIORITY_P0, 100)) // 3 is below a hole now
	if n := testing.AllocsPerRun(1000, func() { c.Add(rpTenant, m); c.Add(rpTenant, below) }); n != 0 {
		t.Fatalf("a duplicate Add allocates %.1f times", n)
	}
	if s := c.Stats(); s.Messages != 3 {
		t.Fatalf("%d messages, want 3", s.Messages)
	}
}

// TestReplayDisabled: a disabled cache keeps nothing and answers every
// resume with a miss, counted nowhere.
func TestReplayDisabled(t *testing.T) {
	c := rpCache(t, ReplayConfig{Disabled: true}, nil)
	rpAdd(c, "ch", "e1", 1, 2)
	from := rpPos("e1", 0)
	for range 3 {
		if a := c.Resume(rpTenant, "ch", from); a.Kind != ReplayMiss {
			t.Fatalf("disabled cache answered %v", a.Kind)
		}
	}
	if s := c.Stats(); s != (ReplayStats{}) {
		t.Fatalf("stats %+v, want zero", s)
	}
}

// TestReplayMetrics: the gauges and counters under their names.
func TestReplayMetrics(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	c, err := NewReplayCache(ReplayConfig{}, ReplayOptions{Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	rpAdd(c, "ch", "e1", 1, 2, 3)
	c.Resume(rpTenant, "ch", rpPos("e1", 1))               // hit
	c.Resume(rpTenant, "ch", rpPos("e1", 7)).Ticket.Fail() // miss
	want := `
# HELP corral_edge_replay_hits_total Resumes answered from the replay cache at once.
# TYPE corral_edge_replay_hits_total counter
corral_edge_replay_hits_total 1
# HELP corral_edge_replay_messages Messages in the replay cache.
# TYPE corral_edge_replay_messages gauge
corral_edge_replay_messages 3
# HELP corral_edge_replay_misses_total Resumes sent upstream (the leaders of coalesced resumes included).
# TYPE corral_edge_replay_misses_total counter
corral_edge_replay_misses_total 1
# HELP corral_edge_replay_channels Channels with messages in the replay cache.
# TYPE corral_edge_replay_channels gauge
corral_edge_replay_channels 1
# HELP corral_edge_replay_max_bytes The replay cache's memory bound (replay.max_bytes).
# TYPE corral_edge_replay_max_bytes gauge
corral_edge_replay_max_bytes 6.7108864e+07
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "corral_edge_replay_hits_total",
		"corral_edge_replay_messages", "corral_edge_replay_misses_total", "corral_edge_replay_channels",
		"corral_edge_replay_max_bytes"); err != nil {
		t.Fatal(err)
	}
	n, err := testutil.GatherAndCount(reg)
	if err != nil || n != 10 {
		t.Fatalf("%d series (%v), want 10", n, err)
	}
	if _, err := NewReplayCache(ReplayConfig{}, ReplayOptions{Registerer: reg}); err == nil || !strings.HasPrefix(err.Error(), "edge: ") {
		t.Fatalf("second registration: %v", err)
	}
}
