package answer

// weighted picks one record with probability weight/sum over the healthy
// records of non-zero weight, with Route 53's rules for zero weights and
// for when nothing is healthy.
func (s *Set) weighted(dst []int, h Health, r Source) ([]int, Result) {
	open := false
	dst, nz := s.candidates(dst, h, true)
	if len(dst) == 0 {
		open = true
		dst, nz = s.candidates(dst, h, false)
	}
	if nz == 0 { // only zero weights: equal chances
		return append(dst[:0], dst[uintn(r, uint64(len(dst)))]), Result{FailOpen: open}
	}
	var total uint64
	for _, i := range dst[:nz] {
		total += uint64(s.recs[i].Weight)
	}
	x := uintn(r, total)
	j := 0
	for ; j < nz-1; j++ {
		w := uint64(s.recs[dst[j]].Weight)
		if x < w {
			break
		}
		x -= w
	}
	return append(dst[:0], dst[j]), Result{FailOpen: open}
}

// subset samples n records by weight without replacement from the healthy
// ones (successive weighted draws). Healthy zero-weight records fill up in
// random order when fewer than n non-zero ones are healthy; when none is
// healthy the draw is made over every record.
func (s *Set) subset(dst []int, h Health, r Source) ([]int, Result) {
	open := false
	dst, nz := s.candidates(dst, h, true)
	if len(dst) == 0 {
		open = true
		dst, nz = s.candidates(dst, h, false)
	}
	n := min(s.n, len(dst))
	var total uint64
	for _, i := range dst[:nz] {
		total += uint64(s.recs[i].Weight)
	}
	k := 0
	for ; k < n && k < nz; k++ {
		x := uintn(r, total)
		j := k
		for ; j < nz-1; j++ {
			w := uint64(s.recs[dst[j]].Weight)
			if x < w {
				break
			}
			x -= w
		}
		total -= uint64(s.recs[dst[j]].Weight)
		dst[k], dst[j] = dst[j], dst[k]
	}
	if k < n { // fill up with zero-weight records, in random order
		sample(dst[k:], n-k, r)
	}
	return dst[:n], Result{FailOpen: open}
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
