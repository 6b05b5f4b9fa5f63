package u64set

import (
	"math/rand/v2"
	"testing"
)

func TestSetAgainstMap(t *testing.T) {
	var s Set // the zero value works
	ref := map[uint64]bool{}
	r := rand.New(rand.NewPCG(1, 2))
	for range 200000 {
		k := r.Uint64N(50000) + 1
		if got, want := s.Add(k), !ref[k]; got != want {
			t.Fatalf("Add(%d) = %v, want %v", k, got, want)
		}
		ref[k] = true
	}
	if s.Len() != len(ref) {
		t.Fatalf("Len %d, want %d", s.Len(), len(ref))
	}
	for k := uint64(1); k <= 60000; k++ {
		if s.Has(k) != ref[k] {
			t.Fatalf("Has(%d) = %v", k, s.Has(k))
		}
	}
	if New(0).Has(5) {
		t.Fatal("empty set has 5")
	}
}

func TestAddZeroPanics(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Fatal("Add(0) did not panic")
		}
	}()
	New(1).Add(0)
}
