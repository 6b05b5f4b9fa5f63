package answer

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"
)

// audienceRun draws one-record answers for resolvers of the given rates
// (sessions a second) over origins, again every ttl intervals of one
// second (each resolver at its own phase), and learns from the sessions
// the origins open, for the given intervals. Big resolvers (those of
// class big by ClassConfig.Of on their estimate) get every origin.
func audienceRun(t *testing.T, rates []float64, origins, ttl, intervals int, bigAll bool) *Audience {
	t.Helper()
	rng := rand.New(rand.NewPCG(1, 2))
	n := len(rates)
	var aud Audience
	answers := make([][]int, n)
	phase := make([]int, n)
	for i := range phase {
		phase[i] = rng.IntN(ttl)
	}
	all := make([]int, origins)
	for o := range all {
		all[o] = o
	}
	rule := ClassConfig{}.WithDefaults()
	opened := make([]float64, origins)
	var cfg AudienceConfig
	for s := range intervals {
		for i := range answers {
			if answers[i] == nil || s%ttl == phase[i] {
				if bigAll && aud.Of(rule, i) == ClassBig {
					answers[i] = leaveOneOut(all, rng)
				} else {
					answers[i] = []int{rng.IntN(origins)}
				}
			}
		}
		clear(opened)
		for i, a := range answers {
			for _, o := range a {
				opened[o] += rates[i] / float64(len(a))
			}
		}
		cfg.Learn(&aud, answers, opened, time.Second)
	}
	return &aud
}

// leaveOneOut returns every record of all but one, drawn at random.
func leaveOneOut(all []int, rng *rand.Rand) []int {
	out := rng.IntN(len(all))
	return append(append([]int(nil), all[:out]...), all[out+1:]...)
}

// TestAudienceLearnsWhoSpeaksForMany: three resolvers of 1,000, 100 and
// 10 sessions a second among 100 of 1 each, one record per answer drawn
// over 6 origins every 30 s: after an hour the two above 1 % of the
// sessions are big and no other is, and the estimates of the three are
// within 25 % of their rates, though no interval alone can tell the
// resolvers that share an origin apart.
func TestAudienceLearnsWhoSpeaksForMany(t *testing.T) {
	rates := []float64{1000, 100, 10}
	for range 100 {
		rates = append(rates, 1)
	}
	aud := audienceRun(t, rates, 6, 30, 3600, false)
	for i, want := range rates[:3] {
		if got := aud.Est[i]; math.Abs(got-want) > 0.25*want {
			t.Errorf("resolver %d: estimate %.2f sessions/s, want %v +-25 %%", i, got, want)
		}
	}
	if got, want := aud.Total, 1210.0; math.Abs(got-want) > 0.01*want {
		t.Errorf("total %.1f sessions/s, want the opened rate %v", got, want)
	}
	checkBig(t, aud, 2) // 1000 and 100 of 1210 are above 1 %; 10 is 0.83 %
}

// checkBig fails unless exactly the first want resolvers are big.
func checkBig(t *testing.T, aud *Audience, want int) {
	t.Helper()
	rule := ClassConfig{}.WithDefaults()
	for i := range aud.Est {
		if got := aud.Of(rule, i); (got == ClassBig) != (i < want) {
			t.Errorf("resolver %d: %v (estimate %.2f of %.1f sessions/s)", i, got, aud.Est[i], aud.Total)
		}
	}
}

// TestAudienceKeepsBigAnswersBig: a big resolver answered with every
// origin spreads its sessions evenly, which says nothing of its share:
// it must stay big, and the others' estimates must not take its sessions
// over. Its answers leave one record out (Config.BigLeaveOut); answered
// with every record, its estimate fell from 1,000 to 32 a second and 30
// of the 100 small ones were classed big.
func TestAudienceKeepsBigAnswersBig(t *testing.T) {
	rates := []float64{1000}
	for range 100 {
		rates = append(rates, 1)
	}
	aud := audienceRun(t, rates, 6, 30, 3600, true)
	checkBig(t, aud, 1)
	if got := aud.Est[0]; math.Abs(got-1000) > 250 {
		t.Errorf("big resolver: estimate %.1f sessions/s, want 1000 +-25 %%", got)
	}
}

func TestAudienceLearnEdges(t *testing.T) {
	var c AudienceConfig
	learn := func(est []float64, answers [][]int, opened []float64, dt time.Duration) *Audience {
		a := &Audience{Est: est}
		c.Learn(a, answers, opened, dt)
		return a
	}
	// A new resolver starts at the mean of the known ones, then moves by
	// its origin's ratio of opened to predicted sessions.
	a := learn([]float64{0, 4, 8}, [][]int{{0}, {1}, {2}}, []float64{6, 4, 8}, time.Second)
	if a.Est[0] != 6 || a.Est[1] != 4 || a.Est[2] != 8 {
		t.Errorf("new resolver beside 4 and 8, all confirmed: %v, want [6 4 8]", a.Est)
	}
	// Nothing known: the opened rate over the resolvers holding answers.
	a = learn([]float64{0, 0}, [][]int{{0}, {1}}, []float64{6, 6}, time.Second)
	if a.Est[0] != 6 || a.Est[1] != 6 {
		t.Errorf("nothing known: %v, want [6 6]", a.Est)
	}
	// An answer of every origin in play moves with the whole opened rate
	// only (20 opened of 3 predicted), not by its origins' ratios (10/1
	// and 10/2); the others by their origins'.
	c = AudienceConfig{HalfLife: time.Second}
	a = learn([]float64{2, 1}, [][]int{{0, 1}, {1}}, []float64{10, 10}, time.Second)
	if math.Abs(a.Est[0]-(1+20.0/3)) > 1e-9 || a.Est[1] != 3 {
		t.Errorf("answer of every origin: estimates %v, want [%v 3]", a.Est, 1+20.0/3)
	}
	c = AudienceConfig{}
	// Nothing held: no change.
	a = learn([]float64{0, 5}, [][]int{nil, nil}, []float64{10}, time.Second)
	if a.Est[0] != 0 || a.Est[1] != 5 {
		t.Errorf("no answers held: est %v, want unchanged", a.Est)
	}
	// Bad indices and rates are nobody's, and nothing turns NaN.
	a = learn([]float64{3, 1}, [][]int{{0, 7, -1}, {1}}, []float64{3, math.Inf(1), math.NaN()}, time.Second)
	for _, v := range append(a.Est, a.Total) {
		if math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
			t.Fatalf("estimates %v, total %v from bad input", a.Est, a.Total)
		}
	}
	// Answers that name no origin of opened: nothing, and no NaN.
	a = learn([]float64{3}, [][]int{{5, -1}}, []float64{0, 0}, time.Second)
	if a.Est[0] != 3 || math.IsNaN(a.Total) {
		t.Errorf("answers naming no origin: est %v, total %v; want [3] and a number", a.Est, a.Total)
	}
	// No time passed: no change.
	a = learn([]float64{3, 1}, [][]int{{0}, {1}}, []float64{300, 1}, 0)
	if a.Est[0] != 3 {
		t.Errorf("dt 0 moved the estimate to %v", a.Est[0])
	}
	// The half-life: an interval of one half-life moves an estimate
	// half way to what the interval says (twice its origin's prediction).
	c = AudienceConfig{HalfLife: time.Second}
	a = &Audience{Est: []float64{2, 1}, Total: 3}
	c.Learn(a, [][]int{{0}, {1}}, []float64{4, 1}, time.Second)
	if a.Est[0] != 3 || a.Est[1] != 1 {
		t.Errorf("one half-life from [2 1] toward [4 1]: %v, want [3 1]", a.Est)
	}
	if a.Total != 4 {
		t.Errorf("total after one half-life from 3 toward 5: %v, want 4", a.Total)
	}
	// The first interval's opened rate is the total.
	if a = learn([]float64{0}, [][]int{{0}}, []float64{7}, time.Second); a.Total != 7 {
		t.Errorf("first total %v, want 7", a.Total)
	}
	if err := (AudienceConfig{HalfLife: -time.Second}).Validate(); err == nil {
		t.Error("negative half-life validated")
	}
	if got := (&Audience{}).Of(ClassConfig{}.WithDefaults(), 3); got != ClassSmall {
		t.Errorf("unknown resolver: %v, want small", got)
	}
}

func BenchmarkAudienceLearn(b *testing.B) {
	const n, origins = 4096, 16
	rng := rand.New(rand.NewPCG(3, 4))
	var aud Audience
	answers := make([][]int, n)
	for i := range answers {
		answers[i] = []int{rng.IntN(origins)}
	}
	opened := make([]float64, origins)
	for o := range opened {
		opened[o] = float64(1 + rng.IntN(1000))
	}
	var c AudienceConfig
	c.Learn(&aud, answers, opened, time.Second)
	b.ReportAllocs()
	for b.Loop() {
		c.Learn(&aud, answers, opened, time.Second)
	}
}
