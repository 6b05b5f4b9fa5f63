package answer

// Fed reports whether load feedback weights the sets of policy p: the
// policies that draw by weight (weighted, weighted-subset, and
// multivalue, which draws its subset by weight once it has effective
// weights). The others answer as configured whatever the load.
func (p *Policy) Fed() bool { return p == Weighted || p == WeightedSubset || p == Multivalue }

// FeedbackBase returns the weights load feedback scales for s (the w of
// EffectiveWeights): the records' configured weights, or 1 each for a
// multivalue set (which has no weights of its own) and for a set whose
// weights are all 0 (equal chances).
func (s *Set) FeedbackBase() []uint32 {
	w := make([]uint32, len(s.recs))
	some := false
	for i, r := range s.recs {
		w[i] = r.Weight
		some = some || r.Weight > 0
	}
	if !some || s.policy == Multivalue {
		for i := range w {
			w[i] = 1
		}
	}
	return w
}

// ApplyFeedback gives s the effective weights of the factors f, one per
// record in record order (EffectiveWeights of FeedbackBase), or restores
// its configured weights when every factor is 1: the step the server
// takes for each fed set after FeedbackConfig.Next. dst is scratch space
// for the weights, returned for reuse. A set of a policy that is not Fed
// is left as it is.
func (s *Set) ApplyFeedback(dst []uint32, f []float64) []uint32 {
	if !s.policy.Fed() {
		return dst
	}
	moved := false
	for _, fi := range f {
		moved = moved || fi != 1
	}
	if !moved {
		_ = s.SetWeights(nil)
		return dst
	}
	dst = EffectiveWeights(dst, s.FeedbackBase(), f)
	_ = s.SetWeights(dst)
	return dst
}
