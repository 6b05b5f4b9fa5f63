package shard

import (
	"fmt"
	"math"
	"math/big"
)

// Hands returns C(n, k), the number of distinct hands of k workers out of n,
// or 0 when k < 0, n < 0 or k > n.
func Hands(n, k int) *big.Int {
	if n < 0 || k < 0 || k > n {
		return new(big.Int)
	}
	return new(big.Int).Binomial(int64(n), int64(k))
}

// EntropyBits returns log2 C(n, k): how many bits of secret an attacker must
// guess to land on a given tenant's hand by chance. It returns 0 for an
// invalid deck.
func EntropyBits(n, k int) float64 {
	return log2Big(Hands(n, k))
}

// log2Big returns log2(x) for x >= 1, and 0 otherwise.
func log2Big(x *big.Int) float64 {
	if x.Sign() <= 0 {
		return 0
	}
	f, _ := new(big.Float).SetInt(x).Float64()
	if !math.IsInf(f, 0) {
		return math.Log2(f)
	}
	shift := x.BitLen() - 64
	f, _ = new(big.Float).SetInt(new(big.Int).Rsh(x, uint(shift))).Float64()
	return math.Log2(f) + float64(shift)
}

// Overlap returns the exact distribution of the overlap between two
// independent uniformly random hands of k out of n: element o is the
// hypergeometric P(O = o) = C(k,o)·C(n-k,k-o)/C(n,k), for o = 0..k.
func Overlap(n, k int) ([]*big.Rat, error) {
	if err := checkDeck(n, k); err != nil {
		return nil, err
	}
	total := Hands(n, k)
	p := make([]*big.Rat, k+1)
	for o := range k + 1 {
		num := new(big.Int).Mul(Hands(k, o), Hands(n-k, k-o))
		p[o] = new(big.Rat).SetFrac(num, total)
	}
	return p, nil
}

// ExpectedOverlap returns k²/n, the mean number of workers two independent
// uniformly random hands share.
func ExpectedOverlap(n, k int) (*big.Rat, error) {
	if err := checkDeck(n, k); err != nil {
		return nil, err
	}
	return big.NewRat(int64(k)*int64(k), int64(n)), nil
}

// Capacity returns floor(C(n, t+1)/C(k, t+1)), the most hands of k out of n
// that can pairwise share at most t workers: each hand covers C(k, t+1)
// distinct (t+1)-subsets and no subset may be covered twice. t must be in
// [0, k).
func Capacity(n, k, t int) (*big.Int, error) {
	if err := checkDeck(n, k); err != nil {
		return nil, err
	}
	if t < 0 || t >= k {
		return nil, fmt.Errorf("shard: max overlap %d must be in [0, hand size %d)", t, k)
	}
	return new(big.Int).Quo(Hands(n, t+1), Hands(k, t+1)), nil
}

// Blast is the damage to other tenants when every worker of one tenant's
// hand fails (a poison tenant or a flood that takes its hand down).
type Blast struct {
	// Degraded is the share of other tenants that lose at least one worker.
	Degraded *big.Rat
	// Down is the share of other tenants that lose every worker of their
	// hand.
	Down *big.Rat
	// BelowMin is the share of other tenants left with fewer than the
	// minHealthy workers passed to BlastRadius (they spill or fail open).
	BelowMin *big.Rat
}

// BlastRadius returns the exact blast radius of one failed hand for tenants
// with independent uniformly random hands of k out of n (the Dealer's and
// Stable's hands): Degraded = 1 - P(O=0), Down = P(O=k) = 1/C(n,k) and
// BelowMin = P(O > k - minHealthy). minHealthy 0 means 1.
func BlastRadius(n, k, minHealthy int) (Blast, error) {
	p, err := Overlap(n, k)
	if err != nil {
		return Blast{}, err
	}
	minHealthy = max(minHealthy, 1)
	if minHealthy > k {
		return Blast{}, fmt.Errorf("shard: min healthy %d exceeds hand size %d", minHealthy, k)
	}
	below := new(big.Rat)
	for o := k - minHealthy + 1; o <= k; o++ {
		below.Add(below, p[o])
	}
	return Blast{
		Degraded: new(big.Rat).Sub(big.NewRat(1, 1), p[0]),
		Down:     new(big.Rat).Set(p[k]),
		BelowMin: below,
	}, nil
}

// zoneSizes splits n workers over z zones as evenly as possible, the first
// n mod z zones one larger.
func zoneSizes(n, z int) []int {
	s := make([]int, z)
	for i := range s {
		s[i] = n / z
		if i < n%z {
			s[i]++
		}
	}
	return s
}

// LatticeOverlap returns the overlap distribution of two independent
// lattice hands: z zones with the given sizes, m workers drawn from each.
// Element o is P(O = o) for o = 0..m·z; per-zone overlaps are independent
// hypergeometrics and the total is their convolution.
func LatticeOverlap(sizes []int, m int) ([]*big.Rat, error) {
	dist := []*big.Rat{big.NewRat(1, 1)}
	for _, s := range sizes {
		pz, err := Overlap(s, m)
		if err != nil {
			return nil, fmt.Errorf("shard: zone of %d workers cannot give %d per hand: %w", s, m, err)
		}
		next := make([]*big.Rat, len(dist)+m)
		for i := range next {
			next[i] = new(big.Rat)
		}
		for a, pa := range dist {
			for b, pb := range pz {
				next[a+b].Add(next[a+b], new(big.Rat).Mul(pa, pb))
			}
		}
		dist = next
	}
	return dist, nil
}
