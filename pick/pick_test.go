package pick

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestTwoChoiceSharesMatchDraws: the exact shares agree with a million
// seeded draws of TwoChoices, within 5 standard errors, for loads with
// ties, without ties and all equal.
func TestTwoChoiceSharesMatchDraws(t *testing.T) {
	cases := []struct {
		name  string
		loads []int64
	}{
		{"all equal", []int64{5, 5, 5, 5, 5, 5}},
		{"distinct", []int64{1, 4, 2, 8, 5}},
		{"ties", []int64{3, 3, 1, 7, 7, 3}},
		{"two", []int64{2, 2}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			n := len(tc.loads)
			want := make([]float64, n)
			TwoChoiceShares(want, tc.loads)
			sum := 0.0
			for _, w := range want {
				sum += w
			}
			if math.Abs(sum-1) > 1e-12 {
				t.Fatalf("shares add up to %v", sum)
			}
			r := rand.New(rand.NewPCG(1, 2))
			const draws = 1_000_000
			got := make([]float64, n)
			for range draws {
				got[TwoChoices(n, func(i int) int64 { return tc.loads[i] }, r.IntN)]++
			}
			for i := range got {
				p := got[i] / draws
				se := math.Sqrt(want[i]*(1-want[i])/draws) + 1e-9
				if math.Abs(p-want[i]) > 5*se {
					t.Errorf("index %d: drawn %.4f, exact %.4f", i, p, want[i])
				}
			}
		})
	}
}

// TestEqualLoadsSpreadEvenly: at equal loads every candidate is equally
// likely, whatever its index (a tie broken by index would give the last
// nothing).
func TestEqualLoadsSpreadEvenly(t *testing.T) {
	dst := make([]float64, 6)
	TwoChoiceShares(dst, []float64{0.5, 0.5, 0.5, 0.5, 0.5, 0.5})
	for i, p := range dst {
		if math.Abs(p-1.0/6) > 1e-12 {
			t.Fatalf("index %d gets %v, want 1/6", i, p)
		}
	}
}

func TestTwoChoicesEdges(t *testing.T) {
	never := func(int) int { t.Fatal("drew for fewer than two"); return 0 }
	if got := TwoChoices(1, func(int) int { return 0 }, never); got != 0 {
		t.Fatalf("one candidate: %d", got)
	}
	if got := TwoChoices(0, func(int) int { return 0 }, never); got != -1 {
		t.Fatalf("no candidate: %d", got)
	}
}
