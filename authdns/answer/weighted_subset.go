package answer

// WeightedSubset answers N records sampled by weight without replacement
// from the healthy ones (successive weighted draws). Healthy zero-weight
// records fill up, in random order, when fewer than N non-zero ones are
// healthy; when none is healthy the draw is made over every record (fail
// open). It reads N (required) and Record.Weight.
var WeightedSubset = &Policy{
	name:   "weighted-subset",
	fields: fields(FieldN, FieldWeight),
	validate: func(c *Config) []error {
		if c.N == 0 {
			return []error{setErr(FieldN, "weighted-subset needs n, the number of records per answer")}
		}
		return nil
	},
	build: func(c *Config) selector { return subset{n: c.N} },
}

type subset struct{ n int }

func (w subset) pick(s *Set, dst []int, _ Query, r Source) ([]int, Result) {
	return s.weightedSample(dst, w.n, s.weightsNow(), r)
}

// weightedSample answers n records by weight w without replacement from
// the healthy ones, zero weights filling up in random order, every record
// when none is healthy.
func (s *Set) weightedSample(dst []int, n int, w []uint32, r Source) ([]int, Result) {
	dst, nz, total, open := s.weightedCandidates(dst, w)
	n = min(n, len(dst))
	k := 0
	for ; k < n && k < nz; k++ {
		j := k + draw(w, dst[k:nz], uintn(r, total))
		total -= uint64(w[dst[j]])
		dst[k], dst[j] = dst[j], dst[k]
	}
	if k < n { // fill up with zero-weight records, in random order
		sample(dst[k:], n-k, r)
	}
	return dst[:n], Result{FailOpen: open}
}
