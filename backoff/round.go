package backoff

import "time"

// Round returns the order in which one round of reconnect attempts tries
// n endpoints (every address of every target, resolved at the start of
// the round): a uniformly random permutation of 0 .. n-1, drawn from rnd,
// with last, the endpoint of the previous attempt (-1 for none), moved to
// the end. The random order spreads a fleet over every address of an
// answer from the first resolution on, never piling it onto the first
// address; the previous endpoint last sends a session that ended, or an
// attempt that failed, elsewhere first. nil rnd draws from math/rand/v2.
//
// The client SDK and kraken's devices both take their rounds from here,
// and go on within a round as TryNext says.
func Round(n, last int, rnd Rand) []int {
	if n <= 0 {
		return nil
	}
	if rnd == nil {
		rnd = globalRand{}
	}
	out := make([]int, 0, n)
	for i := range n {
		if i != last {
			out = append(out, i)
		}
	}
	// Fisher-Yates over the others; last, when it is one of them, after.
	for i := len(out) - 1; i > 0; i-- {
		j := int(rnd.Float64() * float64(i+1))
		j = min(max(j, 0), i)
		out[i], out[j] = out[j], out[i]
	}
	if last >= 0 && last < n {
		out = append(out, last)
	}
	return out
}

// TryNext reports whether a round goes on at once to its next endpoint
// after an attempt failed: yes when the failure may be retried and came
// without a retry hint (a refused or timed-out connect, a dropped
// upgrade); no for a terminal refusal, and no for one with a hint
// (retryAfter > 0), which says when to come back to the whole fleet, not
// only to this address. When it says no, or the round has no endpoint
// left, the next attempt waits for the policy's delay (NextAfterWithin
// with the hint) and starts a new round.
func TryNext(retryable bool, retryAfter time.Duration) bool {
	return retryable && retryAfter <= 0
}
