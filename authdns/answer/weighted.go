package answer

// Weighted answers one record, chosen with probability weight/sum among the
// healthy records of non-zero weight, with Route 53's rules: zero-weight
// records only when every non-zero one is unhealthy, all-zero weights mean
// equal chances, and when none is healthy the choice is made as if all
// were (fail open). It reads Record.Weight.
var Weighted = &Policy{
	name:   "weighted",
	fields: fields(FieldWeight),
	one:    true,
	build:  func(*Config) selector { return weighted{} },
}

type weighted struct{}

func (weighted) pick(s *Set, dst []int, _ Query, r Source) ([]int, Result) {
	dst, nz, total, open := s.weightedCandidates(dst)
	if nz == 0 { // only zero weights: equal chances
		return append(dst[:0], dst[uintn(r, uint64(len(dst)))]), Result{FailOpen: open}
	}
	j := s.draw(dst[:nz], uintn(r, total))
	return append(dst[:0], dst[j]), Result{FailOpen: open}
}

// weightedCandidates appends the healthy records, non-zero weights first,
// or every record (fail-open) when none is healthy. It returns how many have
// a non-zero weight and the sum of their weights.
func (s *Set) weightedCandidates(dst []int) (_ []int, nz int, total uint64, open bool) {
	dst, nz = s.candidates(dst, true)
	if len(dst) == 0 {
		open = true
		dst, nz = s.candidates(dst, false)
	}
	for _, i := range dst[:nz] {
		total += uint64(s.recs[i].Weight)
	}
	return dst, nz, total, open
}

// draw returns the position in idx (records of non-zero weight) of the
// record whose share of the cumulative weights holds x, x below their sum.
func (s *Set) draw(idx []int, x uint64) int {
	j := 0
	for ; j < len(idx)-1; j++ {
		w := uint64(s.recs[idx[j]].Weight)
		if x < w {
			break
		}
		x -= w
	}
	return j
}

// candidates appends the records (healthy ones when onlyUp) with the
// non-zero weights first and returns how many have a non-zero weight.
func (s *Set) candidates(dst []int, onlyUp bool) ([]int, int) {
	for i, rec := range s.recs {
		if rec.Weight > 0 && (!onlyUp || s.up(i)) {
			dst = append(dst, i)
		}
	}
	nz := len(dst)
	for i, rec := range s.recs {
		if rec.Weight == 0 && (!onlyUp || s.up(i)) {
			dst = append(dst, i)
		}
	}
	return dst, nz
}
