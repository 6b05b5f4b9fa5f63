package shard

import (
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"math/big"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/dchest/siphash"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

var testSecret = []byte("corral-shard-key") // 16 bytes

func mustDealer(t testing.TB, n, k, spill int) *Dealer {
	t.Helper()
	d, err := NewDealer(DealerConfig{Secret: testSecret, Workers: n, HandSize: k, Spill: spill})
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// TestDealerExactUniformityByEnumeration runs the dealer's digit expansion,
// rejection test and worker mapping over every seed of a fraction narrowed
// to w bits (F = x/2^w for x in [0, 2^w), with Lemire's threshold for 2^w)
// and checks that every ordered hand is produced exactly floor(2^w/P) times
// and every unordered hand exactly k! times as often.
func TestDealerExactUniformityByEnumeration(t *testing.T) {
	for _, tc := range []struct{ n, k, w int }{
		{n: 8, k: 2, w: 16},
		{n: 5, k: 5, w: 12},
		{n: 7, k: 3, w: 17},
		{n: 13, k: 4, w: 18},
		{n: 3, k: 1, w: 10},
	} {
		t.Run(fmt.Sprintf("n=%d,k=%d,w=%d", tc.n, tc.k, tc.w), func(t *testing.T) {
			p := orderedCount(tc.n, tc.k).Uint64()
			seeds := uint64(1) << tc.w
			thr := (seeds % p) << (64 - tc.w)
			ordered := map[string]uint64{}
			sets := map[string]uint64{}
			for x := range seeds {
				var taken [MaxHand]int32
				hand, ok := tryDraw(make([]int, 0, tc.k), x<<(64-tc.w), 0, tc.n, tc.k, thr, 0, &taken, 0)
				if !ok {
					if len(hand) != 0 {
						t.Fatalf("seed %d rejected but returned hand %v", x, hand)
					}
					continue
				}
				ordered[fmt.Sprint(hand)]++
				slices.Sort(hand)
				sets[fmt.Sprint(hand)]++
			}
			if uint64(len(ordered)) != p {
				t.Fatalf("%d distinct ordered hands, want %d", len(ordered), p)
			}
			for h, c := range ordered {
				if c != seeds/p {
					t.Fatalf("ordered hand %s drawn %d times, want %d", h, c, seeds/p)
				}
			}
			if want := Hands(tc.n, tc.k).Uint64(); uint64(len(sets)) != want {
				t.Fatalf("%d distinct hands, want %d", len(sets), want)
			}
			fact := new(big.Int).MulRange(1, int64(tc.k)).Uint64()
			for h, c := range sets {
				if c != fact*(seeds/p) {
					t.Fatalf("hand %s drawn %d times, want %d", h, c, fact*(seeds/p))
				}
			}
		})
	}
}

// TestDealerRejectionRehashes feeds a seed that fails Lemire's test and
// checks the deal still returns a valid hand.
func TestDealerRejectionRehashes(t *testing.T) {
	d := mustDealer(t, 7, 3, 0)
	var taken0 [MaxHand]int32
	if _, ok := tryDraw(nil, 0, 0, 7, 3, d.handHi, d.handLo, &taken0, 0); ok {
		t.Fatal("seed 0 must be rejected (2^128 mod 210 > 0)")
	}
	var taken [MaxHand]int32
	h := d.draw(nil, 0, 0, 7, 3, d.handHi, d.handLo, &taken, 0)
	checkHand(t, h, 7, 3)
}

func checkHand(t testing.TB, h []int, n, k int) {
	t.Helper()
	if len(h) != k {
		t.Fatalf("hand %v has %d members, want %d", h, len(h), k)
	}
	seen := map[int]bool{}
	for _, w := range h {
		if w < 0 || w >= n || seen[w] {
			t.Fatalf("hand %v: member %d out of range or repeated (n=%d)", h, w, n)
		}
		seen[w] = true
	}
}

func TestDealerHandsAreValidAndDeterministic(t *testing.T) {
	for _, tc := range []struct{ n, k, spill int }{
		{1, 1, 0}, {2, 2, 0}, {8, 2, 3}, {2048, 4, 4}, {16777217, 4, 0}, {40, 8, 8}, {4099, 8, 0},
	} {
		d := mustDealer(t, tc.n, tc.k, tc.spill)
		for i := range 2000 {
			id := fmt.Sprintf("tenant-%d", i)
			h := d.Hand(nil, id)
			checkHand(t, h, tc.n, tc.k)
			if hb := d.HandBytes(make([]int, 3), []byte(id)); !slices.Equal(h, hb) {
				t.Fatalf("Hand %v != HandBytes %v", h, hb)
			}
			sp := d.Spill(nil, id)
			checkHand(t, append(slices.Clone(h), sp...), tc.n, tc.k+tc.spill)
		}
	}
}

// chiSquareCritical returns the upper critical value of the chi-square
// distribution with df degrees of freedom at significance 0.001 (z = 3.0902)
// by the Wilson-Hilferty approximation, accurate to well under 1 % for
// df >= 20.
func chiSquareCritical(df int) float64 {
	const z = 3.0902
	f := float64(df)
	a := 2 / (9 * f)
	return f * math.Pow(1-a+z*math.Sqrt(a), 3)
}

func chiSquare(counts []int, expect float64) float64 {
	s := 0.0
	for _, c := range counts {
		d := float64(c) - expect
		s += d * d / expect
	}
	return s
}

// TestDealerChiSquare checks, at significance 0.001 with fixed ids and
// secret, that workers, unordered hands and preference positions are
// uniform.
func TestDealerChiSquare(t *testing.T) {
	t.Run("per worker n=256 k=4", func(t *testing.T) {
		const n, k, draws = 256, 4, 100000
		d := mustDealer(t, n, k, 0)
		counts := make([]int, n)
		first := make([]int, n)
		var buf [k]int
		for i := range draws {
			h := d.Hand(buf[:0], fmt.Sprintf("per-worker-%d", i))
			for _, w := range h {
				counts[w]++
			}
			first[h[0]]++
		}
		if x, c := chiSquare(counts, float64(draws*k)/n), chiSquareCritical(n-1); x > c {
			t.Errorf("per-worker chi-square %.1f > critical %.1f", x, c)
		}
		if x, c := chiSquare(first, float64(draws)/n), chiSquareCritical(n-1); x > c {
			t.Errorf("first-preference chi-square %.1f > critical %.1f", x, c)
		}
	})
	t.Run("per hand n=10 k=3", func(t *testing.T) {
		const n, k, draws = 10, 3, 120000
		d := mustDealer(t, n, k, 0)
		index := map[[k]int]int{}
		counts := make([]int, 0, 120)
		var buf [k]int
		for i := range draws {
			h := d.Hand(buf[:0], fmt.Sprintf("per-hand-%d", i))
			slices.Sort(h)
			key := [k]int(h)
			j, ok := index[key]
			if !ok {
				j = len(counts)
				index[key] = j
				counts = append(counts, 0)
			}
			counts[j]++
		}
		if len(counts) != 120 {
			t.Fatalf("saw %d distinct hands, want all 120", len(counts))
		}
		if x, c := chiSquare(counts, float64(draws)/120), chiSquareCritical(119); x > c {
			t.Errorf("per-hand chi-square %.1f > critical %.1f", x, c)
		}
	})
}

func TestDealerZeroAllocs(t *testing.T) {
	d := mustDealer(t, 2048, 4, 4)
	dst := make([]int, 0, 8)
	id := "tenant-with-a-longer-than-thirty-two-byte-identifier"
	if a := testing.AllocsPerRun(200, func() { dst = d.Hand(dst, id) }); a != 0 {
		t.Errorf("Hand allocates %.1f times per call", a)
	}
	down := HealthFunc(func(w int) bool { return w%2 == 0 })
	if a := testing.AllocsPerRun(200, func() { dst = d.Pick(dst, id, down).Workers }); a != 0 {
		t.Errorf("Pick allocates %.1f times per call", a)
	}
}

func TestDealerBadConfig(t *testing.T) {
	good := DealerConfig{Secret: testSecret, Workers: 2048, HandSize: 4}
	for _, tc := range []struct {
		name string
		edit func(*DealerConfig)
		want string
	}{
		{"short secret", func(c *DealerConfig) { c.Secret = []byte("short") }, "secret must be 16 bytes"},
		{"no secret", func(c *DealerConfig) { c.Secret = nil }, "secret must be 16 bytes"},
		{"k > n", func(c *DealerConfig) { c.HandSize = 2049 }, "hand size 2049 exceeds the 2048 workers"},
		{"k < 1", func(c *DealerConfig) { c.HandSize = 0 }, "hand size 0 must be at least 1"},
		{"n < 1", func(c *DealerConfig) { c.Workers = 0 }, "workers 0 must be at least 1"},
		{"negative spill", func(c *DealerConfig) { c.Spill = -1 }, "spill -1 is negative"},
		{"spill beyond deck", func(c *DealerConfig) { c.Workers, c.Spill = 6, 3 }, "plus spill 3 exceeds the 6 workers"},
		{"hand too big", func(c *DealerConfig) { c.Workers, c.HandSize, c.Spill = 100, 40, 30 }, "exceeds the maximum of 64"},
		{"min healthy", func(c *DealerConfig) { c.MinHealthy = 5 }, "min healthy 5"},
		{"entropy k=4", func(c *DealerConfig) { c.Workers = 16777218 }, "beyond the dealer's entropy bound of 96 bits"},
		{"entropy k=8", func(c *DealerConfig) { c.Workers, c.HandSize = 4100, 8 }, "beyond the dealer's entropy bound"},
		{"entropy of spill", func(c *DealerConfig) { c.Workers, c.HandSize, c.Spill = 100000, 1, 8 }, "spill 8 out of 99999 workers"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := good
			c.Secret = slices.Clone(good.Secret)
			tc.edit(&c)
			d, err := NewDealer(c)
			if err == nil || d != nil {
				t.Fatalf("NewDealer(%+v) = %v, %v; want an error", c, d, err)
			}
			if !strings.HasPrefix(err.Error(), "shard: ") || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %q, want it to contain %q", err, tc.want)
			}
		})
	}
}

func TestParseSecret(t *testing.T) {
	b, err := ParseSecret("000102030405060708090A0B0C0D0E0F")
	if err != nil || len(b) != 16 || b[15] != 15 {
		t.Fatalf("ParseSecret = %x, %v", b, err)
	}
	for _, bad := range []string{"", "0011", "zz0102030405060708090a0b0c0d0e0f", "0x0102030405060708090a0b0c0d0e0f"} {
		if _, err := ParseSecret(bad); err == nil || !strings.HasPrefix(err.Error(), "shard: ") {
			t.Errorf("ParseSecret(%q) error %v", bad, err)
		}
	}
}

// goldenDeal is one line of testdata/dealer.golden.json.
type goldenDeal struct {
	Secret string `json:"secret"`
	ID     string `json:"id"`
	N      int    `json:"n"`
	K      int    `json:"k"`
	Spill  int    `json:"spill"`
	Hand   []int  `json:"hand"`
	Spills []int  `json:"spill_workers"`
}

// TestDealerGolden pins hands across processes, versions and CPU
// architectures. Run with -update to rewrite testdata/dealer.golden.json
// (only when the construction is changed on purpose).
func TestDealerGolden(t *testing.T) {
	path := filepath.Join("testdata", "dealer.golden.json")
	var cases []goldenDeal
	if *update {
		for _, shape := range []struct{ n, k, spill int }{{8, 2, 2}, {2048, 4, 4}, {100, 7, 0}, {16777217, 4, 1}, {4099, 8, 0}} {
			for _, secret := range []string{"000102030405060708090a0b0c0d0e0f", "ffeeddccbbaa99887766554433221100"} {
				for _, id := range []string{"", "a", "example.com", "tenant-000042", strings.Repeat("x", 100)} {
					s, _ := ParseSecret(secret)
					d, err := NewDealer(DealerConfig{Secret: s, Workers: shape.n, HandSize: shape.k, Spill: shape.spill})
					if err != nil {
						t.Fatal(err)
					}
					cases = append(cases, goldenDeal{Secret: secret, ID: id, N: shape.n, K: shape.k, Spill: shape.spill,
						Hand: d.Hand(nil, id), Spills: d.Spill(nil, id)})
				}
			}
		}
		var out []byte
		for i, c := range cases {
			line, _ := json.Marshal(c)
			out = append(append(out, map[bool]string{true: "[\n", false: ",\n"}[i == 0]...), line...)
		}
		if err := os.WriteFile(path, append(out, "\n]\n"...), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &cases); err != nil {
		t.Fatal(err)
	}
	if len(cases) < 50 {
		t.Fatalf("only %d golden cases", len(cases))
	}
	for _, c := range cases {
		s, err := ParseSecret(c.Secret)
		if err != nil {
			t.Fatal(err)
		}
		d, err := NewDealer(DealerConfig{Secret: s, Workers: c.N, HandSize: c.K, Spill: c.Spill})
		if err != nil {
			t.Fatal(err)
		}
		if h := d.Hand(nil, c.ID); !slices.Equal(h, c.Hand) {
			t.Errorf("secret %s id %q n=%d k=%d: hand %v, golden %v", c.Secret, c.ID, c.N, c.K, h, c.Hand)
		}
		if sp := d.Spill(nil, c.ID); !slices.Equal(sp, c.Spills) && !(len(sp) == 0 && len(c.Spills) == 0) {
			t.Errorf("secret %s id %q n=%d k=%d: spill %v, golden %v", c.Secret, c.ID, c.N, c.K, sp, c.Spills)
		}
	}
}

// TestDealerMatchesBigIntReference recomputes hands with math/big straight
// from the definition (R = floor(F·P/2^128) accepted when F·P mod 2^128 >=
// 2^128 mod P, mixed-radix digits of R, d-th smallest free worker) and
// compares them with the dealer's fixed-point arithmetic.
func TestDealerMatchesBigIntReference(t *testing.T) {
	for _, shape := range []struct{ n, k int }{{2048, 4}, {8, 2}, {16777217, 4}, {4099, 8}, {1000, 9}} {
		d := mustDealer(t, shape.n, shape.k, 0)
		p := orderedCount(shape.n, shape.k)
		two128 := new(big.Int).Lsh(big.NewInt(1), 128)
		thr := new(big.Int).Mod(two128, p)
		for i := range 300 {
			id := fmt.Sprintf("ref-%d", i)
			hi, lo := siphash.Hash128(d.k0, d.k1, []byte(id))
			f := new(big.Int).Lsh(new(big.Int).SetUint64(hi), 64)
			f.Or(f, new(big.Int).SetUint64(lo))
			m := new(big.Int).Mul(f, p)
			if new(big.Int).Mod(m, two128).Cmp(thr) < 0 {
				continue // rejected: the rehash path is covered elsewhere
			}
			r := new(big.Int).Rsh(m, 128)
			// The most significant digit has radix n, the least n-k+1.
			digits := make([]int64, shape.k)
			for j := shape.k - 1; j >= 0; j-- {
				radix := big.NewInt(int64(shape.n - j))
				mod := new(big.Int)
				r.QuoRem(r, radix, mod)
				digits[j] = mod.Int64()
			}
			var want []int
			for _, dg := range digits {
				// The dg-th free worker w is the fixed point of
				// w = dg + |{taken <= w}|.
				w := int(dg)
				for {
					c := 0
					for _, x := range want {
						if x <= w {
							c++
						}
					}
					if int(dg)+c == w {
						break
					}
					w = int(dg) + c
				}
				want = append(want, w)
			}
			if got := d.Hand(nil, id); !slices.Equal(got, want) {
				t.Fatalf("n=%d k=%d id %q: dealer %v, reference %v", shape.n, shape.k, id, got, want)
			}
		}
	}
}
