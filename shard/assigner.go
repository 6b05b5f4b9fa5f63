package shard

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/big"
	"slices"
	"sync"

	"github.com/corralhq/corral/shard/internal/u64set"
	"github.com/dchest/siphash"
)

// tweakAttempt separates the assigner's later candidates from its first.
const tweakAttempt = 0x6174_7465_6d70_745f // "attempt_"

// Limits of the assigner.
const (
	// DefaultMaxAttempts is the number of candidate hands tried per tenant
	// when AssignerConfig.MaxAttempts is 0.
	DefaultMaxAttempts = 1000
	// MaxSubsetsPerHand bounds C(k, t+1), the index entries of one hand.
	MaxSubsetsPerHand = 4096
	// MaxTenantID bounds the length of a tenant id in bytes.
	MaxTenantID = 1 << 16
	// maxPresize bounds AssignerConfig.ExpectedTenants' effect.
	maxPresize = 1 << 27
)

// Assigner assigns tenants stored hands of k out of n workers such that no
// two hands share more than t workers, the promise Route 53 makes for its
// name-server delegation sets. For every tenant it tries candidate hands
// dealt from the tenant id and the seed, and keeps the first one none of
// whose (t+1)-subsets is already used by a stored hand: two hands share
// more than t workers exactly when they share a (t+1)-subset, so the index
// of used subsets checks a candidate in C(k, t+1) look-ups instead of
// comparing it with every stored hand.
//
// No assignment can exceed the capacity bound C(n, t+1)/C(k, t+1), and
// Assign refuses to try. A greedy assignment stops finding room well
// before the bound when the deck fills up; Assign then fails after
// MaxAttempts candidates, naming the fill.
//
// An Assigner is safe for concurrent use. Build it with NewAssigner.
type Assigner struct {
	mu       sync.Mutex
	dealer   *Dealer
	cfg      AssignerConfig
	combos   [][]uint8 // positions of the (t+1)-subsets of a hand
	keyBits  uint
	capacity *big.Int
	capInt   int // capacity, saturated at MaxInt
	index    *u64set.Set
	byID     map[string]int32
	ids      []string
	hands    []int32 // k per tenant, in assignment order
	// Scratch buffers of assign, guarded by mu (a hand passed to the Store
	// interface escapes, so stack buffers would be heap-allocated per call).
	hbuf []int
	kbuf []uint64
}

// NewAssigner validates cfg, builds the assigner and loads the stored hands
// of cfg.Store, checking them.
func NewAssigner(cfg AssignerConfig) (*Assigner, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	capacity, _ := Capacity(cfg.Workers, cfg.HandSize, cfg.MaxOverlap)
	if cfg.MaxAttempts == 0 {
		cfg.MaxAttempts = DefaultMaxAttempts
	}
	keyBits := indexKeyBits(cfg.Workers)
	var secret [SecretSize]byte
	binary.LittleEndian.PutUint64(secret[0:], cfg.Seed)
	binary.LittleEndian.PutUint64(secret[8:], cfg.Seed^0x5eed_5eed_5eed_5eed)
	dealer, err := NewDealer(DealerConfig{Secret: secret[:], Workers: cfg.Workers, HandSize: cfg.HandSize})
	if err != nil {
		return nil, err
	}
	a := &Assigner{
		dealer:   dealer,
		cfg:      cfg,
		combos:   combinations(cfg.HandSize, cfg.MaxOverlap+1),
		keyBits:  keyBits,
		capacity: capacity,
		capInt:   math.MaxInt,
	}
	// Presize for the expected tenants, but never beyond the capacity or a
	// size a typo could make absurd.
	presize := min(cfg.ExpectedTenants, maxPresize)
	if capacity.IsInt64() && capacity.Int64() < math.MaxInt {
		a.capInt = int(capacity.Int64())
	}
	// Tenants are numbered with int32 inside the assigner.
	a.capInt = min(a.capInt, math.MaxInt32)
	presize = min(presize, a.capInt)
	a.byID = make(map[string]int32, presize)
	a.index = u64set.New(presize * len(a.combos))
	if cfg.Store != nil {
		if err := a.load(); err != nil {
			return nil, err
		}
	}
	return a, nil
}

// load replays the store into the index, checking every hand.
func (a *Assigner) load() error {
	want := StoreParams{Workers: a.cfg.Workers, HandSize: a.cfg.HandSize, MaxOverlap: a.cfg.MaxOverlap, Seed: a.cfg.Seed}
	var keys []uint64
	got, ok, err := a.cfg.Store.Load(func(id string, hand []int) error {
		if err := a.checkHand(id, hand); err != nil {
			return err
		}
		var fits bool
		keys, fits = a.subsetKeys(keys[:0], hand)
		if !fits {
			return fmt.Errorf("stored hand %v of tenant %q shares more than %d workers with an earlier hand", hand, id, a.cfg.MaxOverlap)
		}
		a.record(id, hand, keys)
		return nil
	})
	if err != nil {
		return err
	}
	if !ok {
		return a.cfg.Store.Init(want)
	}
	if got != want {
		return fmt.Errorf("shard: the store was built with %+v, not %+v", got, want)
	}
	return nil
}

// checkHand validates a loaded hand.
func (a *Assigner) checkHand(id string, hand []int) error {
	if _, dup := a.byID[id]; dup {
		return fmt.Errorf("tenant %q is stored twice", id)
	}
	if id == "" || len(id) > MaxTenantID {
		return fmt.Errorf("stored tenant id of %d bytes is empty or too long", len(id))
	}
	if len(hand) != a.cfg.HandSize {
		return fmt.Errorf("stored hand of tenant %q has %d workers, want %d", id, len(hand), a.cfg.HandSize)
	}
	for i, w := range hand {
		if w < 0 || w >= a.cfg.Workers || slices.Contains(hand[:i], w) {
			return fmt.Errorf("stored hand %v of tenant %q has a repeated or out-of-range worker", hand, id)
		}
	}
	if len(a.ids) >= a.capInt {
		return fmt.Errorf("the store holds more hands than the capacity bound %s", a.capacity)
	}
	return nil
}

// combinations lists the r-subsets of positions 0..k-1 in lexicographic
// order.
func combinations(k, r int) [][]uint8 {
	var out [][]uint8
	cur := make([]uint8, r)
	var rec func(start, depth int)
	rec = func(start, depth int) {
		if depth == r {
			out = append(out, slices.Clone(cur))
			return
		}
		for i := start; i <= k-(r-depth); i++ {
			cur[depth] = uint8(i)
			rec(i+1, depth+1)
		}
	}
	rec(0, 0)
	return out
}

// subsetKeys appends the index keys of hand's (t+1)-subsets to keys and
// reports whether none of them is in the index yet.
func (a *Assigner) subsetKeys(keys []uint64, hand []int) ([]uint64, bool) {
	var buf [MaxHand]int
	sorted := append(buf[:0], hand...)
	slices.Sort(sorted)
	free := true
	for _, combo := range a.combos {
		key := uint64(1) << 63
		for j, pos := range combo {
			key |= uint64(sorted[pos]) << (a.keyBits * uint(j))
		}
		if free && a.index.Has(key) {
			free = false
		}
		keys = append(keys, key)
	}
	return keys, free
}

// record adds an accepted hand.
func (a *Assigner) record(id string, hand []int, keys []uint64) {
	for _, key := range keys {
		a.index.Add(key)
	}
	a.byID[id] = int32(len(a.ids))
	a.ids = append(a.ids, id)
	for _, w := range hand {
		a.hands = append(a.hands, int32(w))
	}
}

// Assign returns the hand of id, assigning and storing one if id has none.
// It fails when id is empty or longer than MaxTenantID bytes, when the
// capacity bound is reached, when MaxAttempts candidates all overlap stored
// hands, or when the store fails.
func (a *Assigner) Assign(id string) ([]int, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	i, err := a.assign(id)
	if err != nil {
		return nil, err
	}
	return a.handAt(nil, i), nil
}

// assign gives id a hand if it has none and returns its position.
func (a *Assigner) assign(id string) (int, error) {
	if i, ok := a.byID[id]; ok {
		return int(i), nil
	}
	if id == "" {
		return 0, errors.New("shard: empty tenant id")
	}
	if len(id) > MaxTenantID {
		return 0, fmt.Errorf("shard: tenant id of %d bytes exceeds %d", len(id), MaxTenantID)
	}
	if len(a.ids) >= a.capInt {
		return 0, fmt.Errorf("shard: capacity bound reached: %s hands of %d out of %d workers can share at most %d workers pairwise", a.capacity, a.cfg.HandSize, a.cfg.Workers, a.cfg.MaxOverlap)
	}
	h0, h1 := siphash.Hash128(a.dealer.k0, a.dealer.k1, []byte(id))
	hi, lo := h0, h1
	for attempt := range a.cfg.MaxAttempts {
		if attempt > 0 {
			var buf [24]byte
			binary.LittleEndian.PutUint64(buf[0:], h0)
			binary.LittleEndian.PutUint64(buf[8:], h1)
			binary.LittleEndian.PutUint64(buf[16:], uint64(attempt))
			hi, lo = siphash.Hash128(a.dealer.k0^tweakAttempt, a.dealer.k1, buf[:])
		}
		hand := a.dealer.handOfSeed(a.hbuf[:0], hi, lo)
		keys, free := a.subsetKeys(a.kbuf[:0], hand)
		a.hbuf, a.kbuf = hand, keys
		if !free {
			continue
		}
		if a.cfg.Store != nil {
			if err := a.cfg.Store.Append(id, hand); err != nil {
				return 0, err
			}
		}
		a.record(id, hand, keys)
		return len(a.ids) - 1, nil
	}
	return 0, fmt.Errorf("shard: tenant %q: no hand sharing at most %d workers with the %d stored hands in %d attempts (capacity bound %s); the deck is too full for greedy assignment",
		id, a.cfg.MaxOverlap, len(a.ids), a.cfg.MaxAttempts, a.capacity)
}

// AssignAll assigns every id in order (ids that already have a hand keep
// it) and syncs the store. It first checks that the new ids fit under the
// capacity bound and fails without assigning anything if they do not.
func (a *Assigner) AssignAll(ids []string) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	fresh := 0
	seen := make(map[string]bool, len(ids))
	for _, id := range ids {
		if _, ok := a.byID[id]; !ok && !seen[id] {
			seen[id] = true
			fresh++
		}
	}
	if fresh > a.capInt-len(a.ids) {
		return fmt.Errorf("shard: %d new tenants plus %d stored exceed the capacity bound %s for hands of %d out of %d workers sharing at most %d",
			fresh, len(a.ids), a.capacity, a.cfg.HandSize, a.cfg.Workers, a.cfg.MaxOverlap)
	}
	a.hands = slices.Grow(a.hands, fresh*a.cfg.HandSize)
	for _, id := range ids {
		if _, err := a.assign(id); err != nil {
			return err
		}
	}
	if a.cfg.Store != nil {
		return a.cfg.Store.Sync()
	}
	return nil
}

// Hand appends the stored hand of id to dst[:0] and reports whether id has
// one.
func (a *Assigner) Hand(dst []int, id string) ([]int, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	i, ok := a.byID[id]
	if !ok {
		return dst[:0], false
	}
	return a.handAt(dst, int(i)), true
}

func (a *Assigner) handAt(dst []int, i int) []int {
	dst = dst[:0]
	for _, w := range a.hands[i*a.cfg.HandSize : (i+1)*a.cfg.HandSize] {
		dst = append(dst, int(w))
	}
	return dst
}

// Each calls fn for every stored hand in assignment order until fn returns
// false. fn must not call the Assigner.
func (a *Assigner) Each(fn func(id string, hand []int) bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	var buf [MaxHand]int
	for i, id := range a.ids {
		if !fn(id, a.handAt(buf[:0], i)) {
			return
		}
	}
}

// Len returns the number of tenants with a hand.
func (a *Assigner) Len() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.ids)
}

// Capacity returns the capacity bound C(n, t+1)/C(k, t+1).
func (a *Assigner) Capacity() *big.Int { return new(big.Int).Set(a.capacity) }

// Close syncs and closes the store, if any.
func (a *Assigner) Close() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.cfg.Store == nil {
		return nil
	}
	return a.cfg.Store.Close()
}
