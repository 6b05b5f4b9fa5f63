package config

// suggest returns the known key nearest to key by edit distance (with
// transpositions, so "tll" is one edit from "ttl"), or "" when none is
// close enough to be a likely typo: one edit for keys up to 4 letters, two
// up to 8, three beyond.
func suggest(key string, known []string) string {
	limit := 3
	switch n := len([]rune(key)); {
	case n <= 4:
		limit = 1
	case n <= 8:
		limit = 2
	}
	best, bestD := "", limit+1
	for _, k := range known {
		if d := editDistance(key, k); d < bestD {
			best, bestD = k, d
		}
	}
	return best
}

// editDistance is the optimal string alignment distance of a and b:
// insertions, deletions, substitutions and transpositions of neighbours
// each cost one.
func editDistance(a, b string) int {
	x, y := []rune(a), []rune(b)
	// d[i][j] is the distance of x[:i] and y[:j]; three rows suffice.
	prev2 := make([]int, len(y)+1)
	prev := make([]int, len(y)+1)
	cur := make([]int, len(y)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(x); i++ {
		cur[0] = i
		for j := 1; j <= len(y); j++ {
			cost := 1
			if x[i-1] == y[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && x[i-1] == y[j-2] && x[i-2] == y[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(y)]
}
