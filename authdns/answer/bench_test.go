package answer

import (
	"math/rand/v2"
	"net/netip"
	"testing"
)

// allUp is a Health view in which every check is healthy, by a map lookup
// as the health package's Checker does.
type allUp map[string]bool

func (a allUp) Healthy(c string) bool { return a[c] }

func BenchmarkSelect(b *testing.B) {
	up := allUp{}
	for i := range 16 {
		up["c"+string(rune('0'+i))] = true
	}
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
		{"failover-2", Config{Policy: Failover, Records: []Record{{Check: "c0"}, {Check: "c1", Secondary: true}}}},
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
				s.Select(dst, q, up, r)
			}
		})
	}
}
