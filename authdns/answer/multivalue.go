package answer

// Multivalue answers up to N (default 8) healthy records, a random subset
// in random order when more are healthy; when none is healthy, up to N of
// all records (fail open). It reads N. With effective weights
// (Set.SetWeights, from load feedback) the subset and its order are drawn
// by weight without replacement, as weighted-subset draws.
var Multivalue = &Policy{
	name:   "multivalue",
	fields: fields(FieldN),
	build: func(c *Config) selector {
		n := c.N
		if n == 0 {
			n = DefaultMultivalue
		}
		return &multivalue{n: n}
	},
}

type multivalue struct{ n int }

func (m *multivalue) pick(s *Set, dst []int, _ Query, r Source) ([]int, Result) {
	if e := s.eff.Load(); e != nil { // load feedback: by weight
		return s.weightedSample(dst, m.n, *e, r)
	}
	if flags := s.flags; flags != nil {
		up := all(dst, len(flags))
		k := 0
		for i, f := range flags {
			if f == nil || f.Load() {
				up[k] = i
				k++
			}
		}
		dst = up[:k]
	} else {
		for i, p := range s.health {
			if p == nil || p.Healthy() {
				dst = append(dst, i)
			}
		}
	}
	open := len(dst) == 0
	if open {
		dst = all(dst, len(s.recs))
	}
	return sample(dst, m.n, r), Result{FailOpen: open}
}
