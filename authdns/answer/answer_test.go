package answer

import (
	"errors"
	"math"
	"math/rand/v2"
	"net/netip"
	"slices"
	"testing"

	"github.com/corralhq/corral/shard"
)

// down names the checks that are unhealthy.
type down map[string]bool

// view is the health of a test's checks: the probe of a check reads
// whether its name is in down, so a test changes health between selections
// as a health checker would.
type view struct{ down down }

// probe is the health of the check name of v.
type probe struct {
	v    *view
	name string
}

func (p probe) Healthy() bool { return !p.v.down[p.name] }

// check returns the probe of the check name.
func (v *view) check(name string) Probe { return probe{v, name} }

// recs builds records checked by "c0", "c1", ... with the given weights.
func (v *view) recs(weights ...uint32) []Record {
	out := make([]Record, len(weights))
	for i, w := range weights {
		out[i] = Record{Health: v.check("c" + string(rune('0'+i))), Weight: w}
	}
	return out
}

// pick selects from s with the checks of d down.
func (v *view) pick(s *Set, dst []int, q Query, d down, r Source) ([]int, Result) {
	v.down = d
	return s.Select(dst, q, r)
}

func mustSet(t testing.TB, cfg Config) *Set {
	t.Helper()
	s, err := NewSet(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// counts runs n selections and counts how often each record is answered.
func counts(s *Set, v *view, d down, q Query, n int) []int {
	r := rand.NewPCG(1, 2)
	c := make([]int, s.Len())
	dst := make([]int, 0, s.Len())
	for range n {
		var out []int
		out, _ = v.pick(s, dst, q, d, r)
		for _, i := range out {
			c[i]++
		}
	}
	return c
}

func TestWeightedRoute53Semantics(t *testing.T) {
	v := &view{}
	tests := []struct {
		name     string
		weights  []uint32
		down     down
		possible []int // records that may be answered
		failOpen bool
	}{
		{"healthy non-zero records only", []uint32{1, 0, 3}, nil, []int{0, 2}, false},
		{"zero weight only when every non-zero is down", []uint32{1, 0, 3}, down{"c0": true, "c2": true}, []int{1}, false},
		{"all zero weights mean equal chances", []uint32{0, 0, 0}, down{"c1": true}, []int{0, 2}, false},
		{"unhealthy non-zero skipped", []uint32{5, 5, 0}, down{"c0": true}, []int{1}, false},
		{"none healthy fails open by weight", []uint32{1, 0, 3}, down{"c0": true, "c1": true, "c2": true}, []int{0, 2}, true},
		{"none healthy, all zero, fails open equally", []uint32{0, 0}, down{"c0": true, "c1": true}, []int{0, 1}, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := mustSet(t, Config{Policy: Weighted, Records: v.recs(tc.weights...)})
			r := rand.NewPCG(3, 4)
			seen := map[int]bool{}
			for range 2000 {
				out, res := v.pick(s, nil, Query{}, tc.down, r)
				if len(out) != 1 {
					t.Fatalf("weighted answered %d records, want 1", len(out))
				}
				if !slices.Contains(tc.possible, out[0]) {
					t.Fatalf("answered record %d, want one of %v", out[0], tc.possible)
				}
				if res.FailOpen != tc.failOpen {
					t.Fatalf("FailOpen = %v, want %v", res.FailOpen, tc.failOpen)
				}
				seen[out[0]] = true
			}
			if len(seen) != len(tc.possible) {
				t.Errorf("answered %v over 2000 draws, want every one of %v", seen, tc.possible)
			}
		})
	}
}

// chiSquare returns the statistic of observed counts against expected
// probabilities.
func chiSquare(obs []int, p []float64) float64 {
	n := 0
	for _, o := range obs {
		n += o
	}
	x := 0.0
	for i, o := range obs {
		if p[i] == 0 {
			continue
		}
		e := p[i] * float64(n)
		x += (float64(o) - e) * (float64(o) - e) / e
	}
	return x
}

func TestWeightedDistributionChiSquare(t *testing.T) {
	v := &view{}
	// Records 0..3 healthy with weights 1..4, record 4 (weight 10) down,
	// record 5 weight 0: answers follow 1:2:3:4 and never 4 or 5.
	s := mustSet(t, Config{Policy: Weighted, Records: v.recs(1, 2, 3, 4, 10, 0)})
	c := counts(s, v, down{"c4": true}, Query{}, 200000)
	if c[4] != 0 || c[5] != 0 {
		t.Fatalf("unhealthy or zero-weight record answered: %v", c)
	}
	x := chiSquare(c[:4], []float64{0.1, 0.2, 0.3, 0.4})
	// 3 degrees of freedom: 16.27 is the 0.999 quantile.
	if x > 16.27 {
		t.Errorf("chi-square %.2f > 16.27 for counts %v against 1:2:3:4", x, c)
	}
}

func TestMultivalue(t *testing.T) {
	v := &view{}
	tests := []struct {
		name      string
		n         int
		records   int
		down      down
		wantLen   int
		wantOpen  bool
		forbidden []int
	}{
		{"more than 8 healthy gives 8", 0, 10, nil, 8, false, nil},
		{"fewer healthy than 8 gives them all", 0, 10, down{"c0": true, "c1": true, "c2": true}, 7, false, []int{0, 1, 2}},
		{"none healthy gives up to 8 unhealthy", 0, 10, allDown(10), 8, true, nil},
		{"custom n", 3, 5, nil, 3, false, nil},
		{"few records", 0, 2, nil, 2, false, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := mustSet(t, Config{Policy: Multivalue, N: tc.n, Records: v.recs(make([]uint32, tc.records)...)})
			r := rand.NewPCG(5, 6)
			seen := make([]int, tc.records)
			for range 1000 {
				out, res := v.pick(s, make([]int, 0, tc.records), Query{}, tc.down, r)
				if len(out) != tc.wantLen || res.FailOpen != tc.wantOpen {
					t.Fatalf("got %v (fail open %v), want %d records (fail open %v)", out, res.FailOpen, tc.wantLen, tc.wantOpen)
				}
				u := slices.Clone(out)
				slices.Sort(u)
				if len(slices.Compact(u)) != len(out) {
					t.Fatalf("duplicate records in %v", out)
				}
				for _, i := range out {
					if slices.Contains(tc.forbidden, i) {
						t.Fatalf("unhealthy record %d answered", i)
					}
					seen[i]++
				}
			}
			for i, c := range seen {
				if c == 0 && !slices.Contains(tc.forbidden, i) {
					t.Errorf("record %d never answered in 1000 answers", i)
				}
			}
		})
	}
}

func allDown(n int) down {
	d := down{}
	for i := range n {
		d["c"+string(rune('0'+i))] = true
	}
	return d
}

func TestSimpleAnswersAllInRandomOrder(t *testing.T) {
	v := &view{}
	s := mustSet(t, Config{Policy: Simple, Records: v.recs(0, 0, 0)})
	firsts := map[int]int{}
	r := rand.NewPCG(7, 8)
	for range 3000 {
		out, _ := v.pick(s, nil, Query{}, allDown(3), r)
		if len(out) != 3 {
			t.Fatalf("simple answered %v, want all 3 records (health is not consulted)", out)
		}
		firsts[out[0]]++
	}
	if x := chiSquare([]int{firsts[0], firsts[1], firsts[2]}, []float64{1.0 / 3, 1.0 / 3, 1.0 / 3}); x > 13.8 {
		t.Errorf("first record is not uniform: %v (chi-square %.2f)", firsts, x)
	}
}

func TestFailover(t *testing.T) {
	v := &view{}
	rs := []Record{{Health: v.check("p1")}, {Health: v.check("p2")}, {Health: v.check("s1"), Secondary: true}, {Health: v.check("s2"), Secondary: true}}
	tests := []struct {
		name     string
		down     down
		want     []int
		failOpen bool
	}{
		{"primaries while healthy", nil, []int{0, 1}, false},
		{"healthy primary only", down{"p1": true}, []int{1}, false},
		{"secondaries when primaries are down", down{"p1": true, "p2": true}, []int{2, 3}, false},
		{"healthy secondary only", down{"p1": true, "p2": true, "s1": true}, []int{3}, false},
		{"all down: primaries", down{"p1": true, "p2": true, "s1": true, "s2": true}, []int{0, 1}, true},
	}
	s := mustSet(t, Config{Policy: Failover, Records: rs})
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out, res := v.pick(s, nil, Query{}, tc.down, rand.NewPCG(1, 1))
			slices.Sort(out)
			if !slices.Equal(out, tc.want) || res.FailOpen != tc.failOpen {
				t.Errorf("got %v (fail open %v), want %v (fail open %v)", out, res.FailOpen, tc.want, tc.failOpen)
			}
		})
	}
}

// subsetInclusion computes exactly the probability that each record is in
// a sample of n drawn by weight without replacement.
func subsetInclusion(w []float64, n int) []float64 {
	p := make([]float64, len(w))
	var rec func(taken []bool, left float64, depth int, prob float64)
	rec = func(taken []bool, left float64, depth int, prob float64) {
		if depth == n {
			return
		}
		for i, wi := range w {
			if taken[i] || wi == 0 {
				continue
			}
			q := prob * wi / left
			p[i] += q
			taken[i] = true
			rec(taken, left-wi, depth+1, q)
			taken[i] = false
		}
	}
	total := 0.0
	for _, x := range w {
		total += x
	}
	rec(make([]bool, len(w)), total, 0, 1)
	return p
}

func TestWeightedSubset(t *testing.T) {
	v := &view{}
	weights := []uint32{1, 2, 3, 4, 5, 6}
	s := mustSet(t, Config{Policy: WeightedSubset, N: 3, Records: v.recs(weights...)})
	const draws = 100000
	c := counts(s, v, nil, Query{}, draws)
	want := subsetInclusion([]float64{1, 2, 3, 4, 5, 6}, 3)
	for i := range c {
		got := float64(c[i]) / draws
		sd := math.Sqrt(want[i] * (1 - want[i]) / draws)
		if math.Abs(got-want[i]) > 5*sd {
			t.Errorf("record %d (weight %d) in %.4f of answers, want %.4f", i, weights[i], got, want[i])
		}
	}

	tests := []struct {
		name     string
		weights  []uint32
		down     down
		wantLen  int
		allowed  []int
		failOpen bool
	}{
		{"unhealthy records excluded", []uint32{1, 1, 1, 1, 1, 1}, down{"c0": true, "c1": true}, 3, []int{2, 3, 4, 5}, false},
		{"fewer healthy than n", []uint32{1, 1, 1, 1}, down{"c0": true, "c1": true}, 2, []int{2, 3}, false},
		{"zero weights fill up", []uint32{5, 0, 0, 0}, nil, 3, []int{0, 1, 2, 3}, false},
		{"none healthy fails open", []uint32{1, 1, 1, 1}, allDown(4), 3, []int{0, 1, 2, 3}, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := mustSet(t, Config{Policy: WeightedSubset, N: 3, Records: v.recs(tc.weights...)})
			r := rand.NewPCG(9, 9)
			for range 500 {
				out, res := v.pick(s, nil, Query{}, tc.down, r)
				u := slices.Clone(out)
				slices.Sort(u)
				if len(out) != tc.wantLen || len(slices.Compact(u)) != len(out) || res.FailOpen != tc.failOpen {
					t.Fatalf("got %v (fail open %v), want %d distinct (fail open %v)", out, res.FailOpen, tc.wantLen, tc.failOpen)
				}
				for _, i := range out {
					if !slices.Contains(tc.allowed, i) {
						t.Fatalf("record %d answered, want one of %v", i, tc.allowed)
					}
				}
				if tc.weights[0] == 5 && !slices.Contains(out, 0) {
					t.Fatalf("the only non-zero record is missing from %v", out)
				}
			}
		})
	}
}

func TestCIDR(t *testing.T) {
	v := &view{}
	locs := map[string][]netip.Prefix{
		"eu":    {netip.MustParsePrefix("10.1.0.0/16"), netip.MustParsePrefix("2001:db8:1::/48")},
		"eu-de": {netip.MustParsePrefix("10.1.2.0/24")},
		"us":    {netip.MustParsePrefix("10.2.0.0/16")},
	}
	rs := []Record{
		{Health: v.check("eu"), Location: "eu"}, {Health: v.check("de"), Location: "eu-de"},
		{Health: v.check("us"), Location: "us"}, {Health: v.check("any"), Location: "*"},
	}
	s := mustSet(t, Config{Policy: CIDR, Records: rs, Locations: locs})
	tests := []struct {
		name      string
		q         Query
		down      down
		want      []int
		wantScope uint8
		failOpen  bool
	}{
		{"client address", Query{Client: netip.MustParseAddr("10.1.9.9")}, nil, []int{0}, 0, false},
		{"longest prefix wins", Query{Client: netip.MustParseAddr("10.1.2.3")}, nil, []int{1}, 0, false},
		{"client subnet beats the address", Query{Client: netip.MustParseAddr("10.2.0.1"), Subnet: netip.MustParsePrefix("10.1.2.0/24")}, nil, []int{1}, 24, false},
		// 10.1.0.0/23 is the largest network around 10.1.0.0 outside 10.1.2.0/24.
		{"short client subnet: the answer of its first address, scope beyond the subnet", Query{Subnet: netip.MustParsePrefix("10.1.0.0/16")}, nil, []int{0}, 23, false},
		{"ipv6", Query{Client: netip.MustParseAddr("2001:db8:1::5")}, nil, []int{0}, 0, false},
		{"v4-mapped v6", Query{Client: netip.MustParseAddr("::ffff:10.2.3.4")}, nil, []int{2}, 0, false},
		// 128.0.0.0/1 holds none of the locations.
		{"no match: default location", Query{Subnet: netip.MustParsePrefix("192.0.2.0/24")}, nil, []int{3}, 1, false},
		{"no match next to a location", Query{Subnet: netip.MustParsePrefix("10.3.0.0/24")}, nil, []int{3}, 16, false},
		{"no match, short subnet holding a location", Query{Subnet: netip.MustParsePrefix("10.0.0.0/8")}, nil, []int{3}, 16, false},
		{"v4-mapped client subnet: the scope in IPv6 bits", Query{Subnet: netip.MustParsePrefix("::ffff:10.1.2.0/120")}, nil, []int{1}, 120, false},
		{"client subnet /0: untailored, scope 0", Query{Subnet: netip.MustParsePrefix("0.0.0.0/0")}, nil, []int{3}, 0, false},
		{"unhealthy location falls back to default", Query{Client: netip.MustParseAddr("10.2.0.1")}, down{"us": true}, []int{3}, 0, false},
		{"all down: fail open to the location", Query{Client: netip.MustParseAddr("10.2.0.1")}, down{"us": true, "any": true}, []int{2}, 0, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out, res := v.pick(s, nil, tc.q, tc.down, rand.NewPCG(1, 1))
			if !slices.Equal(out, tc.want) || res.Scope != tc.wantScope || res.FailOpen != tc.failOpen {
				t.Errorf("got %v scope %d open %v, want %v scope %d open %v", out, res.Scope, res.FailOpen, tc.want, tc.wantScope, tc.failOpen)
			}
		})
	}
}

// TestCIDRScopeNestedLocations is the case of a caching resolver: with
// 10.0.0.0/8 and 10.1.0.0/16 in different locations, the answer to
// 10.2.3.0/24 must not be cached for 10.0.0.0/8, which holds 10.1.0.0/16
// (RFC 7871 section 7.3.1).
func TestCIDRScopeNestedLocations(t *testing.T) {
	locs := map[string][]netip.Prefix{
		"wide":   {netip.MustParsePrefix("10.0.0.0/8")},
		"narrow": {netip.MustParsePrefix("10.1.0.0/16")},
	}
	rs := []Record{{Location: "narrow"}, {Location: "wide"}}
	s := mustSet(t, Config{Policy: CIDR, Records: rs, Locations: locs})
	tests := []struct {
		name      string
		subnet    string
		want      int
		wantScope uint8
	}{
		// 10.2.0.0/15 is the largest network around 10.2.3.0 outside 10.1.0.0/16.
		{"wide location beside the narrow one", "10.2.3.0/24", 1, 15},
		{"wide location far from the narrow one", "10.200.0.0/24", 1, 9},
		{"narrow location", "10.1.3.0/24", 0, 16},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out, res := s.Select(nil, Query{Subnet: netip.MustParsePrefix(tc.subnet)}, rand.NewPCG(1, 1))
			if !slices.Equal(out, []int{tc.want}) || res.Scope != tc.wantScope {
				t.Errorf("got %v scope %d, want [%d] scope %d", out, res.Scope, tc.want, tc.wantScope)
			}
		})
	}
}

// TestCIDRScopeHoldsForItsNetwork checks on random nested tables, against
// a brute-force longest match, that the network an answer's scope names is
// answered alike: the longest prefix holding the whole network is the
// answer's location, and no prefix of another location lies inside it.
func TestCIDRScopeHoldsForItsNetwork(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 7))
	randPrefix := func(minBits, maxBits int) netip.Prefix {
		a := netip.AddrFrom4([4]byte{10, byte(r.IntN(4)), byte(r.IntN(256)), byte(r.IntN(256))})
		p, _ := a.Prefix(minBits + r.IntN(maxBits-minBits+1))
		return p
	}
	names := []string{"a", "b", "c"}
	for round := range 300 {
		locs := map[string][]netip.Prefix{}
		owner := map[netip.Prefix]string{}
		for range 1 + r.IntN(10) {
			p := randPrefix(8, 24)
			if _, dup := owner[p]; dup {
				continue
			}
			n := names[r.IntN(len(names))]
			locs[n] = append(locs[n], p)
			owner[p] = n
		}
		rs := []Record{{Location: DefaultLocation}}
		for n := range locs {
			rs = append(rs, Record{Location: n})
		}
		s := mustSet(t, Config{Policy: CIDR, Records: rs, Locations: locs})
		for range 50 {
			q := randPrefix(4, 32)
			out, res := s.Select(nil, Query{Subnet: q}, rand.NewPCG(1, 1))
			got := rs[out[0]].Location
			network, _ := q.Addr().Prefix(int(res.Scope))
			best, want := -1, DefaultLocation
			for p, l := range owner {
				if p.Bits() <= network.Bits() && p.Contains(network.Addr()) && p.Bits() > best {
					best, want = p.Bits(), l
				}
				if p.Bits() > network.Bits() && network.Contains(p.Addr()) && l != got {
					t.Fatalf("round %d: %v answered %s with scope %d, but %v inside %v is %s (table %v)", round, q, got, res.Scope, p, network, l, locs)
				}
			}
			if got != want {
				t.Fatalf("round %d: %v answered %s with scope %d, but %v is %s (table %v)", round, q, got, res.Scope, network, want, locs)
			}
		}
	}
}

func testDealer(t testing.TB, n, k, spill int) *shard.Dealer {
	d, err := shard.NewDealer(shard.DealerConfig{Secret: make([]byte, shard.SecretSize), Workers: n, HandSize: k, Spill: spill})
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func TestShuffle(t *testing.T) {
	v := &view{}
	d := testDealer(t, 16, 4, 2)
	rs := make([]Record, 16)
	names := make([]string, len(rs))
	for i := range rs {
		names[i] = "w" + string(rune('a'+i))
		rs[i].Health = v.check(names[i])
	}
	s := mustSet(t, Config{Policy: Shuffle, Records: rs, Dealer: d})
	hand := d.Hand(nil, "acme")
	spill := d.Spill(nil, "acme")
	name := func(i int) string { return names[i] }

	out, res := v.pick(s, nil, Query{Key: "acme"}, nil, nil)
	if !slices.Equal(out, hand) || res.FailOpen {
		t.Fatalf("healthy: got %v, want the hand %v", out, hand)
	}
	other, _ := v.pick(s, nil, Query{Key: "globex"}, nil, nil)
	if slices.Equal(other, out) {
		t.Errorf("two tenants got the same hand %v", out)
	}
	out, _ = v.pick(s, nil, Query{Key: "acme"}, down{name(hand[0]): true}, nil)
	if !slices.Equal(out, hand[1:]) {
		t.Errorf("one member down: got %v, want %v", out, hand[1:])
	}
	handDown := down{}
	for _, i := range hand {
		handDown[name(i)] = true
	}
	out, res = v.pick(s, nil, Query{Key: "acme"}, handDown, nil)
	if !slices.Equal(out, spill[:1]) || res.FailOpen {
		t.Errorf("hand down: got %v, want the first spill record of %v (min healthy 1)", out, spill)
	}
	for _, i := range spill {
		handDown[name(i)] = true
	}
	out, res = v.pick(s, nil, Query{Key: "acme"}, handDown, nil)
	if !slices.Equal(out, hand) || !res.FailOpen {
		t.Errorf("hand and spill down: got %v (open %v), want the hand %v failing open", out, res.FailOpen, hand)
	}
}

func TestConfigErrors(t *testing.T) {
	v := &view{}
	tests := []struct {
		name string
		cfg  Config
	}{
		{"no records", Config{Policy: Simple}},
		{"subset without n", Config{Policy: WeightedSubset, Records: v.recs(1)}},
		{"failover without primary", Config{Policy: Failover, Records: []Record{{Secondary: true}}}},
		{"shuffle without dealer", Config{Policy: Shuffle, Records: v.recs(1)}},
		{"shuffle dealer size", Config{Policy: Shuffle, Records: v.recs(1, 1), Dealer: testDealer(t, 3, 1, 0)}},
		{"cidr unknown location", Config{Policy: CIDR, Records: []Record{{Location: "mars"}}}},
		{"negative n", Config{Policy: Multivalue, N: -1, Records: v.recs(1)}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := NewSet(tc.cfg); err == nil || err.Error()[:8] != "answer: " {
				t.Errorf("NewSet accepted it or the error does not name the package: %v", err)
			}
		})
	}
	if _, err := ParsePolicy("round-robin"); err == nil {
		t.Error("ParsePolicy accepted an unknown policy")
	}
	for _, p := range Policies() {
		if q, err := ParsePolicy(p.String()); err != nil || q != p {
			t.Errorf("ParsePolicy(%q) = %v, %v", p, q, err)
		}
	}
}

func TestSelectDoesNotAllocate(t *testing.T) {
	v := &view{}
	v.down = down{"c3": true}
	r := rand.NewPCG(1, 2)
	locs := map[string][]netip.Prefix{"a": {netip.MustParsePrefix("10.0.0.0/8")}}
	cidr := v.recs(0, 0)
	cidr[0].Location = "a"
	sets := []Config{
		{Policy: Simple, Records: v.recs(0, 0)},
		{Policy: Weighted, Records: v.recs(1, 2, 3, 4)},
		{Policy: Multivalue, Records: v.recs(make([]uint32, 10)...)},
		{Policy: Failover, Records: v.recs(0, 0)},
		{Policy: WeightedSubset, N: 3, Records: v.recs(1, 2, 3, 4, 5, 6)},
		{Policy: Shuffle, Records: v.recs(make([]uint32, 16)...), Dealer: testDealer(t, 16, 4, 2)},
		{Policy: CIDR, Records: cidr, Locations: locs},
	}
	q := Query{Client: netip.MustParseAddr("10.1.2.3"), Key: "acme"}
	for _, cfg := range sets {
		s := mustSet(t, cfg)
		dst := make([]int, 0, s.Len())
		if a := testing.AllocsPerRun(100, func() { s.Select(dst, q, r) }); a != 0 {
			t.Errorf("%v: %.1f allocations per Select", cfg.Policy, a)
		}
	}
}

// TestFieldsOfOtherPolicies checks that a field the policy does not read
// is refused, naming the field and the policies that read it.
func TestFieldsOfOtherPolicies(t *testing.T) {
	tests := []struct {
		name   string
		cfg    Config
		record int
		field  Field
		msg    string
	}{
		{"weight on multivalue", Config{Policy: Multivalue, Records: []Record{{}, {Weight: 3}}}, 1, FieldWeight,
			"weight applies to the weighted and weighted-subset policies, not multivalue"},
		{"secondary on simple", Config{Records: []Record{{Secondary: true}}}, 0, FieldSecondary,
			"secondary applies to the failover policy, not simple"},
		{"location on weighted", Config{Policy: Weighted, Records: []Record{{Location: "eu"}}}, 0, FieldLocation,
			"location applies to the cidr policy, not weighted"},
		{"n on failover", Config{Policy: Failover, N: 2, Records: []Record{{}}}, -1, FieldN,
			"n applies to the multivalue and weighted-subset policies, not failover"},
		{"locations on multivalue", Config{Policy: Multivalue, Records: []Record{{}}, Locations: map[string][]netip.Prefix{"eu": nil}}, -1, FieldLocations,
			"locations applies to the cidr policy, not multivalue"},
		{"dealer on cidr", Config{Policy: CIDR, Records: []Record{{}}, Dealer: testDealer(t, 1, 1, 0)}, -1, FieldDealer,
			"shuffle dealer applies to the shuffle policy, not cidr"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := NewSet(tc.cfg)
			var fe *FieldError
			if !errors.As(err, &fe) {
				t.Fatalf("NewSet: %v, want a *FieldError", err)
			}
			if fe.Record != tc.record || fe.Field != tc.field || fe.Msg != tc.msg {
				t.Errorf("got record %d field %s %q, want record %d field %s %q", fe.Record, fe.Field, fe.Msg, tc.record, tc.field, tc.msg)
			}
		})
	}
}

// TestPolicyList checks the list of policies: names are distinct and
// parse back, each policy builds, and Index is the position in Policies.
func TestPolicyList(t *testing.T) {
	if len(Policies()) != NumPolicies {
		t.Fatalf("Policies has %d entries, NumPolicies is %d", len(Policies()), NumPolicies)
	}
	seen := map[string]bool{}
	for i, p := range Policies() {
		if p.build == nil || p.name == "" || seen[p.name] {
			t.Errorf("policy %d (%q): no build function, no name or a name seen before", i, p.name)
		}
		seen[p.name] = true
		if p.Index() != i {
			t.Errorf("%s: Index %d, want %d", p, p.Index(), i)
		}
	}
	if (*Policy)(nil).Index() != Simple.Index() || (*Policy)(nil).String() != "simple" {
		t.Error("a nil policy is not simple")
	}
	if _, err := NewSet(Config{Policy: &Policy{}, Records: []Record{{}}}); err == nil {
		t.Error("NewSet accepted a policy that is not in the list")
	}
	if out, _ := new(Set).Select(nil, Query{}, nil); len(out) != 0 {
		t.Errorf("the zero Set answered %v", out)
	}
	if got := OneRecordPolicies(); got != "weighted or failover" {
		t.Errorf("OneRecordPolicies = %q", got)
	}
}

// TestShuffleIsUniform checks the batched draws of shuffle and sample:
// every permutation of 4 records is equally likely, every record equally
// likely at every position of a shuffle of 12 (whose draws span several
// random numbers), and sample's ordered pairs are uniform.
func TestShuffleIsUniform(t *testing.T) {
	r := rand.NewPCG(11, 12)
	const n = 240000
	perms := map[[4]int]int{}
	for range n {
		a := []int{0, 1, 2, 3}
		shuffle(a, r)
		perms[[4]int(a)]++
	}
	obs := make([]int, 0, 24)
	for _, c := range perms {
		obs = append(obs, c)
	}
	if len(obs) != 24 {
		t.Fatalf("%d of 24 permutations seen", len(obs))
	}
	// 23 degrees of freedom: 49.7 is the 0.999 quantile.
	if x := chiSquare(obs, uniform(24)); x > 49.7 {
		t.Errorf("permutations of 4: chi-square %.1f > 49.7: %v", x, perms)
	}

	pos := make([]int, 12*12)
	for range n / 2 {
		a := []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}
		shuffle(a, r)
		for p, v := range a {
			pos[p*12+v]++
		}
	}
	for p := range 12 {
		// 11 degrees of freedom: 31.3 is the 0.999 quantile.
		if x := chiSquare(pos[p*12:p*12+12], uniform(12)); x > 31.3 {
			t.Errorf("shuffle of 12, position %d: chi-square %.1f > 31.3: %v", p, x, pos[p*12:p*12+12])
		}
	}

	pairs := make([]int, 10*10)
	for range n {
		a := []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}
		out := sample(a, 3, r)
		pairs[out[0]*10+out[1]]++
	}
	var offDiag []int
	for i, c := range pairs {
		if i/10 == i%10 {
			if c != 0 {
				t.Fatalf("sample repeated record %d", i/10)
			}
			continue
		}
		offDiag = append(offDiag, c)
	}
	// 89 degrees of freedom: 136.0 is the 0.999 quantile.
	if x := chiSquare(offDiag, uniform(90)); x > 136.0 {
		t.Errorf("sample of 3 of 10, first two: chi-square %.1f > 136.0", x)
	}
}

func uniform(n int) []float64 {
	p := make([]float64, n)
	for i := range p {
		p[i] = 1 / float64(n)
	}
	return p
}
