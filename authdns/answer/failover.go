package answer

import "slices"

// Failover answers the healthy primaries, else the healthy secondaries,
// else the primaries (fail open), in random order. It reads
// Record.Secondary and needs at least one primary.
var Failover = &Policy{
	name:   "failover",
	fields: fields(FieldSecondary),
	one:    true,
	validate: func(c *Config) []error {
		if !slices.ContainsFunc(c.Records, func(r Record) bool { return !r.Secondary }) {
			return []error{setErr(FieldRecords, "failover needs at least one primary record")}
		}
		return nil
	},
	build: func(*Config) selector { return failover{} },
}

type failover struct{}

func (failover) pick(s *Set, dst []int, _ Query, r Source) ([]int, Result) {
	for _, secondary := range [2]bool{false, true} {
		for i, rec := range s.recs {
			if rec.Secondary == secondary && s.up(i) {
				dst = append(dst, i)
			}
		}
		if len(dst) > 0 {
			shuffle(dst, r)
			return dst, Result{}
		}
	}
	for i, rec := range s.recs {
		if !rec.Secondary {
			dst = append(dst, i)
		}
	}
	shuffle(dst, r)
	return dst, Result{FailOpen: true}
}
