package answer

import (
	"slices"
	"testing"
)

func TestApplyFeedback(t *testing.T) {
	for _, p := range Policies() {
		want := p == Weighted || p == WeightedSubset || p == Multivalue
		if p.Fed() != want {
			t.Errorf("%s: Fed %v, want %v", p, p.Fed(), want)
		}
	}
	for _, tc := range []struct {
		name    string
		cfg     Config
		base    []uint32
		factors []float64
		weights []uint32 // Weights after ApplyFeedback
	}{
		{"weighted scales the configured weights", Config{Policy: Weighted, Records: []Record{{Weight: 3}, {Weight: 1}, {Weight: 0}}},
			[]uint32{3, 1, 0}, []float64{0.1, 2, 1}, []uint32{300, 2000, 0}},
		{"weighted of zero weights only scales equal chances", Config{Policy: Weighted, Records: []Record{{}, {}}},
			[]uint32{1, 1}, []float64{0.5, 1}, []uint32{500, 1000}},
		{"multivalue scales equal chances", Config{Policy: Multivalue, Records: []Record{{}, {}}},
			[]uint32{1, 1}, []float64{1, 0.25}, []uint32{1000, 250}},
		{"every factor 1 restores the configured weights", Config{Policy: WeightedSubset, N: 1, Records: []Record{{Weight: 2}, {Weight: 5}}},
			[]uint32{2, 5}, []float64{1, 1}, []uint32{2, 5}},
		{"a policy that is not fed is left as it is", Config{Policy: Failover, Records: []Record{{}, {Secondary: true}}},
			[]uint32{1, 1}, []float64{0.1, 2}, []uint32{0, 0}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := NewSet(tc.cfg)
			if err != nil {
				t.Fatal(err)
			}
			if got := s.FeedbackBase(); !slices.Equal(got, tc.base) {
				t.Errorf("FeedbackBase %v, want %v", got, tc.base)
			}
			_ = s.SetWeights(nil)
			if s.Policy().Fed() {
				_ = s.SetWeights(make([]uint32, s.Len())) // a stale effective weight, which all-1 factors must clear
			}
			s.ApplyFeedback(nil, tc.factors)
			if got := s.Weights(); !slices.Equal(got, tc.weights) {
				t.Errorf("Weights after ApplyFeedback(%v) %v, want %v", tc.factors, got, tc.weights)
			}
		})
	}
}
