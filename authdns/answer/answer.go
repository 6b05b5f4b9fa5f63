package answer

import (
	"fmt"
	"math/bits"
	"net/netip"
	"sync/atomic"
)

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
	// Class is the class of the resolver the query comes from
	// (resolver-aware answers); the zero value, ClassSmall, answers as
	// the set is configured.
	Class Class
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
	policy *Policy
	recs   []Record
	// health holds each record's probe, nil for an always-healthy record.
	health []Probe
	// flags holds the flag of each record's probe (nil for an
	// always-healthy record) when every probe is a FlagProbe with a flag;
	// it is nil otherwise.
	flags []*atomic.Bool
	sel   selector
	// byClass is true when the answer depends on Query.Class.
	byClass bool
	// weights are the configured weights of the records; eff, when set,
	// the effective weights that replace them (SetWeights).
	weights []uint32
	eff     atomic.Pointer[[]uint32]
	// leaveOut is Config.BigLeaveOut.
	leaveOut bool
}

// NewSet validates cfg and compiles it into a Set.
func NewSet(cfg Config) (*Set, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Policy == nil {
		cfg.Policy = Simple
	}
	s := &Set{policy: cfg.Policy, recs: append([]Record(nil), cfg.Records...)}
	s.health = make([]Probe, len(s.recs))
	for i, r := range s.recs {
		s.health[i] = r.Health
	}
	s.flags = flagsOf(s.health)
	s.weights = make([]uint32, len(s.recs))
	for i, r := range s.recs {
		s.weights[i] = r.Weight
	}
	s.leaveOut = cfg.BigLeaveOut
	s.sel = cfg.Policy.build(&cfg)
	if c, ok := s.sel.(classReader); ok {
		s.byClass = c.readsClass()
	}
	return s, nil
}

// flagsOf returns the flags of probes (nil for a nil probe), or nil when
// one of them is not a FlagProbe with a flag.
func flagsOf(probes []Probe) []*atomic.Bool {
	flags := make([]*atomic.Bool, len(probes))
	for i, p := range probes {
		if p == nil {
			continue
		}
		fp, ok := p.(FlagProbe)
		if !ok {
			return nil
		}
		if flags[i] = fp.HealthyFlag(); flags[i] == nil {
			return nil
		}
	}
	return flags
}

// SetWeights replaces the weights the weighted policies draw by (weighted,
// weighted-subset, and multivalue, which then draws its subset and order
// by weight instead of uniformly) with w, one per record, as load
// feedback computes them (EffectiveWeights); nil restores the configured
// weights. A w of the wrong length is refused. It is safe for concurrent
// use with Select, which sees the old or the new weights whole.
func (s *Set) SetWeights(w []uint32) error {
	if w == nil {
		s.eff.Store(nil)
		return nil
	}
	if len(w) != len(s.recs) {
		return fmt.Errorf("answer: %d weights for %d records", len(w), len(s.recs))
	}
	w = append([]uint32(nil), w...)
	s.eff.Store(&w)
	return nil
}

// Weights returns the weights Select draws by now: the effective ones of
// SetWeights, or the configured ones.
func (s *Set) Weights() []uint32 { return append([]uint32(nil), s.weightsNow()...) }

// weightsNow returns the effective weights, or the configured ones.
func (s *Set) weightsNow() []uint32 {
	if e := s.eff.Load(); e != nil {
		return *e
	}
	return s.weights
}

// Policy returns the set's policy.
func (s *Set) Policy() *Policy { return s.policy }

// Len returns the number of records of the set.
func (s *Set) Len() int { return len(s.recs) }

// ByClass reports whether the set's answers depend on the class of the
// resolver (Query.Class): multivalue and weighted-subset sets, and
// weighted sets with BigSubset. A caller that keys the class by the
// query's client subnet must then scope the answer to that subnet.
func (s *Set) ByClass() bool { return s.byClass }

// Records returns a copy of the records of the set.
func (s *Set) Records() []Record { return append([]Record(nil), s.recs...) }

// Select appends to dst[:0] the indices of the records that answer q, in
// answer order, and returns them with a description of the choice. The
// records' health is read through their probes. Select does not allocate
// when cap(dst) is at least Len(); it is safe for concurrent use when the
// probes and r are (give each goroutine its own Source). The zero Set
// answers nothing.
func (s *Set) Select(dst []int, q Query, r Source) ([]int, Result) {
	if s.sel == nil {
		return dst[:0], Result{}
	}
	return s.sel.pick(s, dst[:0], q, r)
}

// up reports whether record i is healthy.
func (s *Set) up(i int) bool {
	if s.flags != nil {
		f := s.flags[i]
		return f == nil || f.Load()
	}
	p := s.health[i]
	return p == nil || p.Healthy()
}

// all returns dst[:n] holding 0, 1, ..., n-1 (a new slice when dst has
// less room than n).
func all(dst []int, n int) []int {
	if cap(dst) < n {
		dst = make([]int, n)
	}
	dst = dst[:n]
	for i := range dst {
		dst[i] = i
	}
	return dst
}

// uintn returns a uniform number in [0, n); n > 0. It is Lemire's
// multiply-shift without the rejection step: its bias is at most n/2^64.
func uintn(r Source, n uint64) uint64 {
	hi, _ := bits.Mul64(r.Uint64(), n)
	return hi
}

// batchBound bounds the product of the ranges that shuffle and sample
// draw from one random number: with it below 2^24 the bias of a batch
// stays under 2^-40, the order of uintn's own for one draw. A range of
// MaxRecords fits a batch.
const batchBound = 1 << 24

const _ = uint(batchBound - MaxRecords)

// shuffle and sample draw several indices from each 64-bit random number
// x (Brackett-Rozinsky and Lemire's batched ranged random integers,
// without rejection): the high word of x*n is the draw in [0, n) and the
// low word is the fraction left for the next one; used is the product of
// the ranges drawn from x so far. A shuffle of 8 records costs one random
// number, not 7.

// shuffle permutes a uniformly (Fisher-Yates).
func shuffle(a []int, r Source) {
	var x uint64
	used := uint64(batchBound)
	for i := len(a) - 1; i > 0; i-- {
		n := uint64(i + 1)
		if used*n >= batchBound {
			x, used = r.Uint64(), 1
		}
		hi, lo := bits.Mul64(x, n)
		x, used = lo, used*n
		a[i], a[hi] = a[hi], a[i]
	}
}

// sample moves a uniform random subset of k elements of a, in random order,
// to its front and returns it (a partial Fisher-Yates shuffle).
func sample(a []int, k int, r Source) []int {
	k = min(k, len(a))
	var x uint64
	used := uint64(batchBound)
	for i := range k {
		n := uint64(len(a) - i)
		if n == 1 {
			break
		}
		if used*n >= batchBound {
			x, used = r.Uint64(), 1
		}
		hi, lo := bits.Mul64(x, n)
		x, used = lo, used*n
		j := i + int(hi)
		a[i], a[j] = a[j], a[i]
	}
	return a[:k]
}

// bigCount returns how many of avail candidates an answer of n to a big
// resolver names: n, or avail-1 when n is every one of three or more and
// the set leaves one out (Config.BigLeaveOut).
func (s *Set) bigCount(n, avail int) int {
	if s.leaveOut && n >= avail && avail >= 3 {
		return avail - 1
	}
	return n
}
