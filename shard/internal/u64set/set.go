// Package u64set is an open-addressing hash set of uint64 keys with linear
// probing, for the shard assigner's index of worker subsets: a million
// hands put four million keys in it. Filling four million keys, a Set
// takes 64 MiB in one allocation and a map[uint64]struct{} 144 MiB; see
// BenchmarkSetAdd4M and BenchmarkMapAdd4M, with figures in shard/README.md.
//
// The package imports nothing of corral.
package u64set

import "math/bits"

// Set is a set of uint64 keys. Key 0 is reserved (it marks an empty slot)
// and must not be added. The zero Set is empty and ready to use. A Set is
// not safe for concurrent use.
type Set struct {
	slots []uint64
	n     int
	shift uint // 64 - log2(len(slots))
}

// New returns a set sized to hold hint keys without growing.
func New(hint int) *Set {
	s := &Set{}
	s.resize(max(hint, 8))
	return s
}

// Len returns the number of keys in s.
func (s *Set) Len() int { return s.n }

// Has reports whether key is in s.
func (s *Set) Has(key uint64) bool {
	if s.n == 0 {
		return false
	}
	mask := uint64(len(s.slots) - 1)
	for i := s.slot(key); ; i = (i + 1) & mask {
		switch s.slots[i] {
		case key:
			return true
		case 0:
			return false
		}
	}
}

// Add inserts key and reports whether it was absent. It panics on key 0,
// a programming error.
func (s *Set) Add(key uint64) bool {
	if key == 0 {
		panic("u64set: key 0 is reserved")
	}
	if 2*(s.n+1) > len(s.slots) {
		s.resize(2 * (s.n + 1))
	}
	mask := uint64(len(s.slots) - 1)
	for i := s.slot(key); ; i = (i + 1) & mask {
		switch s.slots[i] {
		case key:
			return false
		case 0:
			s.slots[i] = key
			s.n++
			return true
		}
	}
}

// slot is the home slot of key: Fibonacci hashing of the key.
func (s *Set) slot(key uint64) uint64 {
	return (key * 0x9e3779b97f4a7c15) >> s.shift
}

// resize rebuilds s with room for at least want keys at load factor 1/2.
func (s *Set) resize(want int) {
	size := 1 << bits.Len(uint(2*want-1))
	old := s.slots
	s.slots = make([]uint64, size)
	s.shift = uint(64 - bits.TrailingZeros(uint(size)))
	s.n = 0
	for _, k := range old {
		if k != 0 {
			s.Add(k)
		}
	}
}
