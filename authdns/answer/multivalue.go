package answer

// Multivalue answers up to N (default 8) healthy records, a random subset
// in random order when more are healthy; when none is healthy, up to N of
// all records (fail open). It reads N.
var Multivalue = &Policy{
	name:   "multivalue",
	fields: fields(FieldN),
	build: func(c *Config) selector {
		n := c.N
		if n == 0 {
			n = DefaultMultivalue
		}
		return multivalue{n: n}
	},
}

type multivalue struct{ n int }

func (m multivalue) pick(s *Set, dst []int, _ Query, r Source) ([]int, Result) {
	if s.flags != nil {
		for i, f := range s.flags {
			if f == nil || f.Load() {
				dst = append(dst, i)
			}
		}
	} else {
		for i, p := range s.health {
			if p == nil || p.Healthy() {
				dst = append(dst, i)
			}
		}
	}
	open := len(dst) == 0
	if open {
		for i := range s.recs {
			dst = append(dst, i)
		}
	}
	return sample(dst, m.n, r), Result{FailOpen: open}
}
