package answer

import (
	"math/rand/v2"
	"net/netip"
	"sync/atomic"
	"testing"
)

// flag is a healthy probe read by one atomic load, as the health
// package's Ref is.
type flag struct{ down atomic.Bool }

func (f *flag) Healthy() bool { return !f.down.Load() }

// checked returns records with the given weights, each with its own probe.
func checked(weights ...uint32) []Record {
	out := make([]Record, len(weights))
	for i, w := range weights {
		out[i] = Record{Health: &flag{}, Weight: w}
	}
	return out
}

func BenchmarkSelect(b *testing.B) {
	recs := checked
	locs := map[string][]netip.Prefix{"eu": {netip.MustParsePrefix("10.0.0.0/8")}, "us": {netip.MustParsePrefix("172.16.0.0/12")}}
	cidr := recs(0, 0, 0)
	cidr[0].Location, cidr[1].Location = "eu", "us"
	q := Query{Client: netip.MustParseAddr("10.1.2.3"), Key: "acme"}
	for _, tc := range []struct {
		name string
		cfg  Config
	}{
		{"simple-2", Config{Policy: Simple, Records: []Record{{}, {}}}},
		{"weighted-6", Config{Policy: Weighted, Records: recs(1, 1, 2, 2, 3, 3)}},
		{"multivalue-8-of-8-checked", Config{Policy: Multivalue, Records: recs(make([]uint32, 8)...)}},
		{"multivalue-8-of-10-checked", Config{Policy: Multivalue, Records: recs(make([]uint32, 10)...)}},
		{"failover-2", Config{Policy: Failover, Records: []Record{{Health: &flag{}}, {Health: &flag{}, Secondary: true}}}},
		{"weighted-subset-3-of-6", Config{Policy: WeightedSubset, N: 3, Records: recs(1, 1, 2, 2, 3, 3)}},
		{"shuffle-4-of-16", Config{Policy: Shuffle, Records: recs(make([]uint32, 16)...), Dealer: testDealer(b, 16, 4, 2)}},
		{"cidr-3", Config{Policy: CIDR, Records: cidr, Locations: locs}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			s := mustSet(b, tc.cfg)
			r := rand.NewPCG(1, 2)
			dst := make([]int, 0, s.Len())
			b.ReportAllocs()
			for b.Loop() {
				s.Select(dst, q, r)
			}
		})
	}
}
