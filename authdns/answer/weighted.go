package answer

// weighted picks one record with probability weight/sum over the healthy
// records of non-zero weight, with Route 53's rules for zero weights and
// for when nothing is healthy.
func (s *Set) weighted(dst []int, h Health, r Source) ([]int, Result) {
	dst, nz, total, open := s.weightedCandidates(dst, h)
	if nz == 0 { // only zero weights: equal chances
		return append(dst[:0], dst[uintn(r, uint64(len(dst)))]), Result{FailOpen: open}
	}
	j := s.draw(dst[:nz], uintn(r, total))
	return append(dst[:0], dst[j]), Result{FailOpen: open}
}

// subset samples n records by weight without replacement from the healthy
// ones (successive weighted draws). Healthy zero-weight records fill up in
// random order when fewer than n non-zero ones are healthy; when none is
// healthy the draw is made over every record.
func (s *Set) subset(dst []int, h Health, r Source) ([]int, Result) {
	dst, nz, total, open := s.weightedCandidates(dst, h)
	n := min(s.n, len(dst))
	k := 0
	for ; k < n && k < nz; k++ {
		j := k + s.draw(dst[k:nz], uintn(r, total))
		total -= uint64(s.recs[dst[j]].Weight)
		dst[k], dst[j] = dst[j], dst[k]
	}
	if k < n { // fill up with zero-weight records, in random order
		sample(dst[k:], n-k, r)
	}
	return dst[:n], Result{FailOpen: open}
}

// weightedCandidates appends the healthy records, non-zero weights first,
// or every record (fail-open) when none is healthy. It returns how many have
// a non-zero weight and the sum of their weights.
func (s *Set) weightedCandidates(dst []int, h Health) (_ []int, nz int, total uint64, open bool) {
	dst, nz = s.candidates(dst, h, true)
	if len(dst) == 0 {
		open = true
		dst, nz = s.candidates(dst, h, false)
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
func (s *Set) candidates(dst []int, h Health, onlyUp bool) ([]int, int) {
	for i, rec := range s.recs {
		if rec.Weight > 0 && (!onlyUp || s.up(h, i)) {
			dst = append(dst, i)
		}
	}
	nz := len(dst)
	for i, rec := range s.recs {
		if rec.Weight == 0 && (!onlyUp || s.up(h, i)) {
			dst = append(dst, i)
		}
	}
	return dst, nz
}
