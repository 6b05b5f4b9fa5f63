package authdns

import (
	"cmp"
	"context"
	"encoding/binary"
	"math"
	"math/bits"
	"math/rand/v2"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/corralhq/corral/authdns/answer"
)

// Defaults of resolver-aware answers.
const (
	// DefaultResolverWindow is the window over which resolvers' query
	// rates are measured: a TTL's worth of queries at the default TTL.
	DefaultResolverWindow = answer.DefaultClassWindow
	// DefaultResolverTable is the number of resolvers each table tracks
	// (one table per UDP socket and one for TCP; 16 bytes a slot).
	DefaultResolverTable = 4096
	// DefaultResolverIPv4Prefix and DefaultResolverIPv6Prefix are the
	// prefixes a resolver is known by: a resolver farm shares its /24 or
	// /48.
	DefaultResolverIPv4Prefix = 24
	DefaultResolverIPv6Prefix = 48
)

// ResolversConfig is resolver-aware answers: authdns measures each
// resolver's share of the queries and answers the resolvers that send a
// large share (which speak for many clients) with more records. The zero
// value is off.
type ResolversConfig struct {
	// Enabled turns it on (off by default).
	Enabled bool `yaml:"enabled"`
	// Window is how long a query counts toward its resolver's share
	// (default 60s; a sliding window). Classes change every window/8.
	Window time.Duration `yaml:"window"`
	// BigShare: a resolver sending more than this share of the queries
	// is big (default 0.01; 0 < big_share < 1).
	BigShare float64 `yaml:"big_share"`
	// TableSize is the resolvers each table tracks, a fixed size (default
	// 4096, rounded up to a multiple of 8; at least 8/big_share so that
	// every resolver that can be big fits with room).
	TableSize int `yaml:"table_size"`
	// IPv4Prefix and IPv6Prefix are the prefixes that make one resolver
	// (default 24 and 48): a source address, or the client subnet of a
	// query that carries one, cut to this length.
	IPv4Prefix int `yaml:"ipv4_prefix"`
	IPv6Prefix int `yaml:"ipv6_prefix"`
	// Audience also learns each resolver's audience from the sessions
	// the origins report opening (answer.AudienceConfig.Learn, on the
	// load reports of feedback, which it needs) and classes big a
	// resolver above BigShare of them: a resolver with one cache asks
	// once a TTL whatever stands behind it, so its queries do not show
	// a CDN's PoP, and where its answers send sessions does. Answers to
	// big resolvers then leave one healthy record out
	// (answer.Config.BigLeaveOut), which the learning needs. Off by
	// default.
	Audience bool `yaml:"audience"`
	// HalfLife is the audience estimates' half-life (default 60s,
	// answer.DefaultAudienceHalfLife).
	HalfLife time.Duration `yaml:"half_life"`
}

// withDefaults returns c with its zero fields set to the defaults.
func (c ResolversConfig) withDefaults() ResolversConfig {
	c.Window = cmp.Or(c.Window, DefaultResolverWindow)
	c.BigShare = cmp.Or(c.BigShare, answer.DefaultBigShare)
	c.TableSize = cmp.Or(c.TableSize, DefaultResolverTable)
	c.IPv4Prefix = cmp.Or(c.IPv4Prefix, DefaultResolverIPv4Prefix)
	c.IPv6Prefix = cmp.Or(c.IPv6Prefix, DefaultResolverIPv6Prefix)
	c.HalfLife = cmp.Or(c.HalfLife, answer.DefaultAudienceHalfLife)
	return c
}

// learns reports whether resolver-aware answers learn audiences.
func (c ResolversConfig) learns() bool { return c.Enabled && c.Audience }

// Bounds of the resolvers block.
const (
	minResolverTable = 64
	maxResolverTable = 1 << 20
	// maxResolverIPv6Prefix is the longest IPv6 prefix a key holds.
	maxResolverIPv6Prefix = 56
)

func (c ResolversConfig) validate(bad func(path, format string, args ...any)) {
	d := c.withDefaults()
	if c.Window < 0 || (c.Window > 0 && c.Window < 8*time.Millisecond) {
		bad("resolvers.window", "must be at least 8ms (0: the default %v), got %v", DefaultResolverWindow, c.Window)
	}
	if err := (answer.ClassConfig{BigShare: c.BigShare}).Validate(); err != nil {
		bad("resolvers.big_share", "must be above 0 and below 1, got %v", c.BigShare)
	} else if c.TableSize >= 0 && float64(d.TableSize)*d.BigShare < 8 {
		bad("resolvers.table_size", "must be at least 8/big_share = %d (room for every resolver that can be big), got %d", int(math.Ceil(8/d.BigShare)), d.TableSize)
	}
	if c.TableSize < 0 || (c.TableSize > 0 && c.TableSize < minResolverTable) || c.TableSize > maxResolverTable {
		bad("resolvers.table_size", "must be %d to %d (0: the default %d), got %d", minResolverTable, maxResolverTable, DefaultResolverTable, c.TableSize)
	}
	if c.IPv4Prefix < 0 || c.IPv4Prefix > 32 {
		bad("resolvers.ipv4_prefix", "must be 1 to 32 (0: the default %d), got %d", DefaultResolverIPv4Prefix, c.IPv4Prefix)
	}
	if c.HalfLife < 0 {
		bad("resolvers.half_life", "must not be negative (0: the default %v), got %v", answer.DefaultAudienceHalfLife, c.HalfLife)
	}
	if c.Audience && !c.Enabled {
		bad("resolvers.audience", "needs resolvers.enabled: true")
	}
	if c.IPv6Prefix < 0 || c.IPv6Prefix > maxResolverIPv6Prefix {
		bad("resolvers.ipv6_prefix", "must be 1 to %d (0: the default %d), got %d", maxResolverIPv6Prefix, DefaultResolverIPv6Prefix, c.IPv6Prefix)
	}
}

// Resolver keys. A resolver is a prefix, packed into a uint64 that is
// never 0 (0 is an empty slot): bit 63 set for IPv6, bit 62 always, the
// prefix length in bits 56-61 and the prefix's first 56 bits (IPv6) or 32
// bits (IPv4) below.
const (
	keyPresent = 1 << 62
	keyIPv6    = 1 << 63
	keyAddr    = 1<<56 - 1
)

// resolverKey returns the key of a query's resolver: its client subnet cut
// to the configured prefix when the query carries one (not a /0, which
// asks for no subnet), else its source address cut so; 0 for a query
// without an address. ecsBits is the length of the subnet's key, 0 when
// the key is the source's.
func (r *resolvers) key(client netip.Addr, subnet netip.Prefix) (key uint64, ecsBits int) {
	a := client
	ecs := subnet.Bits() > 0 // -1 when invalid
	if ecs {
		a = subnet.Addr()
	}
	if !a.IsValid() {
		return 0, 0
	}
	x := a.As16() // IPv4 as IPv4-mapped
	hi, lo := binary.BigEndian.Uint64(x[:8]), binary.BigEndian.Uint64(x[8:])
	v4 := hi == 0 && lo>>32 == 0xFFFF
	if !ecs { // the common case: masks made at start
		if v4 {
			return r.key4 | lo&r.mask4, 0
		}
		return r.key6 | hi>>8&r.mask6, 0
	}
	if v4 {
		b := min(r.cfg.IPv4Prefix, subnet.Bits())
		return keyPresent | uint64(b)<<56 | lo&(0xFFFFFFFF<<(32-b))&0xFFFFFFFF, b
	}
	b := min(r.cfg.IPv6Prefix, subnet.Bits())
	return keyIPv6 | keyPresent | uint64(b)<<56 | hi>>8&(keyAddr<<(56-b))&keyAddr, b
}

// keyPrefix returns the prefix a key stands for.
func keyPrefix(key uint64) netip.Prefix {
	b := int(key >> 56 & 63)
	if key&keyIPv6 == 0 {
		var x [4]byte
		binary.BigEndian.PutUint32(x[:], uint32(key))
		return netip.PrefixFrom(netip.AddrFrom4(x), b)
	}
	var x [16]byte
	binary.BigEndian.PutUint64(x[:], (key&keyAddr)<<8)
	return netip.PrefixFrom(netip.AddrFrom16(x), b)
}

// Counts of a slot and of a table's total, packed in one uint64: the
// epoch (the window's number, its low 16 bits) in the top 16 bits, then
// the counts of the previous and of the current window, 24 bits each
// (saturating at 2^24-1, 16.7 million queries per table per window).
const (
	countBits = 24
	countMax  = 1<<countBits - 1
	// phases is the resolution of the sliding window: the estimate is
	// the current window's count plus the previous window's, weighted
	// by the part of it still inside the sliding window, in eighths
	// (answer.WindowQueries, which the simulator counts by too).
	phases = answer.WindowPhases
)

// counts unpacks v as of epoch: the previous and current window's counts
// (0 for windows that have passed).
func counts(v, epoch uint64) (prev, cur uint64) {
	switch v >> 48 {
	case epoch & 0xFFFF:
		return v >> countBits & countMax, v & countMax
	case (epoch - 1) & 0xFFFF:
		return v & countMax, 0
	}
	return 0, 0
}

func packCounts(epoch, prev, cur uint64) uint64 {
	return (epoch&0xFFFF)<<48 | min(prev, countMax)<<countBits | min(cur, countMax)
}

// bump returns v with one more query in the current window of epoch.
func bump(v, epoch uint64) uint64 {
	if v>>48 == epoch&0xFFFF && v&countMax < countMax {
		return v + 1 // the common case: inlined
	}
	return bumpWindow(v, epoch)
}

// bumpWindow is bump when the window moved or the count is full.
//
//go:noinline
func bumpWindow(v, epoch uint64) uint64 {
	prev, cur := counts(v, epoch)
	return packCounts(epoch, prev, cur+1)
}

// estimate is the queries of counts v in the sliding window that ends at
// phase (in eighths) of the current window, epoch.
func estimate(v, epoch, phase uint64) uint64 {
	prev, cur := counts(v, epoch)
	return answer.WindowQueries(prev, cur, phase)
}

// ways is the number of slots of a bucket of a resolver table.
const ways = 8

// resolverTable counts the queries of resolvers in a fixed number of
// slots, a set-associative table: a resolver's key hashes to a bucket of
// 8 slots, and a resolver not in its bucket takes the slot of the least
// queries, inheriting that count plus one (Space-Saving, Metwally,
// Agrawal and El Abbadi 2005, per bucket). So a spray of new sources only
// ever replaces slots of few queries, a resolver with more than an eighth
// of its bucket's queries is never lost, and within a window no count is
// below the truth; the overestimate is at most the least count of the
// bucket (a bucket gets 1/buckets of the queries on average: the hash is
// seeded at random, so no source can aim at a bucket). The table never
// grows. A table has one writer (its UDP socket's goroutine) or a mutex
// (TCP's, shared by the connections); the step reads it concurrently,
// slot by slot, with atomic loads.
type resolverTable struct {
	mu      *sync.Mutex // nil for a table with one writer
	seed    uint64
	buckets uint64
	slots   []resolverSlot
	total   atomic.Uint64 // counts of every query counted in the table
}

type resolverSlot struct {
	key atomic.Uint64 // 0: empty
	n   atomic.Uint64 // packed counts
}

func newResolverTable(size int, mu *sync.Mutex) *resolverTable {
	nb := (size + ways - 1) / ways
	return &resolverTable{mu: mu, seed: rand.Uint64() | 1, buckets: uint64(nb), slots: make([]resolverSlot, nb*ways)}
}

// count counts one query of key at clock (epoch<<8 | phase).
func (t *resolverTable) count(key, clock uint64) {
	if t.mu != nil {
		t.mu.Lock()
		t.countOne(key, clock)
		t.mu.Unlock()
		return
	}
	t.countOne(key, clock)
}

// countOne is count for the table's writer.
func (t *resolverTable) countOne(key, clock uint64) {
	epoch, phase := clock>>8, clock&0xFF
	t.total.Store(bump(t.total.Load(), epoch))
	h := (key ^ t.seed) * 0x9E3779B97F4A7C15
	h ^= h >> 31
	b, _ := bits.Mul64(h, t.buckets)
	bucket := t.slots[b*ways : b*ways+ways : b*ways+ways]
	for i := range bucket {
		if bucket[i].key.Load() == key {
			bucket[i].n.Store(bump(bucket[i].n.Load(), epoch))
			return
		}
	}
	victim, least := 0, uint64(math.MaxUint64)
	for i := range bucket {
		e := uint64(0)
		if bucket[i].key.Load() != 0 {
			e = estimate(bucket[i].n.Load(), epoch, phase)
		}
		if e < least {
			victim, least = i, e
		}
	}
	bucket[victim].key.Store(key)
	bucket[victim].n.Store(packCounts(epoch, 0, least+1))
}

// classSet is the big resolvers of the last step, an open-addressing set
// of keys; the zero value holds none. It is immutable.
type classSet struct {
	keys []uint64 // a power of two long, at most half full; 0 empty
}

func newClassSet(big []uint64) *classSet {
	if len(big) == 0 {
		return &classSet{}
	}
	n := 8
	for n < 2*len(big) {
		n *= 2
	}
	c := &classSet{keys: make([]uint64, n)}
	for _, k := range big {
		for i := classHash(k) & uint64(n-1); ; i = (i + 1) & uint64(n-1) {
			if c.keys[i] == 0 {
				c.keys[i] = k
				break
			}
		}
	}
	return c
}

func classHash(k uint64) uint64 { return (k * 0x9E3779B97F4A7C15) >> 32 }

// has reports whether key is a big resolver.
func (c *classSet) has(key uint64) bool {
	n := uint64(len(c.keys))
	if n == 0 {
		return false
	}
	for i := classHash(key) & (n - 1); ; i = (i + 1) & (n - 1) {
		switch c.keys[i] {
		case key:
			return true
		case 0:
			return false
		}
	}
}

// resolvers measures the resolvers' query rates and classes them. The
// query path counts each query in its worker's table (count) and reads
// the class the last step decided (class); the step (tick), every
// window/8, moves the sliding window and classes the resolvers by their
// share of the queries of every table (answer.ClassConfig.Of). It is safe
// for concurrent use. Lock order: mu before a table's mu.
type resolvers struct {
	cfg  ResolversConfig // with defaults
	rule answer.ClassConfig
	// key4 and mask4, key6 and mask6 make the key of a source address
	// (key): the prefix length's bits and the mask of the address's.
	key4, mask4, key6, mask6 uint64
	start                    time.Time
	clock                    atomic.Uint64 // epoch<<8 | phase of the last step; epoch 1 is the first window
	big                      atomic.Pointer[classSet]
	view                     atomic.Pointer[resolverView]
	aud                      *audience // nil without resolvers.audience

	mu     sync.Mutex // guards tables
	tables []*resolverTable
	tcp    *resolverTable // shared by the TCP connections
	tcpMu  sync.Mutex     // the TCP table's
}

// resolverView is what the last step found, for metrics.
type resolverView struct {
	at       time.Time
	entries  int // slots in use, over every table
	tracked  int // distinct resolvers with queries in the window
	big      []bigResolver
	total    uint64
	tables   int
	bigShare float64
}

// bigResolver is a resolver classed big, with its share of the queries.
type bigResolver struct {
	prefix netip.Prefix
	share  float64
}

func newResolvers(cfg ResolversConfig, now time.Time) *resolvers {
	r := &resolvers{cfg: cfg.withDefaults(), start: now}
	r.rule = answer.ClassConfig{BigShare: r.cfg.BigShare}.WithDefaults()
	r.key4, r.mask4 = keyPresent|uint64(r.cfg.IPv4Prefix)<<56, 0xFFFFFFFF<<(32-r.cfg.IPv4Prefix)&0xFFFFFFFF
	r.key6, r.mask6 = keyIPv6|keyPresent|uint64(r.cfg.IPv6Prefix)<<56, keyAddr<<(56-r.cfg.IPv6Prefix)&keyAddr
	r.big.Store(&classSet{})
	r.tcp = r.newTable(&r.tcpMu)
	r.tick(now)
	return r
}

// newTable adds a table to the step's; mu is nil for one writer.
func (r *resolvers) newTable(mu *sync.Mutex) *resolverTable {
	t := newResolverTable(r.cfg.TableSize, mu)
	r.mu.Lock()
	r.tables = append(r.tables, t)
	r.mu.Unlock()
	return t
}

// class counts one query of the resolver of client (or of its client
// subnet) in t and returns its class, the length of the subnet the class
// was keyed by (0: the source address) and its key (0: none). A resolver
// is big by its share of the queries or, with resolvers.audience, of the
// sessions its answers send (audience.go).
func (r *resolvers) class(t *resolverTable, client netip.Addr, subnet netip.Prefix) (answer.Class, int, uint64) {
	key, ecsBits := r.key(client, subnet)
	if key == 0 {
		return answer.ClassSmall, 0, 0
	}
	t.count(key, r.clock.Load())
	if r.big.Load().has(key) || (r.aud != nil && r.aud.big.Load().has(key)) {
		return answer.ClassBig, ecsBits, key
	}
	return answer.ClassSmall, ecsBits, key
}

// run steps every window/8 until ctx ends.
func (r *resolvers) run(ctx context.Context, now func() time.Time) {
	t := time.NewTicker(r.cfg.Window / phases)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			r.tick(now())
		}
	}
}

// tick moves the sliding window to now and classes every resolver of
// every table by its share of the queries.
func (r *resolvers) tick(now time.Time) {
	epoch, phase := answer.WindowAt(now.Sub(r.start), r.cfg.Window)
	r.clock.Store(epoch<<8 | phase)
	r.mu.Lock()
	tables := slices.Clone(r.tables)
	r.mu.Unlock()
	v := &resolverView{at: now, tables: len(tables), bigShare: r.rule.BigShare}
	sums := make(map[uint64]uint64)
	for _, t := range tables {
		v.total += estimate(t.total.Load(), epoch, phase)
		for i := range t.slots {
			k := t.slots[i].key.Load()
			if k == 0 {
				continue
			}
			v.entries++
			if e := estimate(t.slots[i].n.Load(), epoch, phase); e > 0 {
				sums[k] += e
			}
		}
	}
	v.tracked = len(sums)
	var big []uint64
	for k, n := range sums {
		if r.rule.Of(float64(n), float64(v.total)) == answer.ClassBig {
			big = append(big, k)
			v.big = append(v.big, bigResolver{prefix: keyPrefix(k), share: float64(n) / float64(v.total)})
		}
	}
	slices.SortFunc(v.big, func(a, b bigResolver) int {
		if a.share != b.share {
			if a.share > b.share {
				return -1
			}
			return 1
		}
		return a.prefix.Addr().Compare(b.prefix.Addr())
	})
	r.big.Store(newClassSet(big))
	r.view.Store(v)
}

// fastSelect indexes byClass with c&1: there are two classes.
const _ = uint(answer.NumClasses-2) + uint(2-answer.NumClasses)

// classCounts are a worker's counts of one class not yet in its stats.
type classCounts struct{ queries, answers, records uint64 }

// classOf returns the class of the resolver of the query the general
// path answers from set, counting the query once (at its first set), and
// widens the answer's client subnet scope to the subnet the class was
// keyed by when set's answer depends on it: the answer then holds for
// that subnet only (RFC 7871 7.2.1), and the resolver caches it so.
func (w *worker) classOf(set *rrset, aq answer.Query) answer.Class {
	if !w.classed {
		w.class, w.ecsBits, w.resKey = w.srv.res.class(w.tab, aq.Client, aq.Subnet)
		w.classed = true
		w.byClass[w.class].queries++
	}
	if w.ecsBits > 0 && set.sel.ByClass() {
		w.scope = max(w.scope, uint8(w.ecsBits))
	}
	return w.class
}

// fastSelect selects the records of set for a query of the fast path
// (which has no client subnet) from client, by the class of its
// resolver, and counts the query and the answer. Apart from fast, whose
// frame would grow for a feature that is off by default.
//
//go:noinline
func (w *worker) fastSelect(set *rrset, client netip.Addr) ([]int, answer.Result) {
	c, _, key := w.srv.res.class(w.tab, client, netip.Prefix{})
	w.byClass[c&1].queries++ // &1: no bounds check
	idx, res := set.sel.Select(w.dst, answer.Query{Client: client, Class: c}, w.rng)
	if set.sel.ByClass() {
		w.countAnswer(c, len(idx))
	}
	w.noteSet = nil
	if set.learn {
		w.pendNote(set, key, idx)
	}
	return idx, res
}

// countAnswer counts an answer of n records of a set whose answer
// depends on the class c.
func (w *worker) countAnswer(c answer.Class, n int) {
	w.byClass[c].answers++
	w.byClass[c].records += uint64(n)
}

// flushClasses adds the worker's class counts to its stats.
func (w *worker) flushClasses() {
	for c := range w.byClass {
		b := &w.byClass[c]
		if b.queries|b.answers|b.records == 0 {
			continue
		}
		s := &w.st.byClass[c]
		s.queries.Add(b.queries)
		s.answers.Add(b.answers)
		s.records.Add(b.records)
		*b = classCounts{}
	}
}

// pendNote keeps the answer idx of set to the resolver of key, to be
// noted (commitNote) once the response goes out whole; the last set of a
// response that teaches is the one its clients connect to.
func (w *worker) pendNote(set *rrset, key uint64, idx []int) {
	w.noteSet, w.noteKey = set, key
	w.note = append(w.note[:0], idx...)
}

// commitNote notes the pending answer (audience.answered).
func (w *worker) commitNote() {
	w.srv.res.aud.answered(w.noteSet, w.noteKey, w.note, w.srv.now())
	w.noteSet = nil
}
