package answer

// Weighted answers one record, chosen with probability weight/sum among the
// healthy records of non-zero weight, with Route 53's rules: zero-weight
// records only when every non-zero one is unhealthy, all-zero weights mean
// equal chances, and when none is healthy the choice is made as if all
// were (fail open). It reads Record.Weight. With BigSubset (and BigN) it
// answers big resolvers (Query.Class) with a weighted subset instead: BigN
// records (every one when 0) drawn by weight without replacement from the
// same candidates, the non-zero weights only when there are some (a
// standby stays one), so the first record is the one-record answer's
// draw.
var Weighted = &Policy{
	name:   "weighted",
	fields: fields(FieldWeight, FieldBigSubset, FieldBigN, FieldBigLeaveOut),
	one:    true,
	validate: func(c *Config) []error {
		if c.BigN != 0 && !c.BigSubset {
			return []error{setErr(FieldBigN, "big n applies to a weighted set only with big weighted subset")}
		}
		if c.BigLeaveOut && !c.BigSubset {
			return []error{setErr(FieldBigLeaveOut, "big leave out applies to a weighted set only with big weighted subset")}
		}
		return nil
	},
	build: func(c *Config) selector {
		if !c.BigSubset {
			return weighted{}
		}
		return weighted{big: bigN(c.BigN)}
	},
}

// weighted answers one record, or big records to a big resolver when big
// is above 0 (BigSubset).
type weighted struct{ big int }

func (w weighted) readsClass() bool { return w.big > 0 }

func (wp weighted) pick(s *Set, dst []int, q Query, r Source) ([]int, Result) {
	w := s.weightsNow()
	dst, nz, total, open := s.weightedCandidates(dst, w)
	if wp.big > 0 && q.Class == ClassBig {
		if nz == 0 { // only zero weights: equal chances
			return sample(dst, s.bigCount(min(wp.big, len(dst)), len(dst)), r), Result{FailOpen: open}
		}
		return dst[:drawByWeight(dst, s.bigCount(min(wp.big, nz), nz), nz, total, w, r)], Result{FailOpen: open}
	}
	if nz == 0 { // only zero weights: equal chances
		return append(dst[:0], dst[uintn(r, uint64(len(dst)))]), Result{FailOpen: open}
	}
	j := draw(w, dst[:nz], uintn(r, total))
	return append(dst[:0], dst[j]), Result{FailOpen: open}
}

// weightedCandidates appends the healthy records, non-zero weights first,
// or every record (fail-open) when none is healthy. It returns how many have
// a non-zero weight and the sum of their weights.
func (s *Set) weightedCandidates(dst []int, w []uint32) (_ []int, nz int, total uint64, open bool) {
	dst, nz = s.candidates(dst, w, true)
	if len(dst) == 0 {
		open = true
		dst, nz = s.candidates(dst, w, false)
	}
	for _, i := range dst[:nz] {
		total += uint64(w[i])
	}
	return dst, nz, total, open
}

// draw returns the position in idx (records of non-zero weight w) of the
// record whose share of the cumulative weights holds x, x below their sum.
func draw(w []uint32, idx []int, x uint64) int {
	j := 0
	for ; j < len(idx)-1; j++ {
		wj := uint64(w[idx[j]])
		if x < wj {
			break
		}
		x -= wj
	}
	return j
}

// candidates appends the records (healthy ones when onlyUp) with the
// non-zero weights first and returns how many have a non-zero weight.
func (s *Set) candidates(dst []int, w []uint32, onlyUp bool) ([]int, int) {
	for i, wi := range w {
		if wi > 0 && (!onlyUp || s.up(i)) {
			dst = append(dst, i)
		}
	}
	nz := len(dst)
	for i, wi := range w {
		if wi == 0 && (!onlyUp || s.up(i)) {
			dst = append(dst, i)
		}
	}
	return dst, nz
}
