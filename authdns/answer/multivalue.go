package answer

// Multivalue answers up to N (default 8) healthy records, a random subset
// in random order when more are healthy; when none is healthy, up to N of
// all records (fail open). It reads N, and BigN for big resolvers
// (Query.Class), who get up to BigN records (every healthy one when 0).
// With effective weights (Set.SetWeights, from load feedback) the subset
// and its order are drawn by weight without replacement, as
// weighted-subset draws.
var Multivalue = &Policy{
	name:   "multivalue",
	fields: fields(FieldN, FieldBigN, FieldBigLeaveOut),
	validate: func(c *Config) []error {
		if n := nOr(c.N, DefaultMultivalue); c.BigN != 0 && c.BigN < n {
			return []error{setErr(FieldBigN, "big n %d is below n %d: a big resolver gets at least as many records as a small one", c.BigN, n)}
		}
		return nil
	},
	build: func(c *Config) selector {
		n := nOr(c.N, DefaultMultivalue)
		return &multivalue{n: n, big: bigN(c.BigN)}
	},
}

// nOr returns n, or def when n is 0.
func nOr(n, def int) int {
	if n == 0 {
		return def
	}
	return n
}

// bigN returns the records of an answer to a big resolver: n, or every
// record when n is 0.
func bigN(n int) int { return nOr(n, MaxRecords) }

type multivalue struct{ n, big int }

func (*multivalue) readsClass() bool { return true }

func (m *multivalue) pick(s *Set, dst []int, q Query, r Source) ([]int, Result) {
	n, big := m.n, q.Class == ClassBig
	if big {
		n = m.big
	}
	if e := s.eff.Load(); e != nil { // load feedback: by weight
		return s.weightedSample(dst, n, big, *e, r)
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
	if big {
		n = s.bigCount(min(n, len(dst)), len(dst))
	}
	return sample(dst, n, r), Result{FailOpen: open}
}
