package answer

import "github.com/corralhq/corral/shard"

// Shuffle answers the tenant's hand of k records from the shard dealer
// (Query.Key names the tenant): the healthy records of the hand in
// preference order, spilling to healthy records outside the hand (bounded
// by the dealer's spill size) when too few are healthy, and failing open
// to the whole hand when none of hand and spill is. An empty key (the bare
// name) is dealt like any other tenant id. It reads Dealer (required),
// whose workers are the records by index.
var Shuffle = &Policy{
	name:   "shuffle",
	fields: fields(FieldDealer),
	validate: func(c *Config) []error {
		switch {
		case c.Dealer == nil:
			return []error{setErr(FieldDealer, "shuffle needs a dealer")}
		case c.Dealer.Workers() != len(c.Records):
			return []error{setErr(FieldDealer, "shuffle dealer deals from %d records, the set has %d", c.Dealer.Workers(), len(c.Records))}
		}
		return nil
	},
	build: func(c *Config) selector { return &shuffler{dealer: c.Dealer} },
}

type shuffler struct{ dealer *shard.Dealer }

// pick hands the record health to PickFunc as a closure that does not
// escape, so it costs no allocation.
func (sh *shuffler) pick(s *Set, dst []int, q Query, _ Source) ([]int, Result) {
	c := sh.dealer.PickFunc(dst, q.Key, s.up)
	return c.Workers, Result{FailOpen: c.Status == shard.StatusFailOpen}
}
