package answer

import "github.com/corralhq/corral/shard"

// shuffle answers the tenant's pick from the shard dealer: the healthy
// records of its hand in preference order, spilling to healthy records
// outside the hand (bounded by the dealer's spill size) when too few are
// healthy, and failing open to the whole hand when none of hand and spill
// is. An empty key (the bare name) is dealt like any other tenant id. The
// health closure does not escape PickFunc, so it costs no allocation.
func (s *Set) shuffle(dst []int, key string, h Health) ([]int, Result) {
	c := s.dealer.PickFunc(dst, key, func(i int) bool { return s.up(h, i) })
	return c.Workers, Result{FailOpen: c.Status == shard.StatusFailOpen}
}
