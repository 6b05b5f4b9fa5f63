package answer

// Simple answers every record, in random order; health is not consulted.
// It reads no field beyond the records.
var Simple = &Policy{
	name:  "simple",
	build: func(*Config) selector { return &simple{} },
}

type simple struct{}

func (*simple) pick(s *Set, dst []int, _ Query, r Source) ([]int, Result) {
	dst = all(dst, len(s.recs))
	shuffle(dst, r)
	return dst, Result{}
}
