package answer

// WeightedSubset answers N records sampled by weight without replacement
// from the healthy ones (successive weighted draws). Healthy zero-weight
// records fill up, in random order, when fewer than N non-zero ones are
// healthy; when none is healthy the draw is made over every record (fail
// open). It reads N (required) and Record.Weight, and BigN for big
// resolvers (Query.Class), who get BigN records (every healthy one when
// 0).
var WeightedSubset = &Policy{
	name:   "weighted-subset",
	fields: fields(FieldN, FieldWeight, FieldBigN, FieldBigLeaveOut),
	validate: func(c *Config) []error {
		switch {
		case c.N == 0:
			return []error{setErr(FieldN, "weighted-subset needs n, the number of records per answer")}
		case c.BigN != 0 && c.BigN < c.N:
			return []error{setErr(FieldBigN, "big n %d is below n %d: a big resolver gets at least as many records as a small one", c.BigN, c.N)}
		}
		return nil
	},
	build: func(c *Config) selector { return subset{n: c.N, big: bigN(c.BigN)} },
}

type subset struct{ n, big int }

func (subset) readsClass() bool { return true }

func (w subset) pick(s *Set, dst []int, q Query, r Source) ([]int, Result) {
	n, big := w.n, q.Class == ClassBig
	if big {
		n = w.big
	}
	return s.weightedSample(dst, n, big, s.weightsNow(), r)
}

// weightedSample answers n records by weight w without replacement from
// the healthy ones, zero weights filling up in random order, every record
// when none is healthy; big is an answer to a big resolver (bigCount).
func (s *Set) weightedSample(dst []int, n int, big bool, w []uint32, r Source) ([]int, Result) {
	dst, nz, total, open := s.weightedCandidates(dst, w)
	n = min(n, len(dst))
	if big {
		n = s.bigCount(n, len(dst))
	}
	k := drawByWeight(dst, min(n, nz), nz, total, w, r)
	if k < n { // fill up with zero-weight records, in random order
		sample(dst[k:], n-k, r)
	}
	return dst[:n], Result{FailOpen: open}
}

// drawByWeight moves k records drawn by weight w without replacement from
// dst[:nz] (records of non-zero weight, total their sum) to the front of
// dst, in the order drawn, and returns k; k <= nz.
func drawByWeight(dst []int, k, nz int, total uint64, w []uint32, r Source) int {
	for i := range k {
		j := i + draw(w, dst[i:nz], uintn(r, total))
		total -= uint64(w[dst[j]])
		dst[i], dst[j] = dst[j], dst[i]
	}
	return k
}
