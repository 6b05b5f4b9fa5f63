package edge

import (
	"cmp"
	"context"
	"fmt"
	"hash/maphash"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/corralhq/corral/wire"
	"github.com/corralhq/corral/wire/corralv1"
)

// The replay cache: the messages of the cached priorities that the edge
// relayed in the last window, per (tenant, channel), so that a resume the
// cache covers is answered at the edge, and identical resumes that it does
// not cover go upstream once (README.md, "Replay cache", has the rules).
//
// Lock order: ReplayCache.evictMu, then a shard's mu, then a channel's mu.
// ReplayCache.leadMu is taken alone, or before a shard's and a channel's
// mu, never after them.

// replayShards is the number of shards of the channel map (a power of two).
const replayShards = 64

// Accounted memory. replayMsgOverhead is what a cached message costs
// beyond its payload: its *corralv1.Message (128 B size class) and its
// 24 B slot in the channel's slice with the slice's spare capacity; its
// value is measured by TestReplayAccountedBytesMatchHeap (runtime.MemStats
// over 100,000 messages), which fails when the heap strays from it.
// replayChanOverhead is a channel's entry (map slot, replayChannel) beyond
// its tenant, name and epoch strings, measured by the same test.
const (
	replayMsgOverhead  = 160
	replayChanOverhead = 224
)

// ReplayKey names one channel of one tenant.
type ReplayKey struct {
	Tenant, Channel string
}

// ReplayKind says how a session serves a resume.
type ReplayKind uint8

const (
	// ReplayMiss: the cache cannot answer. Send the device's Subscribe
	// upstream unchanged.
	ReplayMiss ReplayKind = iota
	// ReplayHit: the cache covers the resume. Send upstream the Subscribe
	// with from = Last; forward the upstream Subscribed, then Messages,
	// then the upstream deliveries with offsets above Last.Offset.
	ReplayHit
	// ReplayLead: not covered, and this session is the first to ask.
	// Send the Subscribe upstream unchanged and release Ticket (Done when
	// the catch-up reached Subscribed.position, Fail on any other end).
	ReplayLead
	// ReplayWait: an identical resume is on its way upstream. Call
	// Wait.Answer (it returns a ReplayHit or a ReplayMiss).
	ReplayWait
)

// String returns "miss", "hit", "lead" or "wait".
func (k ReplayKind) String() string {
	switch k {
	case ReplayHit:
		return "hit"
	case ReplayLead:
		return "lead"
	case ReplayWait:
		return "wait"
	}
	return "miss"
}

// ReplayAnswer is how a session serves one resume (see ReplayKind).
type ReplayAnswer struct {
	Kind ReplayKind
	// Messages are the cached messages X+1 .. L in offset order (ReplayHit;
	// empty when the device is at L already). They are shared: read them,
	// never modify them.
	Messages []*corralv1.Message
	// Last is {epoch, L} (ReplayHit): the from of the upstream Subscribe.
	Last *corralv1.Position
	// Coalesced reports a ReplayHit answered after waiting for a leader.
	Coalesced bool
	// Ticket is the leader's obligation (ReplayLead).
	Ticket *ReplayTicket
	// Wait is the waiter's handle (ReplayWait).
	Wait *ReplayWaiter
}

// ReplayStats are the cache's gauges and counters at one instant.
type ReplayStats struct {
	// Bytes is the accounted memory (payloads and overheads), Messages
	// and Channels what the cache holds.
	Bytes, Messages, Channels int64
	// Leads is the number of resumes on their way upstream that others
	// may wait for.
	Leads int64
	// Hits are resumes answered from the cache at once, Coalesced the ones
	// answered from it after waiting for a leader, Misses the ones sent
	// upstream (leaders included). Every Resume with a position counts
	// once in exactly one of them.
	Hits, Misses, Coalesced int64
	// Evictions are messages dropped for max_bytes, Expired the ones
	// dropped at the end of the window.
	Evictions, Expired int64
}

// ReplayOptions are the injectable parts of a ReplayCache.
type ReplayOptions struct {
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Registerer receives the cache's metrics (corral_edge_replay_*); nil
	// registers nothing.
	Registerer prometheus.Registerer
}

// ReplayCache keeps the recently relayed messages of the cached priorities
// per (tenant, channel) and answers resumes from them. Create it with
// NewReplayCache; it is safe for concurrent use. Add is called for every
// message relayed to a device; Resume is what a session calls for a
// Subscribe with a position.
type ReplayCache struct {
	cfg    ReplayConfig
	window int64   // nanoseconds
	cached [4]bool // by normalized corralv1.Priority
	now    func() time.Time
	seed   maphash.Seed
	shards [replayShards]replayShard

	bytes, messages, channels          atomic.Int64
	hits, misses, coalesced            atomic.Int64
	evictions, expired                 atomic.Int64
	nextSweep                          atomic.Int64 // unix nanoseconds
	descBytes, descMessages, descChans *prometheus.Desc
	descLeads, descMax                 *prometheus.Desc
	descHits, descMisses, descCoal     *prometheus.Desc
	descEvict, descExpired             *prometheus.Desc

	evictMu  sync.Mutex
	evictBuf []replaySized // under evictMu

	leadMu sync.Mutex
	leads  map[replayLeadKey]*ReplayTicket
}

type replayShard struct {
	mu sync.RWMutex
	m  map[ReplayKey]*replayChannel
}

// replayChannel is the cache of one channel. Its messages are in offset
// order with nondecreasing stamps, so the oldest is first and expiry and
// eviction drop a prefix.
type replayChannel struct {
	key ReplayKey
	// bytes is the channel's accounted memory; written under mu, read
	// without it by the evictor's scan.
	bytes atomic.Int64

	mu       sync.RWMutex
	dead     bool   // removed from its shard: an adder looks it up again
	epoch    string // of every held message
	dropped  string // the epoch before: its late messages are ignored
	floor    uint64 // offsets up to floor were dropped: not taken again
	runStart uint64 // first offset of the contiguous run that ends at the newest
	msgs     []replayEntry
}

type replayEntry struct {
	off   uint64
	stamp int64 // unix nanoseconds, when the edge took the message
	msg   *corralv1.Message
}

type replaySized struct {
	s     *replayShard
	ch    *replayChannel
	bytes int64
}

type replayLeadKey struct {
	key    ReplayKey
	epoch  string
	offset uint64
}

var _ prometheus.Collector = (*ReplayCache)(nil)

// NewReplayCache returns an empty cache configured by cfg (defaults
// applied), and registers its metrics on opts.Registerer when set. It
// starts no goroutine: expired messages are dropped as the cache is used
// (Add, Resume and a metrics scrape sweep every channel once per quarter
// of the window).
func NewReplayCache(cfg ReplayConfig, opts ReplayOptions) (*ReplayCache, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.WithDefaults()
	c := &ReplayCache{
		cfg:    cfg,
		window: int64(cfg.Window),
		now:    opts.Now,
		seed:   maphash.MakeSeed(),
		leads:  make(map[replayLeadKey]*ReplayTicket),
	}
	if c.now == nil {
		c.now = time.Now
	}
	for _, p := range cfg.Priorities {
		q, _ := parseReplayPriority(p) // Validate checked them
		c.cached[q] = true
	}
	for i := range c.shards {
		c.shards[i].m = make(map[ReplayKey]*replayChannel)
	}
	desc := func(name, help string) *prometheus.Desc {
		return prometheus.NewDesc("corral_edge_replay_"+name, help, nil, nil)
	}
	c.descBytes = desc("bytes", "Memory the replay cache accounts for: payloads plus a fixed overhead per message and per channel.")
	c.descMax = desc("max_bytes", "The replay cache's memory bound (replay.max_bytes).")
	c.descMessages = desc("messages", "Messages in the replay cache.")
	c.descChans = desc("channels", "Channels with messages in the replay cache.")
	c.descLeads = desc("leads", "Resumes on their way upstream that identical resumes wait for.")
	c.descHits = desc("hits_total", "Resumes answered from the replay cache at once.")
	c.descMisses = desc("misses_total", "Resumes sent upstream (the leaders of coalesced resumes included).")
	c.descCoal = desc("coalesced_total", "Resumes answered from the replay cache after waiting for an identical resume upstream.")
	c.descEvict = desc("evictions_total", "Cached messages dropped to stay within replay.max_bytes.")
	c.descExpired = desc("expired_total", "Cached messages dropped at the end of the window.")
	if opts.Registerer != nil {
		if err := opts.Registerer.Register(c); err != nil {
			return nil, fmt.Errorf("edge: replay metrics: %w", err)
		}
	}
	return c, nil
}

func (c *ReplayCache) shard(k ReplayKey) *replayShard {
	h := maphash.String(c.seed, k.Tenant)
	h = h*0x9e3779b97f4a7c15 ^ maphash.String(c.seed, k.Channel)
	return &c.shards[h&(replayShards-1)]
}

// Caches reports whether messages of priority p are kept.
func (c *ReplayCache) Caches(p corralv1.Priority) bool {
	p = wire.Normalize(p)
	return !c.cfg.Disabled && p >= 0 && int(p) < len(c.cached) && c.cached[p]
}

// Add takes a message relayed to a device of tenant. It keeps it when its
// priority is cached and its offset is new for the channel; a message
// already held (every session on the channel delivers it once) costs two
// read locks and no allocation. A message of another epoch than the held
// ones starts the channel over in that epoch (the old epoch's messages are
// dropped, and its late messages ignored). The cache keeps its own copy:
// the caller may reuse m. Call Add before the message is counted toward a
// leader's catch-up (ReplayTicket.Done).
func (c *ReplayCache) Add(tenant string, m *corralv1.Message) {
	if m == nil || !c.Caches(m.GetPriority()) || m.GetOffset() == 0 || m.GetEpoch() == "" {
		return
	}
	key := ReplayKey{Tenant: tenant, Channel: m.GetChannel()}
	s := c.shard(key)
	s.mu.RLock()
	ch := s.m[key]
	s.mu.RUnlock()
	if ch != nil {
		ch.mu.RLock()
		skip := !ch.dead && ch.skip(m.Epoch, m.Offset)
		ch.mu.RUnlock()
		if skip {
			return
		}
	}
	now := c.now().UnixNano()
	for !c.insert(s, key, ch, m, now) {
		ch = nil // it died under us: look it up again
	}
	if c.bytes.Load() > c.cfg.MaxBytes {
		c.evict()
	}
	c.maybeSweep(now)
}

// skip reports whether a message of epoch at offset off is held already or
// not to be taken (a dropped epoch, or at or below the floor). The caller
// holds ch.mu.
func (ch *replayChannel) skip(epoch string, off uint64) bool {
	if epoch != ch.epoch {
		return epoch == ch.dropped
	}
	if off <= ch.floor {
		return true
	}
	n := len(ch.msgs)
	if n == 0 {
		return false
	}
	if off >= ch.runStart && off <= ch.msgs[n-1].off {
		return true
	}
	_, found := ch.find(off)
	return found
}

// find returns the index of off in ch.msgs, or where it would go.
func (ch *replayChannel) find(off uint64) (int, bool) {
	return slices.BinarySearchFunc(ch.msgs, off, func(e replayEntry, off uint64) int { return cmp.Compare(e.off, off) })
}

// insert stores a copy of m in the channel key of s (ch, or the shard's
// entry when ch is nil, created if missing). False means that ch was
// removed meanwhile.
func (c *ReplayCache) insert(s *replayShard, key ReplayKey, ch *replayChannel, m *corralv1.Message, now int64) bool {
	if ch == nil {
		s.mu.Lock()
		if ch = s.m[key]; ch == nil {
			ch = &replayChannel{key: key}
			s.m[key] = ch
			c.channels.Add(1)
			c.account(ch, int64(replayChanOverhead+len(key.Tenant)+len(key.Channel)))
		}
		s.mu.Unlock()
	}
	ch.mu.Lock()
	defer ch.mu.Unlock()
	if ch.dead {
		return false
	}
	c.expire(ch, now)
	if ch.skip(m.Epoch, m.Offset) {
		return true
	}
	if m.Epoch != ch.epoch {
		c.drop(ch, len(ch.msgs), nil)
		if ch.epoch != "" {
			ch.dropped = ch.epoch
		}
		c.account(ch, int64(len(m.Epoch)-len(ch.epoch)))
		ch.epoch, ch.floor, ch.runStart = m.Epoch, 0, 0
	}
	e := replayEntry{off: m.Offset, stamp: now, msg: &corralv1.Message{
		Channel: ch.key.Channel, Epoch: ch.epoch, Offset: m.Offset, Priority: m.Priority,
		Data: append([]byte(nil), m.Data...), TimeUnixMs: m.TimeUnixMs,
	}}
	if n := len(ch.msgs); n == 0 || e.off > ch.msgs[n-1].off {
		if n > 0 {
			e.stamp = max(e.stamp, ch.msgs[n-1].stamp)
		}
		if n == 0 || e.off != ch.msgs[n-1].off+1 {
			ch.runStart = e.off // a hole below: a new run
		}
		ch.msgs = append(ch.msgs, e)
	} else {
		// Below the newest (a catch-up arriving after live messages):
		// it takes its successor's stamp, so stamps stay in order.
		i, _ := ch.find(e.off)
		e.stamp = min(e.stamp, ch.msgs[i].stamp)
		if i > 0 {
			e.stamp = max(e.stamp, ch.msgs[i-1].stamp)
		}
		ch.msgs = slices.Insert(ch.msgs, i, e)
		if e.off+1 == ch.runStart {
			j := i
			for j > 0 && ch.msgs[j-1].off+1 == ch.msgs[j].off {
				j--
			}
			ch.runStart = ch.msgs[j].off
		}
	}
	c.messages.Add(1)
	c.account(ch, replaySize(e.msg))
	return true
}

// replaySize is the accounted size of a cached message: the capacity of
// its payload (the allocator's size class) plus the fixed overhead.
func replaySize(m *corralv1.Message) int64 { return int64(cap(m.Data) + replayMsgOverhead) }

func (c *ReplayCache) account(ch *replayChannel, d int64) {
	ch.bytes.Add(d)
	c.bytes.Add(d)
}

// drop removes the first n messages of ch, counting them in counted (when
// not nil); their offsets stay below the floor. The caller holds ch.mu.
func (c *ReplayCache) drop(ch *replayChannel, n int, counted *atomic.Int64) {
	if n == 0 {
		return
	}
	var b int64
	for _, e := range ch.msgs[:n] {
		b += replaySize(e.msg)
	}
	ch.floor = max(ch.floor, ch.msgs[n-1].off)
	clear(ch.msgs[:n])
	if n == len(ch.msgs) {
		ch.msgs = nil
	} else {
		ch.msgs = ch.msgs[n:]
		ch.runStart = max(ch.runStart, ch.msgs[0].off)
	}
	c.messages.Add(-int64(n))
	c.account(ch, -b)
	if counted != nil {
		counted.Add(int64(n))
	}
}

// expire drops the messages of ch taken a window or more before now. The
// caller holds ch.mu.
func (c *ReplayCache) expire(ch *replayChannel, now int64) {
	cut := now - c.window
	n, _ := slices.BinarySearchFunc(ch.msgs, cut, func(e replayEntry, cut int64) int {
		if e.stamp <= cut {
			return -1
		}
		return 1
	})
	c.drop(ch, n, &c.expired)
}

// remove takes ch out of s when it holds no message. The caller holds s.mu
// and ch.mu (write locks).
func (c *ReplayCache) remove(s *replayShard, ch *replayChannel) {
	if len(ch.msgs) > 0 || ch.dead {
		return
	}
	ch.dead = true
	delete(s.m, ch.key)
	c.channels.Add(-1)
	c.account(ch, -ch.bytes.Load())
}

// maybeSweep drops expired messages and empty channels everywhere once per
// quarter of the window; the caller that wins the turn pays for it.
func (c *ReplayCache) maybeSweep(now int64) {
	next := c.nextSweep.Load()
	if now < next || !c.nextSweep.CompareAndSwap(next, now+max(c.window/4, 1)) {
		return
	}
	for i := range c.shards {
		s := &c.shards[i]
		s.mu.Lock()
		for _, ch := range s.m {
			ch.mu.Lock()
			c.expire(ch, now)
			c.remove(s, ch)
			ch.mu.Unlock()
		}
		s.mu.Unlock()
	}
}

// evict brings the accounted bytes down to 7/8 of max_bytes (so that one
// scan of the channels pays for an eighth of the bound) by lowering the
// largest channels to a common level: the oldest messages of the channels
// above the level go, the channels below it keep all of theirs. A noisy
// channel (or tenant) thus cannot evict the others' coverage.
func (c *ReplayCache) evict() {
	c.evictMu.Lock()
	defer c.evictMu.Unlock()
	for pass := 0; pass < 8 && c.bytes.Load() > c.cfg.MaxBytes; pass++ {
		list := c.evictBuf[:0]
		var total int64
		for i := range c.shards {
			s := &c.shards[i]
			s.mu.RLock()
			for _, ch := range s.m {
				b := ch.bytes.Load()
				list = append(list, replaySized{s: s, ch: ch, bytes: b})
				total += b
			}
			s.mu.RUnlock()
		}
		if len(list) == 0 {
			break
		}
		slices.SortFunc(list, func(a, b replaySized) int { return cmp.Compare(b.bytes, a.bytes) })
		level := replayLevel(list, total, c.cfg.MaxBytes-c.cfg.MaxBytes/8)
		for _, e := range list {
			if e.bytes <= level {
				break
			}
			c.trim(e.s, e.ch, level)
		}
		clear(list)
		c.evictBuf = list[:0]
	}
}

// replayLevel returns the level T for sizes in descending order (their sum
// total) such that cutting every size above T down to T brings the sum to
// at most target.
func replayLevel(sizes []replaySized, total, target int64) int64 {
	if total <= target {
		return sizes[0].bytes
	}
	rest := total
	for k := 1; k <= len(sizes); k++ {
		rest -= sizes[k-1].bytes
		t := (target - rest) / int64(k)
		if k == len(sizes) || t >= sizes[k].bytes {
			return max(t, 0)
		}
	}
	return 0
}

// trim drops the oldest messages of ch until its bytes are at most level,
// and removes it when it is left empty.
func (c *ReplayCache) trim(s *replayShard, ch *replayChannel, level int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ch.mu.Lock()
	defer ch.mu.Unlock()
	if ch.dead {
		return
	}
	over := ch.bytes.Load() - level
	n := 0
	for n < len(ch.msgs) && over > 0 {
		over -= replaySize(ch.msgs[n].msg)
		n++
	}
	c.drop(ch, n, &c.evictions)
	c.remove(s, ch)
}

// Lookup reports whether the cache covers a resume of tenant's channel
// from position from: its epoch is the cache's and the cache holds every
// offset from.Offset+1 .. L, L its newest. Then the answer is a ReplayHit
// with the messages from.Offset+1 .. L and Last = {epoch, L}; else a
// ReplayMiss. Lookup only reads: it counts nothing and coalesces nothing
// (Resume is what a session calls).
func (c *ReplayCache) Lookup(tenant, channel string, from *corralv1.Position) ReplayAnswer {
	if from == nil || c.cfg.Disabled {
		return ReplayAnswer{}
	}
	return c.lookup(ReplayKey{Tenant: tenant, Channel: channel}, from, c.now().UnixNano())
}

func (c *ReplayCache) lookup(key ReplayKey, from *corralv1.Position, now int64) ReplayAnswer {
	s := c.shard(key)
	s.mu.RLock()
	ch := s.m[key]
	s.mu.RUnlock()
	if ch == nil {
		return ReplayAnswer{}
	}
	ch.mu.RLock()
	defer ch.mu.RUnlock()
	n := len(ch.msgs)
	if ch.dead || n == 0 || from.GetEpoch() != ch.epoch {
		return ReplayAnswer{}
	}
	x, last := from.GetOffset(), ch.msgs[n-1].off
	if x > last || x+1 < ch.runStart {
		return ReplayAnswer{}
	}
	// The run is contiguous, so X+1 sits at a known index; stamps are in
	// order, so it and everything after it are live if it is (for X = L,
	// the newest must be live: an edge that saw nothing for a window
	// knows nothing of the channel).
	i := n - 1 - int(last-x) + 1
	if ch.msgs[min(i, n-1)].stamp <= now-c.window {
		return ReplayAnswer{}
	}
	msgs := make([]*corralv1.Message, n-i)
	for j := range msgs {
		msgs[j] = ch.msgs[i+j].msg
	}
	return ReplayAnswer{Kind: ReplayHit, Messages: msgs, Last: &corralv1.Position{Epoch: ch.epoch, Offset: last}}
}

// Resume decides how a session serves a resume of tenant's channel from
// position from (a Subscribe.from, in Hello or alone), after the upstream
// Welcome made the tenant known. It never blocks. The answer is
//
//   - ReplayHit when the cache covers it (see Lookup);
//   - else ReplayWait when an identical resume (same tenant, channel,
//     epoch and offset) is on its way upstream: call Answer on the Wait;
//   - else ReplayLead: this session goes upstream for everybody and must
//     release the Ticket.
//
// A nil from (no resume) or a disabled cache answers ReplayMiss, counted
// nowhere. Resume sweeps expired messages when a sweep is due.
func (c *ReplayCache) Resume(tenant, channel string, from *corralv1.Position) ReplayAnswer {
	if from == nil || c.cfg.Disabled {
		return ReplayAnswer{}
	}
	key := ReplayKey{Tenant: tenant, Channel: channel}
	now := c.now().UnixNano()
	c.maybeSweep(now)
	if a := c.lookup(key, from, now); a.Kind == ReplayHit {
		c.hits.Add(1)
		return a
	}
	lk := replayLeadKey{key: key, epoch: from.GetEpoch(), offset: from.GetOffset()}
	c.leadMu.Lock()
	defer c.leadMu.Unlock()
	if t := c.leads[lk]; t != nil {
		return ReplayAnswer{Kind: ReplayWait, Wait: &ReplayWaiter{c: c, lead: t}}
	}
	t := &ReplayTicket{c: c, k: lk, done: make(chan struct{})}
	c.leads[lk] = t
	t.timer = time.AfterFunc(c.cfg.CoalesceTimeout, func() { t.finish(false, nil) })
	c.misses.Add(1)
	return ReplayAnswer{Kind: ReplayLead, Ticket: t}
}

// ResumeWait is Resume followed, for a ReplayWait, by Wait.Answer(ctx): it
// answers ReplayHit, ReplayLead or ReplayMiss, and may block up to the
// coalescing timeout. Never call it on the goroutine that delivers
// upstream frames: the leader's Done comes from there.
func (c *ReplayCache) ResumeWait(ctx context.Context, tenant, channel string, from *corralv1.Position) ReplayAnswer {
	a := c.Resume(tenant, channel, from)
	if a.Kind == ReplayWait {
		return a.Wait.Answer(ctx)
	}
	return a
}

// ReplayTicket is a leader's obligation: the session that got it sends
// its resume upstream for every identical resume that waits, and must
// release it exactly once, with Done when its catch-up is complete or
// Fail on every other path that ends the subscription (an upstream Error,
// Unsubscribe, the session's close). Keep the ticket in the subscription's
// state and call Fail in its teardown: Fail after Done, and Done or Fail
// after the first release, do nothing, and so does a nil ticket. A ticket
// never released fails by itself after the coalescing timeout, so a
// forgotten ticket delays waiters, never strands them.
type ReplayTicket struct {
	c     *ReplayCache
	k     replayLeadKey
	done  chan struct{} // closed once released; then ok and pos are set
	timer *time.Timer
	ended bool // under c.leadMu
	ok    bool
	pos   *corralv1.Position
}

// Done releases the ticket: the leader's catch-up is complete, its
// deliveries reached pos (the upstream Subscribed.position) and went
// through Add. The waiters are answered from the cache. Call it also when
// the Subscribed arrives with a position the catch-up has reached already
// (nothing to deliver), or in another epoch (the waiters then go
// upstream).
func (t *ReplayTicket) Done(pos *corralv1.Position) {
	if t == nil {
		return
	}
	t.finish(true, &corralv1.Position{Epoch: pos.GetEpoch(), Offset: pos.GetOffset()})
}

// Fail releases the ticket without a catch-up: every waiter goes upstream
// itself.
func (t *ReplayTicket) Fail() {
	if t != nil {
		t.finish(false, nil)
	}
}

func (t *ReplayTicket) finish(ok bool, pos *corralv1.Position) {
	c := t.c
	c.leadMu.Lock()
	if t.ended {
		c.leadMu.Unlock()
		return
	}
	t.ended, t.ok, t.pos = true, ok, pos
	if c.leads[t.k] == t {
		delete(c.leads, t.k)
	}
	c.leadMu.Unlock()
	t.timer.Stop()
	close(t.done)
}

// ReplayWaiter is a waiter's handle on an identical resume on its way
// upstream. Nothing needs releasing: a waiter that gives up just stops
// waiting.
type ReplayWaiter struct {
	c    *ReplayCache
	lead *ReplayTicket
	once sync.Once
	ans  ReplayAnswer
}

// Ready is closed when the leader released its ticket (or its timeout
// passed); Answer then returns at once. For callers that cannot block.
func (w *ReplayWaiter) Ready() <-chan struct{} { return w.lead.done }

// Answer waits until the leader is done or ctx ends, then answers
// ReplayHit (Coalesced set) when the cache now covers the resume (whatever
// became of the leader), or when the leader found nothing to catch up (its
// Subscribed.position is the resume's position); else ReplayMiss: go
// upstream unchanged. It blocks at
// most until the coalescing timeout after the leader started; later calls
// return the first answer.
func (w *ReplayWaiter) Answer(ctx context.Context) ReplayAnswer {
	w.once.Do(func() {
		c, t := w.c, w.lead
		select {
		case <-t.done:
		case <-ctx.Done():
			c.misses.Add(1)
			return
		}
		from := &corralv1.Position{Epoch: t.k.epoch, Offset: t.k.offset}
		if a := c.lookup(t.k.key, from, c.now().UnixNano()); a.Kind == ReplayHit {
			a.Coalesced = true
			c.coalesced.Add(1)
			w.ans = a
			return
		}
		if t.ok && t.pos.Epoch == from.Epoch && t.pos.Offset == from.Offset {
			c.coalesced.Add(1)
			w.ans = ReplayAnswer{Kind: ReplayHit, Last: from, Coalesced: true}
			return
		}
		c.misses.Add(1)
	})
	return w.ans
}

// Stats returns the cache's gauges and counters.
func (c *ReplayCache) Stats() ReplayStats {
	c.leadMu.Lock()
	leads := len(c.leads)
	c.leadMu.Unlock()
	return ReplayStats{
		Bytes: c.bytes.Load(), Messages: c.messages.Load(), Channels: c.channels.Load(), Leads: int64(leads),
		Hits: c.hits.Load(), Misses: c.misses.Load(), Coalesced: c.coalesced.Load(),
		Evictions: c.evictions.Load(), Expired: c.expired.Load(),
	}
}

// Describe implements prometheus.Collector.
func (c *ReplayCache) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.descBytes, c.descMax, c.descMessages, c.descChans, c.descLeads,
		c.descHits, c.descMisses, c.descCoal, c.descEvict, c.descExpired} {
		ch <- d
	}
}

// Collect implements prometheus.Collector: it sweeps expired messages when
// a sweep is due, so the gauges of an idle cache fall too.
func (c *ReplayCache) Collect(ch chan<- prometheus.Metric) {
	c.maybeSweep(c.now().UnixNano())
	s := c.Stats()
	g, k := prometheus.GaugeValue, prometheus.CounterValue
	for _, m := range []struct {
		d *prometheus.Desc
		t prometheus.ValueType
		v int64
	}{
		{c.descBytes, g, s.Bytes}, {c.descMax, g, c.cfg.MaxBytes}, {c.descMessages, g, s.Messages},
		{c.descChans, g, s.Channels}, {c.descLeads, g, s.Leads},
		{c.descHits, k, s.Hits}, {c.descMisses, k, s.Misses}, {c.descCoal, k, s.Coalesced},
		{c.descEvict, k, s.Evictions}, {c.descExpired, k, s.Expired},
	} {
		ch <- prometheus.MustNewConstMetric(m.d, m.t, float64(m.v))
	}
}
