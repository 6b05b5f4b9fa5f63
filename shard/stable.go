package shard

import (
	"math"
	"math/bits"
	"slices"
	"unsafe"

	"github.com/dchest/siphash"
)

// tweakWorker separates the hash of a worker id from the hash of a tenant
// id under the same secret.
const tweakWorker = 0x776f_726b_6572_5f73 // "worker_s"

// Stable builds rendezvous (highest random weight) hands over named,
// weighted workers: every (tenant, worker) pair gets a keyed pseudo-random
// score and a hand is the k best-scoring workers, best first. Adding a
// worker changes only the hands it enters, each by exactly one member (the
// one it displaces); removing a worker changes only the hands that held it,
// each by exactly one member. The expected share of hands that move is k/n.
//
// Scores are computed with integer hashing and a portable logarithm (no
// fused multiply-add), so hands are the same on every architecture. A hand
// costs O(n) cheap hash evaluations; the logarithm, needed only for
// weighted decks, is evaluated only for workers that could enter the hand.
//
// A Stable is immutable and safe for concurrent use; to change the deck,
// build a new one. Build it with NewStable; the zero value is not usable.
type Stable struct {
	k0, k1  uint64
	k       int
	workers []Worker
	uniform bool // all weights equal: rank by hash alone
	all     deck
	zones   []deck   // one deck per zone, sorted by name; nil without zones
	names   []string // zone names, sorted
	perZone int
}

// deck is a set of workers laid out for the selection loop.
type deck struct {
	wh     []uint64  // keyed hash of each worker ID
	weight []float64 // effective weights (0 replaced by 1)
	idx    []int32   // index in the worker list; nil means the identity
	wmax   float64
}

// NewStable validates cfg and builds the hand set.
func NewStable(cfg StableConfig) (*Stable, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	n := len(cfg.Workers)
	s := &Stable{k: cfg.HandSize, workers: slices.Clone(cfg.Workers), uniform: true}
	s.k0, s.k1 = secretKey(cfg.Secret)
	s.all.wh = make([]uint64, n)
	s.all.weight = make([]float64, n)
	for i, w := range s.workers {
		wt := effectiveWeight(w.Weight)
		s.all.weight[i] = wt
		s.all.wmax = max(s.all.wmax, wt)
		if wt != s.all.weight[0] {
			s.uniform = false
		}
		s.all.wh[i] = siphash.Hash(s.k0^tweakWorker, s.k1, []byte(w.ID))
	}
	if cfg.Zones {
		s.buildZones()
	}
	return s, nil
}

// buildZones groups the workers by zone, zones sorted by name; Validate
// has checked that every zone can give ceil(k/zones) workers.
func (s *Stable) buildZones() {
	byName := zoneMembers(s.workers)
	for name := range byName {
		s.names = append(s.names, name)
	}
	slices.Sort(s.names)
	s.perZone = (s.k + len(s.names) - 1) / len(s.names)
	for _, name := range s.names {
		z := deck{idx: byName[name]}
		for _, i := range z.idx {
			z.wh = append(z.wh, s.all.wh[i])
			z.weight = append(z.weight, s.all.weight[i])
			z.wmax = max(z.wmax, s.all.weight[i])
		}
		s.zones = append(s.zones, z)
	}
}

// HandSize returns the number of workers in a hand: k, or zones·ceil(k/zones)
// for a zone lattice.
func (s *Stable) HandSize() int {
	if s.zones != nil {
		return s.perZone * len(s.zones)
	}
	return s.k
}

// Workers returns a copy of the deck, in configuration order; hands index
// into it.
func (s *Stable) Workers() []Worker { return slices.Clone(s.workers) }

// Zones returns the zone names in the order a lattice uses them (sorted),
// or nil without zones.
func (s *Stable) Zones() []string { return slices.Clone(s.names) }

// Hand appends the hand of id to dst[:0] and returns it: HandSize indices
// into the worker list, best first. For a zone lattice the members
// alternate between zones, starting at a zone chosen by the tenant's hash,
// so first preferences spread over zones. It allocates only when dst is
// too small or the hand exceeds MaxHand workers.
func (s *Stable) Hand(dst []int, id string) []int {
	th := siphash.Hash(s.k0, s.k1, unsafe.Slice(unsafe.StringData(id), len(id)))
	dst = dst[:0]
	if s.zones == nil {
		return s.top(dst, th, &s.all, s.k)
	}
	z := len(s.zones)
	var buf [MaxHand]int
	per := buf[:0]
	if z*s.perZone > MaxHand {
		per = make([]int, 0, z*s.perZone)
	}
	for i := range s.zones {
		per = s.top(per, th, &s.zones[i], s.perZone)
	}
	start := int((th >> 32) * uint64(z) >> 32)
	for j := range s.perZone {
		for i := range z {
			zi := (start + i) % z
			dst = append(dst, per[zi*s.perZone+j])
		}
	}
	return dst
}

// candidate is a worker in the running top-k selection.
type candidate struct {
	u   uint64  // the pair's hash
	key float64 // weighted: -ln(u)/weight, smaller is better
	i   int32
}

// top appends the k best workers of deck d for tenant hash th, best
// first, as indices into the worker list.
func (s *Stable) top(dst []int, th uint64, d *deck, k int) []int {
	var buf [MaxHand]candidate
	best := buf[:0]
	if k > MaxHand {
		best = make([]candidate, 0, k)
	}
	// A pair hash below cut cannot enter the full selection. Uniform: cut
	// is the worst member's hash. Weighted: a worker whose (1-u)/weight
	// exceeds the worst key cannot enter, since -ln(u) >= 1-u; cut applies
	// this with the largest weight and slope with the worker's own (slope
	// is the worst key in units of 2^-63, +Inf until the selection fills).
	// Both are widened to absorb rounding. The signed conversion avoids
	// the top-bit branch of a uint64 to float64 conversion, which a random
	// hash would mispredict half of the time.
	var cut uint64
	slope := math.Inf(1)
	weight := d.weight
	for j := 0; ; j++ {
		var u uint64
		if j, u = scan(d.wh, th, cut, j); j == len(d.wh) {
			break
		}
		c := candidate{u: u, i: int32(j)}
		if !s.uniform {
			if float64(int64(^u>>1)) > slope*weight[j]+1<<11 {
				continue
			}
			c.key = -portableLog((float64(u>>11)+0.5)/(1<<53)) / weight[j]
		}
		if len(best) == k && !s.better(d, c, best[k-1]) {
			continue
		}
		// Insert c in order, dropping the worst when full.
		if len(best) < k {
			best = append(best, c)
		} else {
			best[k-1] = c
		}
		for p := len(best) - 1; p > 0 && s.better(d, best[p], best[p-1]); p-- {
			best[p], best[p-1] = best[p-1], best[p]
		}
		if len(best) == k {
			cut, slope = s.bounds(d, best[k-1])
		}
	}
	for _, c := range best {
		if d.idx != nil {
			dst = append(dst, int(d.idx[c.i]))
		} else {
			dst = append(dst, int(c.i))
		}
	}
	return dst
}

// scan returns the first index j >= from whose pair hash with th is at
// least cut, and that hash; j is len(wh) when there is none. It is the
// hot loop of a stable hand, kept small so that it runs in registers.
func scan(wh []uint64, th, cut uint64, from int) (int, uint64) {
	for j := from; j < len(wh); j++ {
		if u := mix64(th ^ wh[j]); u >= cut {
			return j, u
		}
	}
	return len(wh), 0
}

// bounds returns the pruning bounds of top for a full selection whose
// worst member is w.
func (s *Stable) bounds(d *deck, w candidate) (cut uint64, slope float64) {
	if s.uniform {
		return w.u, math.Inf(1)
	}
	slope = w.key * (1 + 1e-9) * (1 << 63)
	// Skip when 1-u > key·wmax, that is u < 1 - key·wmax.
	room := 1 - w.key*d.wmax*(1+1e-9)
	if !(room > 0) {
		return 0, slope
	}
	c := room * (1 << 64)
	if c < 1<<13 {
		return 0, slope
	}
	return uint64(c) - 1<<12, slope
}

// better reports whether a ranks before b: a higher hash (uniform) or a
// smaller key (weighted), ties broken by the hash, then the worker ID, so
// that the order never depends on the position in the worker list.
func (s *Stable) better(d *deck, a, b candidate) bool {
	if !s.uniform && a.key != b.key {
		return a.key < b.key
	}
	if a.u != b.u {
		return a.u > b.u
	}
	ai, bi := int(a.i), int(b.i)
	if d.idx != nil {
		ai, bi = int(d.idx[ai]), int(d.idx[bi])
	}
	return s.workers[ai].ID < s.workers[bi].ID
}

// mix64 scores a (tenant, worker) pair from the XOR of their keyed hashes:
// the 128-bit product with an odd constant folded onto 64 bits (the "mum"
// step of wyhash). The inputs are already keyed SipHash values; the
// multiply breaks the XOR structure so that each tenant ranks the workers
// in an unrelated order, at one multiplication per worker.
func mix64(x uint64) uint64 {
	hi, lo := bits.Mul64(x, 0x9e3779b97f4a7c15)
	return hi ^ lo
}

// portableLog returns ln(x) for x in (0, 1] using only correctly rounded
// IEEE operations in a fixed order (explicit float64 conversions forbid
// fused multiply-add), so the result is bit-identical on every
// architecture, unlike math.Log, which has assembly variants. It is
// accurate to a few ulps.
func portableLog(x float64) float64 {
	const ln2 = 0.6931471805599453
	f, e := math.Frexp(x) // x = f·2^e, f in [0.5, 1)
	if f < math.Sqrt2/2 {
		f *= 2
		e--
	}
	s := (f - 1) / (f + 1) // |s| <= 0.1716
	s2 := float64(s * s)
	// ln f = 2·atanh(s) = 2s·(1 + s²/3 + s⁴/5 + ...); 11 terms reach 1e-17.
	p := 1.0 / 23
	for _, c := range [...]float64{1.0 / 21, 1.0 / 19, 1.0 / 17, 1.0 / 15, 1.0 / 13, 1.0 / 11, 1.0 / 9, 1.0 / 7, 1.0 / 5, 1.0 / 3, 1} {
		p = float64(p*s2) + c
	}
	return float64(float64(e)*ln2) + float64(float64(2*s)*p)
}
