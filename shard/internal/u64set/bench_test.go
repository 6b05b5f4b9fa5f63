package u64set

import (
	"math/rand/v2"
	"testing"
)

// benchKeys are four million distinct non-zero keys, the index of a million
// hands of four.
func benchKeys() []uint64 {
	r := rand.New(rand.NewPCG(3, 4))
	keys := make([]uint64, 1<<22)
	for i := range keys {
		keys[i] = r.Uint64() | 1
	}
	return keys
}

// BenchmarkSetAdd4M fills a Set sized for four million keys; compare with
// BenchmarkMapAdd4M.
func BenchmarkSetAdd4M(b *testing.B) {
	keys := benchKeys()
	b.ReportAllocs()
	for b.Loop() {
		s := New(len(keys))
		for _, k := range keys {
			s.Add(k)
		}
	}
}

// BenchmarkMapAdd4M fills a map[uint64]struct{} sized for four million keys.
func BenchmarkMapAdd4M(b *testing.B) {
	keys := benchKeys()
	b.ReportAllocs()
	for b.Loop() {
		m := make(map[uint64]struct{}, len(keys))
		for _, k := range keys {
			m[k] = struct{}{}
		}
	}
}
