package answer

import "github.com/corralhq/corral/shard"

// shardHealth adapts a Set's record health to the worker health of shard.
type shardHealth struct {
	s *Set
	h Health
}

func (a *shardHealth) Healthy(i int) bool { return a.s.up(a.h, i) }

// shuffle answers the tenant's pick from the shard dealer: the healthy
// records of its hand in preference order, spilling to healthy records
// outside the hand (bounded by the dealer's spill size) when too few are
// healthy, and failing open to the whole hand when none of hand and spill
// is. An empty key (the bare name) is dealt like any other tenant id.
func (s *Set) shuffle(dst []int, key string, h Health) ([]int, Result) {
	// The adapter comes from a pool: handed to shard as an interface it
	// would otherwise be allocated on every query.
	a := s.adapters.Get().(*shardHealth)
	a.h = h
	c := s.dealer.Pick(dst, key, a)
	a.h = nil
	s.adapters.Put(a)
	return c.Workers, Result{FailOpen: c.Status == shard.StatusFailOpen}
}
