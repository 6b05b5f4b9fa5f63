package answer

import (
	"math/bits"
	"net/netip"

	"github.com/corralhq/corral/shard"
)

// Health tells whether a named check is healthy. The health package's View
// implements it; nil means everything is healthy.
type Health interface {
	Healthy(check string) bool
}

// Source is a source of uniformly distributed random numbers, such as the
// sources of math/rand/v2 (*rand.PCG, *rand.ChaCha8).
type Source interface {
	Uint64() uint64
}

// Query is what selection knows of a query. The zero value is a query from
// an unknown client.
type Query struct {
	// Client is the address the query came from.
	Client netip.Addr
	// Subnet is the EDNS client subnet of the query; it replaces Client for
	// cidr selection when valid.
	Subnet netip.Prefix
	// Key is the tenant label of a shuffle-sharded name
	// ("acme" in acme.tenants.example.com).
	Key string
}

// Result describes a selection beyond the records chosen.
type Result struct {
	// FailOpen is true when no candidate record was healthy and the answer
	// holds unhealthy ones.
	FailOpen bool
	// Scope is the EDNS client subnet scope prefix length of a cidr answer:
	// the length of the prefix that decided it. Zero for other policies.
	Scope uint8
}

// Set is a compiled record set with its policy. It is immutable once built
// and safe for concurrent use; NewSet builds one.
type Set struct {
	policy Policy
	recs   []Record
	n      int
	cidr   *cidrTable
	dealer *shard.Dealer
}

// NewSet validates cfg and compiles it into a Set.
func NewSet(cfg Config) (*Set, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	s := &Set{policy: cfg.Policy, recs: append([]Record(nil), cfg.Records...), n: cfg.N, dealer: cfg.Dealer}
	if s.policy == Multivalue && s.n == 0 {
		s.n = DefaultMultivalue
	}
	if s.policy == CIDR {
		s.cidr = newCIDRTable(cfg.Locations, s.recs)
	}
	return s, nil
}

// Policy returns the set's policy.
func (s *Set) Policy() Policy { return s.policy }

// Len returns the number of records of the set.
func (s *Set) Len() int { return len(s.recs) }

// Records returns a copy of the records of the set.
func (s *Set) Records() []Record { return append([]Record(nil), s.recs...) }

// Select appends to dst[:0] the indices of the records that answer q, in
// answer order, and returns them with a description of the choice. h may be
// nil (everything healthy). Select does not allocate when cap(dst) is at
// least Len(); it is safe for concurrent use when h and r are (give each
// goroutine its own Source).
func (s *Set) Select(dst []int, q Query, h Health, r Source) ([]int, Result) {
	dst = dst[:0]
	switch s.policy {
	case Simple:
		for i := range s.recs {
			dst = append(dst, i)
		}
		shuffle(dst, r)
		return dst, Result{}
	case Weighted:
		return s.weighted(dst, h, r)
	case Multivalue:
		dst, open := s.healthy(dst, h, func(Record) bool { return true })
		return sample(dst, s.n, r), Result{FailOpen: open}
	case Failover:
		return s.failover(dst, h, r)
	case WeightedSubset:
		return s.subset(dst, h, r)
	case Shuffle:
		return s.shuffle(dst, q.Key, h)
	case CIDR:
		return s.cidrSelect(dst, q, h, r)
	}
	return dst, Result{}
}

// up reports whether record i is healthy.
func (s *Set) up(h Health, i int) bool {
	c := s.recs[i].Check
	return c == "" || h == nil || h.Healthy(c)
}

// healthy appends the indices of the healthy records that pass keep; when
// none is healthy it appends every record that passes keep and reports
// fail-open.
func (s *Set) healthy(dst []int, h Health, keep func(Record) bool) ([]int, bool) {
	for i, rec := range s.recs {
		if keep(rec) && s.up(h, i) {
			dst = append(dst, i)
		}
	}
	if len(dst) > 0 {
		return dst, false
	}
	for i, rec := range s.recs {
		if keep(rec) {
			dst = append(dst, i)
		}
	}
	return dst, true
}

func (s *Set) failover(dst []int, h Health, r Source) ([]int, Result) {
	for _, secondary := range [2]bool{false, true} {
		for i, rec := range s.recs {
			if rec.Secondary == secondary && s.up(h, i) {
				dst = append(dst, i)
			}
		}
		if len(dst) > 0 {
			shuffle(dst, r)
			return dst, Result{}
		}
	}
	for i, rec := range s.recs {
		if !rec.Secondary {
			dst = append(dst, i)
		}
	}
	shuffle(dst, r)
	return dst, Result{FailOpen: true}
}

// uintn returns a uniform number in [0, n); n > 0.
func uintn(r Source, n uint64) uint64 {
	hi, _ := bits.Mul64(r.Uint64(), n)
	return hi
}

// shuffle permutes a uniformly (Fisher-Yates).
func shuffle(a []int, r Source) {
	for i := len(a) - 1; i > 0; i-- {
		j := int(uintn(r, uint64(i+1)))
		a[i], a[j] = a[j], a[i]
	}
}

// sample moves a uniform random subset of k elements of a, in random order,
// to its front and returns it (a partial Fisher-Yates shuffle).
func sample(a []int, k int, r Source) []int {
	if k > len(a) {
		k = len(a)
	}
	for i := range k {
		j := i + int(uintn(r, uint64(len(a)-i)))
		a[i], a[j] = a[j], a[i]
	}
	return a[:k]
}
