package backoff

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// TestRoundIsAPermutationWithLastAtTheEnd: every round holds each
// endpoint once, the previous one last, and each of the others first at
// times, about equally often.
func TestRoundIsAPermutationWithLastAtTheEnd(t *testing.T) {
	rnd := rand.New(rand.NewPCG(1, 2))
	const n, last, rounds = 5, 2, 4000
	firsts := make([]int, n)
	for range rounds {
		got := Round(n, last, rnd)
		s := slices.Sorted(slices.Values(got))
		if !slices.Equal(s, []int{0, 1, 2, 3, 4}) {
			t.Fatalf("Round(%d, %d) = %v: not a permutation", n, last, got)
		}
		if got[n-1] != last {
			t.Fatalf("Round(%d, %d) = %v: the previous endpoint is not last", n, last, got)
		}
		firsts[got[0]]++
	}
	if firsts[last] != 0 {
		t.Fatalf("the previous endpoint came first %d times", firsts[last])
	}
	for i, c := range firsts {
		if i == last {
			continue
		}
		// 1,000 expected of each; 5 sigma is about 137.
		if c < 850 || c > 1150 {
			t.Fatalf("endpoint %d first in %d of %d rounds, want about %d: %v", i, c, rounds, rounds/(n-1), firsts)
		}
	}
}

// TestRoundWithoutLast: no previous endpoint (-1, or one the new
// resolution does not hold) leaves every endpoint in the random order.
func TestRoundWithoutLast(t *testing.T) {
	rnd := rand.New(rand.NewPCG(3, 4))
	for _, last := range []int{-1, 7} {
		lasts := map[int]int{}
		for range 300 {
			got := Round(3, last, rnd)
			if len(got) != 3 {
				t.Fatalf("Round(3, %d) = %v, want 3 endpoints", last, got)
			}
			lasts[got[2]]++
		}
		if len(lasts) != 3 {
			t.Fatalf("Round(3, %d): last endpoints %v, want each of the 3 at times", last, lasts)
		}
	}
	if got := Round(1, 0, nil); !slices.Equal(got, []int{0}) {
		t.Fatalf("Round(1, 0) = %v, want [0]", got)
	}
	if got := Round(0, -1, nil); len(got) != 0 {
		t.Fatalf("Round(0, -1) = %v, want none", got)
	}
}

// TestTryNext: a round goes on only after a retryable failure without a
// hint.
func TestTryNext(t *testing.T) {
	for _, c := range []struct {
		retryable bool
		after     time.Duration
		want      bool
	}{
		{true, 0, true},
		{true, time.Second, false},
		{false, 0, false},
		{false, time.Second, false},
	} {
		if got := TryNext(c.retryable, c.after); got != c.want {
			t.Errorf("TryNext(%v, %v) = %v, want %v", c.retryable, c.after, got, c.want)
		}
	}
}
