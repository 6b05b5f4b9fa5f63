package pick

import "cmp"

// TwoChoices draws two distinct indices of [0, n) with intn (a uniform
// integer in [0, k) for k > 0) and returns the one whose load is lower,
// the first drawn on a tie. n of 1 returns 0 without a draw; n below 1
// returns -1. load is called at most twice.
func TwoChoices[L cmp.Ordered](n int, load func(i int) L, intn func(k int) int) int {
	switch {
	case n < 1:
		return -1
	case n == 1:
		return 0
	}
	i := intn(n)
	j := intn(n - 1)
	if j >= i {
		j++
	}
	if load(j) < load(i) {
		return j
	}
	return i
}

// TwoChoiceShares writes into dst (of len(loads)) the probability that
// TwoChoices over loads returns each index: index i wins every pair it
// forms with a more loaded index and half of the pairs it forms with an
// equally loaded one, each of the n(n-1)/2 pairs being equally likely.
// With one candidate dst[0] is 1; with none nothing is written. It costs
// O(n^2).
func TwoChoiceShares[L cmp.Ordered](dst []float64, loads []L) {
	n := len(loads)
	switch n {
	case 0:
		return
	case 1:
		dst[0] = 1
		return
	}
	pairs := float64(n) * float64(n-1) / 2
	for i, li := range loads {
		wins := 0.0
		for j, lj := range loads {
			switch {
			case j == i:
			case li < lj:
				wins++
			case li == lj:
				wins += 0.5
			}
		}
		dst[i] = wins / pairs
	}
}
