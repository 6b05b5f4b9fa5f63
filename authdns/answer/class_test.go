package answer

import (
	"errors"
	"math/rand/v2"
	"slices"
	"testing"
)

func TestClassOf(t *testing.T) {
	c := ClassConfig{BigShare: 0.1}.WithDefaults()
	tests := []struct {
		name           string
		queries, total float64
		want           Class
	}{
		{"above the share", 11, 100, ClassBig},
		{"at the share", 10, 100, ClassSmall},
		{"below", 1, 100, ClassSmall},
		{"no queries at all", 0, 0, ClassSmall},
		{"the only resolver", 5, 5, ClassBig},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := c.Of(tc.queries, tc.total); got != tc.want {
				t.Errorf("Of(%v, %v) = %v, want %v", tc.queries, tc.total, got, tc.want)
			}
		})
	}
	if (ClassConfig{}).WithDefaults().BigShare != DefaultBigShare {
		t.Error("the zero ClassConfig does not take DefaultBigShare")
	}
	for _, s := range []float64{-0.1, 1, 2} {
		if err := (ClassConfig{BigShare: s}).Validate(); err == nil || err.Error()[:8] != "answer: " {
			t.Errorf("big share %v: %v", s, err)
		}
	}
	if ClassSmall.String() != "small" || ClassBig.String() != "big" || Class(7).String() != "class 7" {
		t.Error("class names")
	}
}

// TestBigResolversGetMore: a big resolver (Query.Class) gets up to BigN
// records (every healthy one by default) of a multivalue and a
// weighted-subset set, and of a weighted set with BigSubset (by weight,
// without the standby); a small one gets the configured count; a weighted
// set without BigSubset answers one record to either.
func TestBigResolversGetMore(t *testing.T) {
	v := &view{}
	ten := make([]uint32, 10)
	tests := []struct {
		name       string
		cfg        Config
		down       down
		small, big int
		byClass    bool
		forbidden  []int // records a big answer must not hold
	}{
		{"multivalue, big gets every healthy record", Config{Policy: Multivalue, N: 3, Records: v.recs(ten...)}, down{"c9": true}, 3, 9, true, []int{9}},
		{"multivalue, big_n bounds it", Config{Policy: Multivalue, BigN: 9, Records: v.recs(ten...)}, nil, 8, 9, true, nil},
		{"multivalue, big_n above n", Config{Policy: Multivalue, N: 2, BigN: 5, Records: v.recs(ten...)}, nil, 2, 5, true, nil},
		{"weighted-subset, big gets every healthy record", Config{Policy: WeightedSubset, N: 2, Records: v.recs(1, 2, 3, 4, 0, 5)}, down{"c5": true}, 2, 5, true, []int{5}},
		{"weighted without big subset", Config{Policy: Weighted, Records: v.recs(1, 2, 3)}, nil, 1, 1, false, nil},
		{"weighted with big subset: the non-zero weights", Config{Policy: Weighted, BigSubset: true, Records: v.recs(1, 2, 3, 0)}, nil, 1, 3, true, []int{3}},
		{"weighted with big subset of 2", Config{Policy: Weighted, BigSubset: true, BigN: 2, Records: v.recs(1, 2, 3, 0)}, down{"c1": true}, 1, 2, true, []int{1, 3}},
		{"weighted with big subset, only standbys up", Config{Policy: Weighted, BigSubset: true, Records: v.recs(1, 2, 0, 0)}, down{"c0": true, "c1": true}, 1, 2, true, []int{0, 1}},
		{"multivalue leaving one out", Config{Policy: Multivalue, N: 3, BigLeaveOut: true, Records: v.recs(ten...)}, down{"c9": true}, 3, 8, true, []int{9}},
		{"multivalue leaving one out of big_n", Config{Policy: Multivalue, N: 3, BigN: 5, BigLeaveOut: true, Records: v.recs(ten...)}, nil, 3, 5, true, nil},
		{"weighted-subset leaving one out", Config{Policy: WeightedSubset, N: 2, BigLeaveOut: true, Records: v.recs(1, 2, 3, 4, 0, 5)}, down{"c5": true}, 2, 4, true, []int{5}},
		{"weighted leaving one out", Config{Policy: Weighted, BigSubset: true, BigLeaveOut: true, Records: v.recs(1, 2, 3, 0)}, nil, 1, 2, true, []int{3}},
		{"weighted leaving none of two out", Config{Policy: Weighted, BigSubset: true, BigLeaveOut: true, Records: v.recs(1, 2, 3, 0)}, down{"c2": true}, 1, 2, true, []int{2, 3}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := mustSet(t, tc.cfg)
			if s.ByClass() != tc.byClass {
				t.Errorf("ByClass %v, want %v", s.ByClass(), tc.byClass)
			}
			r := rand.NewPCG(3, 4)
			for range 200 {
				out, _ := v.pick(s, make([]int, 0, s.Len()), Query{}, tc.down, r)
				if len(out) != tc.small {
					t.Fatalf("small resolver: %v, want %d records", out, tc.small)
				}
				out, _ = v.pick(s, make([]int, 0, s.Len()), Query{Class: ClassBig}, tc.down, r)
				if len(out) != tc.big {
					t.Fatalf("big resolver: %v, want %d records", out, tc.big)
				}
				u := slices.Clone(out)
				slices.Sort(u)
				if len(slices.Compact(u)) != len(out) {
					t.Fatalf("duplicate records in %v", out)
				}
				for _, i := range out {
					if slices.Contains(tc.forbidden, i) {
						t.Fatalf("big answer %v holds record %d", out, i)
					}
				}
			}
		})
	}
}

// TestBigSubsetFirstIsWeighted: the first record of a big weighted
// subset is drawn by weight, as the one-record answer is (a CNAME answers
// it alone).
func TestBigSubsetFirstIsWeighted(t *testing.T) {
	v := &view{}
	s := mustSet(t, Config{Policy: Weighted, BigSubset: true, Records: v.recs(1, 2, 3, 4)})
	r := rand.NewPCG(7, 8)
	c := make([]int, 4)
	for range 100000 {
		out, _ := s.Select(make([]int, 0, 4), Query{Class: ClassBig}, r)
		c[out[0]]++
	}
	if x := chiSquare(c, []float64{0.1, 0.2, 0.3, 0.4}); x > 16.27 {
		t.Errorf("chi-square %.2f > 16.27 for first records %v against 1:2:3:4", x, c)
	}
}

// TestBigWithFeedbackWeights: under load feedback a multivalue set draws
// by weight, and a big resolver still gets every healthy record.
func TestBigWithFeedbackWeights(t *testing.T) {
	v := &view{}
	s := mustSet(t, Config{Policy: Multivalue, N: 2, Records: v.recs(make([]uint32, 6)...)})
	if err := s.SetWeights([]uint32{100, 1000, 1000, 1000, 1000, 2000}); err != nil {
		t.Fatal(err)
	}
	r := rand.NewPCG(1, 1)
	if out, _ := s.Select(nil, Query{Class: ClassBig}, r); len(out) != 6 {
		t.Errorf("big resolver under feedback: %v, want all 6", out)
	}
	if out, _ := s.Select(nil, Query{}, r); len(out) != 2 {
		t.Errorf("small resolver under feedback: %v, want 2", out)
	}
}

func TestBigConfigErrors(t *testing.T) {
	v := &view{}
	tests := []struct {
		name  string
		cfg   Config
		field Field
		msg   string
	}{
		{"big n below n", Config{Policy: Multivalue, N: 4, BigN: 3, Records: v.recs(0)}, FieldBigN,
			"big n 3 is below n 4: a big resolver gets at least as many records as a small one"},
		{"big n below the default n", Config{Policy: Multivalue, BigN: 3, Records: v.recs(0)}, FieldBigN,
			"big n 3 is below n 8: a big resolver gets at least as many records as a small one"},
		{"big n below a subset's n", Config{Policy: WeightedSubset, N: 3, BigN: 2, Records: v.recs(1)}, FieldBigN,
			"big n 2 is below n 3: a big resolver gets at least as many records as a small one"},
		{"big n on weighted without big subset", Config{Policy: Weighted, BigN: 2, Records: v.recs(1)}, FieldBigN,
			"big n applies to a weighted set only with big weighted subset"},
		{"negative big n", Config{Policy: Multivalue, BigN: -1, Records: v.recs(0)}, FieldBigN,
			"big n must not be negative, got -1"},
		{"big n on failover", Config{Policy: Failover, BigN: 2, Records: []Record{{}}}, FieldBigN,
			"big n applies to the weighted, multivalue and weighted-subset policies, not failover"},
		{"big subset on multivalue", Config{Policy: Multivalue, BigSubset: true, Records: v.recs(0)}, FieldBigSubset,
			"big weighted subset applies to the weighted policy, not multivalue"},
		{"big leave out on weighted without big subset", Config{Policy: Weighted, BigLeaveOut: true, Records: v.recs(1)}, FieldBigLeaveOut,
			"big leave out applies to a weighted set only with big weighted subset"},
		{"big leave out on failover", Config{Policy: Failover, BigLeaveOut: true, Records: []Record{{}}}, FieldBigLeaveOut,
			"big leave out applies to the weighted, multivalue and weighted-subset policies, not failover"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := NewSet(tc.cfg)
			var fe *FieldError
			if !errors.As(err, &fe) {
				t.Fatalf("NewSet: %v, want a *FieldError", err)
			}
			if fe.Field != tc.field || fe.Msg != tc.msg {
				t.Errorf("got field %s %q, want field %s %q", fe.Field, fe.Msg, tc.field, tc.msg)
			}
		})
	}
}

func TestSelectBigDoesNotAllocate(t *testing.T) {
	v := &view{}
	r := rand.NewPCG(1, 2)
	for _, cfg := range []Config{
		{Policy: Multivalue, Records: v.recs(make([]uint32, 10)...)},
		{Policy: WeightedSubset, N: 2, Records: v.recs(1, 2, 3, 4, 0)},
		{Policy: Weighted, BigSubset: true, Records: v.recs(1, 2, 3, 4, 0)},
		{Policy: Weighted, BigSubset: true, BigLeaveOut: true, Records: v.recs(1, 2, 3, 4, 0)},
	} {
		s := mustSet(t, cfg)
		dst := make([]int, 0, s.Len())
		if a := testing.AllocsPerRun(100, func() { s.Select(dst, Query{Class: ClassBig}, r) }); a != 0 {
			t.Errorf("%v: %.1f allocations per Select of a big resolver", cfg.Policy, a)
		}
	}
}
