package shard

import (
	"fmt"
	"testing"
)

// BenchmarkDealerHand deals one hand at n=2048, k=4 for a 16-byte id.
func BenchmarkDealerHand(b *testing.B) {
	d := mustDealer(b, 2048, 4, 0)
	ids := make([]string, 1024)
	for i := range ids {
		ids[i] = fmt.Sprintf("tenant-%09d", i)
	}
	dst := make([]int, 0, 4)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		dst = d.Hand(dst, ids[i&1023])
		i++
	}
}

// BenchmarkDealerPick picks at n=2048, k=4, spill 4 with every worker
// healthy (the common case of a DNS answer).
func BenchmarkDealerPick(b *testing.B) {
	d := mustDealer(b, 2048, 4, 4)
	ids := make([]string, 1024)
	for i := range ids {
		ids[i] = fmt.Sprintf("tenant-%09d", i)
	}
	dst := make([]int, 0, 8)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		dst = d.Pick(dst, ids[i&1023], AllHealthy{}).Workers
		i++
	}
}

// BenchmarkStableHand builds one rendezvous hand at n=2048, k=4.
func BenchmarkStableHand(b *testing.B) {
	for _, bc := range []struct {
		name   string
		weight func(int) float64
	}{
		{"uniform", nil},
		{"weighted", func(i int) float64 { return float64(1 + i%4) }},
	} {
		b.Run(bc.name, func(b *testing.B) {
			s := mustStable(b, StableConfig{Workers: namedWorkers(2048, bc.weight, nil), HandSize: 4})
			dst := make([]int, 0, 4)
			ids := make([]string, 1024)
			for i := range ids {
				ids[i] = fmt.Sprintf("tenant-%09d", i)
			}
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				dst = s.Hand(dst, ids[i&1023])
				i++
			}
		})
	}
}

// BenchmarkAssigner1M assigns 1,000,000 tenants at n=2048, k=4, t=2; one
// op is the whole run. The ids are built outside the timer.
func BenchmarkAssigner1M(b *testing.B) {
	ids := tenantIDs(1000000, "tenant-")
	for _, store := range []bool{false, true} {
		b.Run(map[bool]string{false: "memory", true: "filestore"}[store], func(b *testing.B) {
			for b.Loop() {
				cfg := AssignerConfig{Workers: 2048, HandSize: 4, MaxOverlap: 2, Seed: 1, ExpectedTenants: len(ids)}
				if store {
					st, err := OpenFileStore(b.TempDir() + "/hands")
					if err != nil {
						b.Fatal(err)
					}
					cfg.Store = st
				}
				a, err := NewAssigner(cfg)
				if err != nil {
					b.Fatal(err)
				}
				if err := a.AssignAll(ids); err != nil {
					b.Fatal(err)
				}
				if err := a.Close(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
