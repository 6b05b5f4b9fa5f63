package shard

import (
	"encoding/binary"
	"math/bits"
	"unsafe"

	"github.com/dchest/siphash"
)

// Domain-separation tweaks XORed into the first key half for the hashes
// that follow the first one of a deal. They are part of the golden vectors.
const (
	tweakRetry = 0x7265_7472_795f_7368 // "retry_sh"
	tweakSpill = 0x7370_696c_6c5f_7368 // "spill_sh"
)

// Dealer deals every tenant id a hand of k distinct workers out of n,
// statelessly, from a keyed SipHash-2-4 of the id. The same secret, id, n
// and k give the same hand in every process, Go version and CPU
// architecture (the golden vectors in testdata pin this).
//
// The hand is an ordered tuple, drawn exactly uniformly from the
// n·(n-1)···(n-k+1) ordered tuples, so the set is exactly uniform over the
// C(n,k) hands and the order is a uniform preference order, which Pick uses
// for fallback. See the package documentation for the construction.
//
// A Dealer is immutable and safe for concurrent use. Hand and Pick do not
// allocate when dst has capacity for the result. The zero Dealer is not
// usable; build one with NewDealer.
type Dealer struct {
	k0, k1     uint64
	n, k       int
	spill      int
	minHealthy int
	// handHi:handLo is 2^128 mod P(n,k), the rejection threshold of a hand;
	// spillHi:spillLo the one of the spill draw, P(n-k, spill).
	handHi, handLo   uint64
	spillHi, spillLo uint64
}

// NewDealer validates cfg and returns a Dealer.
func NewDealer(cfg DealerConfig) (*Dealer, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	d := &Dealer{n: cfg.Workers, k: cfg.HandSize, spill: cfg.Spill, minHealthy: max(cfg.MinHealthy, 1)}
	d.k0, d.k1 = secretKey(cfg.Secret)
	d.handHi, d.handLo = threshold128(orderedCount(d.n, d.k))
	d.spillHi, d.spillLo = threshold128(orderedCount(d.n-d.k, d.spill))
	return d, nil
}

// Workers returns n, the size of the deck.
func (d *Dealer) Workers() int { return d.n }

// HandSize returns k.
func (d *Dealer) HandSize() int { return d.k }

// SpillSize returns the configured number of spill workers.
func (d *Dealer) SpillSize() int { return d.spill }

// Hand appends the hand of id to dst[:0] and returns it: k distinct worker
// indices in [0, n), in the tenant's preference order. It allocates only if
// cap(dst) < k.
func (d *Dealer) Hand(dst []int, id string) []int {
	return d.HandBytes(dst, unsafe.Slice(unsafe.StringData(id), len(id)))
}

// HandBytes is Hand for an id held in a byte slice; Hand(dst, s) and
// HandBytes(dst, []byte(s)) return the same hand.
func (d *Dealer) HandBytes(dst []int, id []byte) []int {
	hi, lo := siphash.Hash128(d.k0, d.k1, id)
	return d.handOfSeed(dst[:0], hi, lo)
}

// handOfSeed appends the hand dealt from the 128-bit seed hi:lo.
func (d *Dealer) handOfSeed(dst []int, hi, lo uint64) []int {
	var taken [MaxHand]int32
	return d.draw(dst, hi, lo, d.n, d.k, d.handHi, d.handLo, &taken, 0)
}

// Spill appends the spill workers of id to dst[:0] and returns them: Spill
// distinct workers outside the hand, in the order Pick tries them. The spill
// is drawn, with the same exact construction as a hand, from a second keyed
// hash of the ordered hand, uniformly over the ordered tuples of the n-k
// workers outside the hand. Spill allocates only if cap(dst) < Spill.
func (d *Dealer) Spill(dst []int, id string) []int {
	var hand [MaxHand]int
	h := d.Hand(hand[:0], id)
	return d.spillOf(dst[:0], h)
}

// spillOf draws the spill workers of a hand h, appending to dst.
func (d *Dealer) spillOf(dst []int, h []int) []int {
	if d.spill == 0 {
		return dst
	}
	var taken [MaxHand]int32
	var buf [8 * MaxHand]byte
	for i, w := range h {
		binary.LittleEndian.PutUint64(buf[8*i:], uint64(w))
		taken[i] = int32(w)
	}
	sortInt32(taken[:len(h)])
	hi, lo := siphash.Hash128(d.k0^tweakSpill, d.k1, buf[:8*len(h)])
	return d.draw(dst, hi, lo, d.n, d.spill, d.spillHi, d.spillLo, &taken, len(h))
}

// draw appends count distinct workers of [0, n) not in taken[:m] (sorted),
// using the 128-bit seed hi:lo; tHi:tLo is 2^128 mod P where P is the product
// of the count radices n-m, n-m-1, ...
//
// The seed is read as a binary fraction F = hi:lo / 2^128. Digit i is
// floor(F_i·r_i) and F_{i+1} = frac(F_i·r_i) with r_i = n-m-i, computed
// exactly in 128-bit fixed point. The digits are then the mixed-radix digits
// of floor(F·P), and the final fraction is F·P mod 1, so rejecting the seed
// when F·P mod 1 < (2^128 mod P)/2^128 is Lemire's unbiased bounded draw:
// every digit sequence keeps exactly floor(2^128/P) seeds. A rejected seed
// is rehashed with a counter. Digit d picks the d-th smallest worker not
// taken yet (a partial Fisher-Yates shuffle without the array).
func (d *Dealer) draw(dst []int, hi, lo uint64, n, count int, tHi, tLo uint64, taken *[MaxHand]int32, m int) []int {
	if out, ok := tryDraw(dst, hi, lo, n-m, count, tHi, tLo, taken, m); ok {
		return out
	}
	return d.redraw(dst, hi, lo, n, count, tHi, tLo, taken, m)
}

// redraw is draw after the seed hi:lo was rejected (probability below
// 2^-32): it rehashes the seed with a counter until a seed is accepted.
func (d *Dealer) redraw(dst []int, hi, lo uint64, n, count int, tHi, tLo uint64, taken *[MaxHand]int32, m int) []int {
	for attempt := uint64(1); ; attempt++ {
		var buf [24]byte
		binary.LittleEndian.PutUint64(buf[0:], hi)
		binary.LittleEndian.PutUint64(buf[8:], lo)
		binary.LittleEndian.PutUint64(buf[16:], attempt)
		hi, lo = siphash.Hash128(d.k0^tweakRetry, d.k1, buf[:])
		if out, ok := tryDraw(dst, hi, lo, n-m, count, tHi, tLo, taken, m); ok {
			return out
		}
	}
}

// tryDraw appends the workers picked by the count digits of the fraction
// hi:lo in the radices r, r-1, ... (digit i is the index of the worker among
// those not in taken[:m+i], which it joins) and reports whether Lemire's
// test accepts the seed: the fraction left over must be at least tHi:tLo.
// On rejection it takes the workers out of taken again and returns dst
// unchanged.
func tryDraw(dst []int, hi, lo uint64, r, count int, tHi, tLo uint64, taken *[MaxHand]int32, m int) ([]int, bool) {
	base := len(dst)
	var digit uint64
	for i := range count {
		digit, hi, lo = mulFrac(hi, lo, uint64(r-i))
		dst = append(dst, int(insertNth(taken, m+i, int32(digit))))
	}
	if hi > tHi || (hi == tHi && lo >= tLo) {
		return dst, true
	}
	for i := len(dst) - 1; i >= base; i-- {
		removeSorted(taken, m+i-base+1, int32(dst[i]))
	}
	return dst[:base], false
}

// removeSorted removes v from the sorted taken[:m].
func removeSorted(taken *[MaxHand]int32, m int, v int32) {
	i := 0
	for i < m && taken[i] != v {
		i++
	}
	for ; i+1 < m; i++ {
		taken[i] = taken[i+1]
	}
}

// mulFrac multiplies the 128-bit fraction hi:lo by r and returns the integer
// part (the digit) and the new fraction.
func mulFrac(hi, lo, r uint64) (digit, nhi, nlo uint64) {
	h1, l1 := bits.Mul64(lo, r)
	h2, l2 := bits.Mul64(hi, r)
	mid, c := bits.Add64(l2, h1, 0)
	return h2 + c, mid, l1
}

// insertNth returns the v-th smallest value not in taken[:m] (sorted
// ascending) and inserts it, keeping taken[:m+1] sorted. The scan is
// branch-free (a conditional move per element): with random digits the
// comparisons are unpredictable, and mispredicted branches would dominate
// the cost of a deal.
func insertNth(taken *[MaxHand]int32, m int, v int32) int32 {
	pos := 0
	for _, t := range taken[:m] {
		le := int32(0)
		if t <= v {
			le = 1
		}
		v += le
		pos += int(le)
	}
	for j := m; j > pos; j-- {
		taken[j] = taken[j-1]
	}
	taken[pos] = v
	return v
}

// sortInt32 sorts a short slice in place (insertion sort: hands are small).
func sortInt32(s []int32) {
	for i := 1; i < len(s); i++ {
		for j := i; j > 0 && s[j] < s[j-1]; j-- {
			s[j], s[j-1] = s[j-1], s[j]
		}
	}
}
