package shard

import (
	"fmt"
	"math"
	"math/big"
	"strings"
	"testing"
)

// pct formats a probability as a percentage with d decimals.
func pct(r *big.Rat, d int) string {
	return new(big.Rat).Mul(r, big.NewRat(100, 1)).FloatString(d)
}

func TestWorkedNumbers(t *testing.T) {
	if h := Hands(8, 2); h.Int64() != 28 {
		t.Errorf("C(8,2) = %s, want 28", h)
	}
	p, err := Overlap(8, 2)
	if err != nil {
		t.Fatal(err)
	}
	for o, want := range []string{"53.6", "42.9", "3.6"} {
		if got := pct(p[o], 1); got != want {
			t.Errorf("n=8 k=2 P(O=%d) = %s %%, want %s %%", o, got, want)
		}
	}
	if p[0].Cmp(big.NewRat(15, 28)) != 0 || p[1].Cmp(big.NewRat(12, 28)) != 0 || p[2].Cmp(big.NewRat(1, 28)) != 0 {
		t.Errorf("n=8 k=2 exact distribution %v, want 15/28 12/28 1/28", p)
	}
	if h := Hands(2048, 4).String(); h != "730862190080" {
		t.Errorf("C(2048,4) = %s, want 730862190080", h)
	}
	p, err = Overlap(2048, 4)
	if err != nil {
		t.Fatal(err)
	}
	if got := pct(p[0], 2); got != "99.22" {
		t.Errorf("n=2048 k=4 P(O=0) = %s %%, want 99.22 %%", got)
	}
	sum := new(big.Rat)
	for _, r := range p {
		sum.Add(sum, r)
	}
	if sum.Cmp(big.NewRat(1, 1)) != 0 {
		t.Errorf("distribution sums to %s", sum)
	}
	if c, err := Capacity(2048, 4, 2); err != nil || c.String() != "357389824" {
		t.Errorf("capacity(2048,4,2) = %v, %v; want 357389824", c, err)
	}
	if eo, _ := ExpectedOverlap(2048, 4); eo.Cmp(big.NewRat(16, 2048)) != 0 {
		t.Errorf("expected overlap %s, want 1/128", eo)
	}
	// The mean of the exact distribution equals k²/n.
	mean := new(big.Rat)
	for o, r := range p {
		mean.Add(mean, new(big.Rat).Mul(r, big.NewRat(int64(o), 1)))
	}
	if mean.Cmp(big.NewRat(1, 128)) != 0 {
		t.Errorf("mean overlap %s, want 1/128", mean)
	}
	if b := EntropyBits(2048, 4); math.Abs(b-math.Log2(730862190080)) > 1e-9 {
		t.Errorf("entropy bits %v", b)
	}
	if b := EntropyBits(100000, 50); b < 600 || math.IsInf(b, 0) || math.IsNaN(b) {
		t.Errorf("entropy of a huge deck %v", b)
	}
}

func TestBlastRadius(t *testing.T) {
	b, err := BlastRadius(8, 2, 1)
	if err != nil {
		t.Fatal(err)
	}
	if b.Degraded.Cmp(big.NewRat(13, 28)) != 0 || b.Down.Cmp(big.NewRat(1, 28)) != 0 || b.BelowMin.Cmp(big.NewRat(1, 28)) != 0 {
		t.Errorf("n=8 k=2: %v %v %v", b.Degraded, b.Down, b.BelowMin)
	}
	b, err = BlastRadius(8, 2, 2)
	if err != nil || b.BelowMin.Cmp(big.NewRat(13, 28)) != 0 {
		t.Errorf("min 2: below %v (%v), want 13/28", b.BelowMin, err)
	}
	// Monte Carlo cross-check with the dealer: fail one tenant's hand and
	// count how many other tenants are degraded.
	d := mustDealer(t, 64, 4, 0)
	failed := map[int]bool{}
	for _, w := range d.Hand(nil, "poison") {
		failed[w] = true
	}
	const tenants = 100000
	degraded := 0
	for i := range tenants {
		for _, w := range d.Hand(nil, fmt.Sprint("o", i)) {
			if failed[w] {
				degraded++
				break
			}
		}
	}
	b, _ = BlastRadius(64, 4, 1)
	want := ratFloat(b.Degraded)
	sd := math.Sqrt(want * (1 - want) / tenants)
	if got := float64(degraded) / tenants; math.Abs(got-want) > 5*sd {
		t.Errorf("simulated degraded share %.4f, exact %.4f", got, want)
	}
	if _, err := BlastRadius(8, 2, 3); err == nil || !strings.HasPrefix(err.Error(), "shard: ") {
		t.Errorf("min healthy 3 > k: %v", err)
	}
}

func TestMathsBadInput(t *testing.T) {
	if Hands(3, 4).Sign() != 0 || Hands(-1, 0).Sign() != 0 {
		t.Error("invalid Hands not 0")
	}
	for _, f := range []func() error{
		func() error { _, err := Overlap(3, 4); return err },
		func() error { _, err := Overlap(0, 0); return err },
		func() error { _, err := ExpectedOverlap(5, 0); return err },
		func() error { _, err := Capacity(10, 3, 3); return err },
		func() error { _, err := Capacity(10, 3, -1); return err },
		func() error { _, err := Analyze(AnalyzeConfig{Workers: 10, HandSize: 11, MaxOverlap: -1}); return err },
		func() error {
			_, err := Analyze(AnalyzeConfig{Workers: 10, HandSize: 4, MaxOverlap: -1, Zones: 11})
			return err
		},
		func() error {
			_, err := Analyze(AnalyzeConfig{Workers: 10, HandSize: 10, MaxOverlap: -1, Zones: 3})
			return err
		},
	} {
		if err := f(); err == nil || !strings.HasPrefix(err.Error(), "shard: ") {
			t.Errorf("error %v", err)
		}
	}
}

func TestAnalyze(t *testing.T) {
	a, err := Analyze(AnalyzeConfig{Workers: 2048, HandSize: 4, MaxOverlap: 2, Zones: 4})
	if err != nil {
		t.Fatal(err)
	}
	if a.Hands != "730862190080" || a.Stored.Capacity != "357389824" || a.Stored.GuaranteedHealthy != 2 || !a.DealerOK {
		t.Errorf("analysis %+v %+v", a, a.Stored)
	}
	if math.Abs(a.Overlap[0].Probability-0.99220) > 5e-5 || math.Abs(a.DegradedShare-(1-a.Overlap[0].Probability)) > 1e-15 {
		t.Errorf("overlap %+v degraded %v", a.Overlap, a.DegradedShare)
	}
	l := a.Lattice
	if l.PerZone != 1 || l.HandSize != 4 || l.SurvivorsAfterZoneLoss != 3 || l.Hands != "68719476736" || len(l.Overlap) != 5 {
		t.Errorf("lattice %+v", l)
	}
	// One worker from each of 4 zones of 512: overlap is Binomial(4, 1/512).
	if want := math.Pow(511.0/512, 4); math.Abs(l.Overlap[0].Probability-want) > 1e-15 {
		t.Errorf("lattice P(O=0) %v, want %v", l.Overlap[0].Probability, want)
	}
	if math.Abs(l.ExpectedOverlap-4.0/512) > 1e-15 || math.Abs(l.DownShare-math.Pow(512, -4)) > 1e-25 {
		t.Errorf("lattice expected overlap %v down %v", l.ExpectedOverlap, l.DownShare)
	}
}
