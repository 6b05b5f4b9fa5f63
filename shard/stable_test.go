package shard

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/dchest/siphash"
)

func namedWorkers(n int, weight func(i int) float64, zone func(i int) string) []Worker {
	ws := make([]Worker, n)
	for i := range ws {
		ws[i] = Worker{ID: fmt.Sprintf("w%04d", i)}
		if weight != nil {
			ws[i].Weight = weight(i)
		}
		if zone != nil {
			ws[i].Zone = zone(i)
		}
	}
	return ws
}

func mustStable(t testing.TB, cfg StableConfig) *Stable {
	t.Helper()
	if cfg.Secret == nil {
		cfg.Secret = testSecret
	}
	s, err := NewStable(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// handIDs returns the worker IDs of id's hand, as a set.
func handIDs(s *Stable, id string) map[string]bool {
	set := map[string]bool{}
	for _, i := range s.Hand(nil, id) {
		set[s.workers[i].ID] = true
	}
	return set
}

// movement compares the hands of tenants under two decks: it returns how
// many changed and fails unless every changed hand differs by exactly one
// member and involves worker moved (entering with add, leaving with remove).
func movement(t *testing.T, before, after *Stable, tenants int, moved string, add bool) int {
	t.Helper()
	changed := 0
	for i := range tenants {
		id := fmt.Sprintf("tenant-%d", i)
		a, b := handIDs(before, id), handIDs(after, id)
		var gone, came []string
		for w := range a {
			if !b[w] {
				gone = append(gone, w)
			}
		}
		for w := range b {
			if !a[w] {
				came = append(came, w)
			}
		}
		if len(gone) == 0 && len(came) == 0 {
			continue
		}
		changed++
		if len(gone) != 1 || len(came) != 1 {
			t.Fatalf("%s: hand changed by %v -> %v, want exactly one member", id, gone, came)
		}
		if add && came[0] != moved || !add && gone[0] != moved {
			t.Fatalf("%s: hand changed %v -> %v, which does not involve %s", id, gone, came, moved)
		}
	}
	return changed
}

// checkShare fails unless changed/tenants is within 5 standard deviations
// of the binomial expectation p.
func checkShare(t *testing.T, what string, changed, tenants int, p float64) {
	t.Helper()
	mean := float64(tenants) * p
	sd := math.Sqrt(float64(tenants) * p * (1 - p))
	if math.Abs(float64(changed)-mean) > 5*sd {
		t.Errorf("%s: %d of %d hands moved, expected %.0f ± %.0f (k/n)", what, changed, tenants, mean, 5*sd)
	} else {
		t.Logf("%s: %d of %d hands moved (%.3f%%), expected %.3f%%", what, changed, tenants, 100*float64(changed)/float64(tenants), 100*p)
	}
}

func TestStableMovement(t *testing.T) {
	const tenants = 20000
	for _, tc := range []struct {
		name   string
		n, k   int
		weight func(int) float64
	}{
		{name: "uniform n=100 k=4", n: 100, k: 4},
		{name: "uniform n=32 k=8", n: 32, k: 8},
		{name: "weighted n=64 k=4", n: 64, k: 4, weight: func(i int) float64 { return float64(1 + i%3) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ws := namedWorkers(tc.n, tc.weight, nil)
			base := mustStable(t, StableConfig{Workers: ws, HandSize: tc.k})
			grown := mustStable(t, StableConfig{Workers: append(slices.Clone(ws), Worker{ID: "newcomer"}), HandSize: tc.k})
			changed := movement(t, base, grown, tenants, "newcomer", true)
			if tc.weight == nil {
				checkShare(t, "add", changed, tenants, float64(tc.k)/float64(tc.n+1))
			} else if changed == 0 {
				t.Error("adding a worker moved no hand")
			}
			victim := ws[7].ID
			shrunk := mustStable(t, StableConfig{Workers: slices.Delete(slices.Clone(ws), 7, 8), HandSize: tc.k})
			changed = movement(t, base, shrunk, tenants, victim, false)
			if tc.weight == nil {
				checkShare(t, "remove", changed, tenants, float64(tc.k)/float64(tc.n))
			}
			// Exactly the hands that held the victim moved.
			held := 0
			for i := range tenants {
				if handIDs(base, fmt.Sprintf("tenant-%d", i))[victim] {
					held++
				}
			}
			if held != changed {
				t.Errorf("%d hands held %s but %d moved", held, victim, changed)
			}
		})
	}
}

func TestStableOrderIndependent(t *testing.T) {
	ws := namedWorkers(50, func(i int) float64 { return float64(1 + i%4) }, nil)
	rev := slices.Clone(ws)
	slices.Reverse(rev)
	a := mustStable(t, StableConfig{Workers: ws, HandSize: 5})
	b := mustStable(t, StableConfig{Workers: rev, HandSize: 5})
	for i := range 2000 {
		id := fmt.Sprint(i)
		ha, hb := a.Hand(nil, id), b.Hand(nil, id)
		for j := range ha {
			if ws[ha[j]].ID != rev[hb[j]].ID {
				t.Fatalf("%s: hand depends on list order: %v vs %v", id, ha, hb)
			}
		}
	}
}

// TestStableChiSquare checks at significance 0.001 that uniform hands
// spread evenly over workers and that with k = 1 a worker is chosen in
// proportion to its weight.
func TestStableChiSquare(t *testing.T) {
	t.Run("uniform per worker n=128 k=4", func(t *testing.T) {
		const n, k, draws = 128, 4, 40000
		s := mustStable(t, StableConfig{Workers: namedWorkers(n, nil, nil), HandSize: k})
		counts := make([]int, n)
		for i := range draws {
			for _, w := range s.Hand(nil, fmt.Sprintf("chi-%d", i)) {
				counts[w]++
			}
		}
		if x, c := chiSquare(counts, float64(draws*k)/n), chiSquareCritical(n-1); x > c {
			t.Errorf("chi-square %.1f > critical %.1f", x, c)
		}
	})
	t.Run("weighted k=1", func(t *testing.T) {
		const n, draws = 40, 60000
		weight := func(i int) float64 { return float64(1+i%4) / 2 }
		s := mustStable(t, StableConfig{Workers: namedWorkers(n, weight, nil), HandSize: 1})
		counts := make([]int, n)
		total := 0.0
		for i := range n {
			total += weight(i)
		}
		for i := range draws {
			counts[s.Hand(nil, fmt.Sprintf("wchi-%d", i))[0]]++
		}
		x := 0.0
		for i, c := range counts {
			e := draws * weight(i) / total
			x += (float64(c) - e) * (float64(c) - e) / e
		}
		if c := chiSquareCritical(n - 1); x > c {
			t.Errorf("weighted chi-square %.1f > critical %.1f", x, c)
		}
	})
}

func TestStableLattice(t *testing.T) {
	zone := func(i int) string { return []string{"eu-a", "eu-b", "eu-c"}[i%3] }
	ws := namedWorkers(60, nil, zone)
	s := mustStable(t, StableConfig{Workers: ws, HandSize: 4, Zones: true})
	if s.HandSize() != 6 || !slices.Equal(s.Zones(), []string{"eu-a", "eu-b", "eu-c"}) {
		t.Fatalf("hand size %d zones %v, want 6 over 3 zones", s.HandSize(), s.Zones())
	}
	firstZone := map[string]int{}
	for i := range 3000 {
		id := fmt.Sprintf("lat-%d", i)
		h := s.Hand(nil, id)
		checkHand(t, h, len(ws), 6)
		per := map[string]int{}
		for _, w := range h {
			per[ws[w].Zone]++
		}
		for _, z := range s.Zones() {
			if per[z] != 2 {
				t.Fatalf("%s: hand %v takes %d from zone %s, want 2", id, h, per[z], z)
			}
		}
		firstZone[ws[h[0]].Zone]++
		// Losing zone eu-b still leaves four healthy members.
		c := PickFrom(nil, h, nil, 1, HealthFunc(func(w int) bool { return ws[w].Zone != "eu-b" }))
		if c.Status != StatusHealthy || len(c.Workers) != 4 {
			t.Fatalf("%s: zone loss gives %+v", id, c)
		}
	}
	for z, c := range firstZone {
		if c < 800 {
			t.Errorf("zone %s is first preference of only %d of 3000 hands", z, c)
		}
	}
	// Adding a worker to one zone moves only that zone's members, by one.
	grown := mustStable(t, StableConfig{Workers: append(slices.Clone(ws), Worker{ID: "newcomer", Zone: "eu-a"}), HandSize: 4, Zones: true})
	if changed := movement(t, s, grown, 5000, "newcomer", true); changed == 0 {
		t.Error("adding a worker to eu-a moved no hand")
	}
}

func TestStableBadConfig(t *testing.T) {
	ws := namedWorkers(10, nil, nil)
	for _, tc := range []struct {
		name string
		cfg  StableConfig
		want string
	}{
		{"empty list", StableConfig{Secret: testSecret, HandSize: 1}, "worker list is empty"},
		{"bad secret", StableConfig{Secret: []byte("x"), Workers: ws, HandSize: 1}, "secret must be 16 bytes"},
		{"k > n", StableConfig{Secret: testSecret, Workers: ws, HandSize: 11}, "hand size 11 exceeds the 10 workers"},
		{"k < 1", StableConfig{Secret: testSecret, Workers: ws, HandSize: 0}, "hand size 0 must be at least 1"},
		{"duplicate", StableConfig{Secret: testSecret, Workers: append(slices.Clone(ws), Worker{ID: "w0003"}), HandSize: 2}, `duplicate worker id "w0003"`},
		{"empty id", StableConfig{Secret: testSecret, Workers: append(slices.Clone(ws), Worker{}), HandSize: 2}, "empty id"},
		{"negative weight", StableConfig{Secret: testSecret, Workers: []Worker{{ID: "a", Weight: -1}}, HandSize: 1}, "weight -1"},
		{"NaN weight", StableConfig{Secret: testSecret, Workers: []Worker{{ID: "a", Weight: math.NaN()}}, HandSize: 1}, "weight NaN"},
		{"infinite weight", StableConfig{Secret: testSecret, Workers: []Worker{{ID: "a", Weight: math.Inf(1)}}, HandSize: 1}, "weight +Inf"},
		{"no zone", StableConfig{Secret: testSecret, Workers: ws, HandSize: 2, Zones: true}, "has no zone"},
		{"small zone", StableConfig{Secret: testSecret, Workers: []Worker{{ID: "a", Zone: "x"}, {ID: "b", Zone: "x"}, {ID: "c", Zone: "y"}}, HandSize: 3, Zones: true}, `zone "y" has 1 workers, fewer than the 2`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := NewStable(tc.cfg)
			if err == nil || s != nil || !strings.HasPrefix(err.Error(), "shard: ") || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("NewStable: %v, %v; want error containing %q", s, err, tc.want)
			}
		})
	}
}

func TestPortableLog(t *testing.T) {
	for _, x := range []float64{1, 0.5, 0.999999, 1e-300, 0x1p-53, 0.7071, 0.1, 0.3333} {
		got, want := portableLog(x), math.Log(x)
		if math.Abs(got-want) > 4e-16*math.Max(1, math.Abs(want)) {
			t.Errorf("portableLog(%g) = %.17g, math.Log %.17g", x, got, want)
		}
	}
}

type goldenStable struct {
	Zones bool     `json:"zones"`
	K     int      `json:"k"`
	ID    string   `json:"id"`
	Hand  []string `json:"hand"`
}

// TestStableGolden pins stable and lattice hands (by worker ID) across
// versions and architectures; -update rewrites testdata/stable.golden.json.
func TestStableGolden(t *testing.T) {
	path := filepath.Join("testdata", "stable.golden.json")
	ws := namedWorkers(300, func(i int) float64 { return []float64{1, 1, 2.5, 0.25}[i%4] }, func(i int) string { return fmt.Sprintf("z%d", i%4) })
	build := func(zones bool, k int) *Stable {
		return mustStable(t, StableConfig{Workers: ws, HandSize: k, Zones: zones})
	}
	ids := func(s *Stable, id string) []string {
		var out []string
		for _, i := range s.Hand(nil, id) {
			out = append(out, ws[i].ID)
		}
		return out
	}
	if *update {
		var out []byte
		for _, zones := range []bool{false, true} {
			for _, k := range []int{1, 4, 6} {
				s := build(zones, k)
				for i := range 8 {
					id := fmt.Sprintf("golden-%d", i)
					line, _ := json.Marshal(goldenStable{Zones: zones, K: k, ID: id, Hand: ids(s, id)})
					out = append(append(out, map[bool]string{true: "[\n", false: ",\n"}[len(out) == 0]...), line...)
				}
			}
		}
		if err := os.WriteFile(path, append(out, "\n]\n"...), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var cases []goldenStable
	if err := json.Unmarshal(b, &cases); err != nil {
		t.Fatal(err)
	}
	if len(cases) != 48 {
		t.Fatalf("%d golden cases, want 48", len(cases))
	}
	for _, c := range cases {
		if got := ids(build(c.Zones, c.K), c.ID); !slices.Equal(got, c.Hand) {
			t.Errorf("zones=%v k=%d id %s: %v, golden %v", c.Zones, c.K, c.ID, got, c.Hand)
		}
	}
}

// TestStableMatchesBruteForce checks the pruned selection against scoring
// every worker and sorting.
func TestStableMatchesBruteForce(t *testing.T) {
	for _, weight := range []func(int) float64{nil, func(i int) float64 { return math.Pow(1.7, float64(i%9)) }} {
		s := mustStable(t, StableConfig{Workers: namedWorkers(500, weight, nil), HandSize: 7})
		for i := range 500 {
			id := fmt.Sprintf("bf-%d", i)
			th := siphashString(s, id)
			all := make([]candidate, len(s.workers))
			for w := range all {
				u := mix64(th ^ s.all.wh[w])
				all[w] = candidate{u: u, i: int32(w)}
				if !s.uniform {
					all[w].key = -portableLog((float64(u>>11)+0.5)/(1<<53)) / s.all.weight[w]
				}
			}
			slices.SortFunc(all, func(a, b candidate) int {
				if s.better(&s.all, a, b) {
					return -1
				}
				return 1
			})
			var want []int
			for _, c := range all[:7] {
				want = append(want, int(c.i))
			}
			if got := s.Hand(nil, id); !slices.Equal(got, want) {
				t.Fatalf("%s: pruned %v, brute force %v", id, got, want)
			}
		}
	}
}

func siphashString(s *Stable, id string) uint64 {
	return siphash.Hash(s.k0, s.k1, []byte(id))
}

// TestStableOverlapIsHypergeometric checks that the hands of different
// tenants are independent: the overlap of consecutive tenants' hands
// follows the exact hypergeometric distribution (chi-square at 0.001,
// overlaps of 2 and more pooled so that every cell expects > 5).
func TestStableOverlapIsHypergeometric(t *testing.T) {
	const n, k, pairs = 64, 4, 30000
	for _, weight := range []func(int) float64{nil, func(int) float64 { return 2 }} {
		s := mustStable(t, StableConfig{Workers: namedWorkers(n, weight, nil), HandSize: k})
		counts := make([]int, 3)
		prev := handIDs(s, "pair-0")
		for i := 1; i <= pairs; i++ {
			cur := handIDs(s, fmt.Sprint("pair-", i))
			o := 0
			for w := range cur {
				if prev[w] {
					o++
				}
			}
			counts[min(o, 2)]++
			prev = cur
		}
		p, _ := Overlap(n, k)
		x := 0.0
		for o := range 3 {
			e := ratFloat(p[o]) * pairs
			if o == 2 {
				e = (1 - ratFloat(p[0]) - ratFloat(p[1])) * pairs
			}
			x += (float64(counts[o]) - e) * (float64(counts[o]) - e) / e
		}
		// Critical value of chi-square with 2 degrees of freedom at 0.001.
		if x > 13.82 {
			t.Errorf("overlap counts %v: chi-square %.1f > 13.82", counts, x)
		}
	}
}
