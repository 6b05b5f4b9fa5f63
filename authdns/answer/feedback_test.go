package answer

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"
)

func TestLoadPressure(t *testing.T) {
	for _, tc := range []struct {
		name string
		l    Load
		want float64
	}{
		{"idle", Load{}, 0},
		{"half the limit in flight", Load{Inflight: 5, Limit: 10}, 0.5},
		{"over the limit counts as full", Load{Inflight: 20, Limit: 10}, 1},
		{"first shedding stage is near the limit", Load{Stage: 1}, 0.75},
		{"lifeboat is full", Load{Stage: MaxStage}, 1},
		{"the larger of stage and limiter", Load{Stage: 1, Inflight: 9, Limit: 10}, 0.9},
		{"negative in flight is idle", Load{Inflight: -3, Limit: 10}, 0},
		{"sessions at capacity with an empty queue is full", Load{Sessions: 1000, Capacity: 1000, Limit: 10}, 1},
		{"half the capacity in use", Load{Sessions: 500, Capacity: 1000}, 0.5},
		{"past the capacity counts as full", Load{Sessions: 1200, Capacity: 1000}, 1},
		{"an unknown capacity leaves sessions informative", Load{Sessions: 1_000_000}, 0},
		{"the larger of capacity and limiter", Load{Sessions: 300, Capacity: 1000, Inflight: 8, Limit: 10}, 0.8},
		{"the larger of capacity and stage", Load{Sessions: 950, Capacity: 1000, Stage: 1}, 0.95},
		{"negative sessions are none", Load{Sessions: -5, Capacity: 1000}, 0},
	} {
		if got := tc.l.Pressure(); math.Abs(got-tc.want) > 1e-9 {
			t.Errorf("%s: Pressure() = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestFeedbackNext(t *testing.T) {
	c := DefaultFeedback
	now := time.Unix(1000, 0)
	fresh := now.Add(-time.Second)
	for _, tc := range []struct {
		name string
		prev float64
		l    Load
		want float64
	}{
		{"a shedding origin loses at most max_step", 1, Load{At: fresh, Stage: MaxStage}, 0.75},
		{"an idle origin gains at most max_step", 1, Load{At: fresh}, 1.25},
		{"a full origin with an idle set-up queue loses", 1, Load{At: fresh, Sessions: 30, Capacity: 30, Limit: 20}, 0.75},
		{"a full origin without a limiter loses down to the floor", 0.2, Load{At: fresh, Sessions: 30, Capacity: 30}, 0.1},
		{"the floor holds", 0.15, Load{At: fresh, Stage: MaxStage}, 0.1},
		{"the ceiling holds", 1.9, Load{At: fresh}, 2},
		{"within hysteresis nothing moves", 1.02, Load{At: fresh, Inflight: 1, Limit: 2}, 1.02},
		{"a silent origin falls back at once", 0.1, Load{At: now.Add(-6 * time.Second), Stage: MaxStage}, 1},
		{"an origin never heard from has its configured weight", 0.3, Load{}, 1},
	} {
		if got := c.Next(tc.prev, tc.l, now); math.Abs(got-tc.want) > 1e-9 {
			t.Errorf("%s: Next(%v) = %v, want %v", tc.name, tc.prev, got, tc.want)
		}
	}
}

func TestFeedbackValidate(t *testing.T) {
	if err := (FeedbackConfig{}).Validate(); err != nil {
		t.Fatalf("zero config (defaults): %v", err)
	}
	for _, c := range []FeedbackConfig{
		{Floor: -0.1}, {Floor: 1.5}, {Ceiling: 0.5}, {MaxStep: -1},
		{MaxStep: 0.1, Hysteresis: 0.2}, {Timeout: -time.Second}, {Floor: math.NaN()}, {MaxTTL: -time.Second},
	} {
		if err := c.Validate(); err == nil {
			t.Errorf("%+v: Validate accepted it", c)
		}
	}
}

// TestAnswerTTL: the answers of a set feedback weights carry at most
// MaxTTL (the default when it is 0), a shorter TTL as it is; the other
// policies keep their TTL.
func TestAnswerTTL(t *testing.T) {
	if DefaultFeedback.MaxTTL != 30*time.Second || DefaultFeedbackMaxTTL != 30*time.Second {
		t.Fatalf("default max TTL %v / %v, want the sourced 30s", DefaultFeedback.MaxTTL, DefaultFeedbackMaxTTL)
	}
	for _, tc := range []struct {
		name    string
		cfg     FeedbackConfig
		policy  *Policy
		ttl     time.Duration
		wantTTL time.Duration
	}{
		{"weighted at the default cap", FeedbackConfig{}, Weighted, time.Minute, 30 * time.Second},
		{"weighted-subset at the default cap", FeedbackConfig{}, WeightedSubset, time.Hour, 30 * time.Second},
		{"multivalue at a cap given", FeedbackConfig{MaxTTL: 10 * time.Second}, Multivalue, time.Minute, 10 * time.Second},
		{"a TTL under the cap stays", FeedbackConfig{}, Weighted, 20 * time.Second, 20 * time.Second},
		{"a cap above the TTL leaves it", FeedbackConfig{MaxTTL: time.Hour}, Weighted, time.Minute, time.Minute},
		{"a TTL of 0 stays 0", FeedbackConfig{}, Weighted, 0, 0},
		{"simple is not fed", FeedbackConfig{}, Simple, time.Minute, time.Minute},
		{"a nil policy is simple", FeedbackConfig{}, nil, time.Minute, time.Minute},
		{"failover is not fed", FeedbackConfig{}, Failover, time.Minute, time.Minute},
		{"shuffle is not fed", FeedbackConfig{}, Shuffle, time.Minute, time.Minute},
		{"cidr is not fed", FeedbackConfig{}, CIDR, time.Minute, time.Minute},
	} {
		if got := tc.cfg.AnswerTTL(tc.policy, tc.ttl); got != tc.wantTTL {
			t.Errorf("%s: AnswerTTL(%v) = %v, want %v", tc.name, tc.ttl, got, tc.wantTTL)
		}
	}
}

// TestFeedbackProperties runs random configurations through random
// sequences of reports: the factor stays within [floor, ceiling], moves at
// most max_step per interval, gives 1 after the timeout, and the effective
// weight of a record of non-zero weight never reaches 0.
func TestFeedbackProperties(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for run := range 500 {
		c := FeedbackConfig{
			Floor: 0.01 + 0.99*r.Float64(), Ceiling: 1 + 3*r.Float64(),
			MaxStep: 0.01 + r.Float64(), Timeout: time.Duration(1+r.IntN(10)) * time.Second,
		}
		c.Hysteresis = c.MaxStep * r.Float64()
		if err := c.Validate(); err != nil {
			t.Fatal(err)
		}
		now := time.Unix(0, 0)
		f := 1.0
		var last Load
		for step := range 200 {
			now = now.Add(time.Second)
			if r.IntN(4) > 0 { // a report this interval
				last = Load{At: now, Sessions: r.IntN(50), Capacity: r.IntN(40), Inflight: r.IntN(30), Limit: r.IntN(20), Stage: r.IntN(MaxStage + 1)}
				if p := last.Pressure(); !(p >= 0 && p <= 1) {
					t.Fatalf("run %d step %d: %+v has pressure %v outside [0, 1]", run, step, last, p)
				}
			}
			next := c.Next(f, last, now)
			stale := last.At.IsZero() || now.Sub(last.At) > c.Timeout
			switch {
			case stale && next != 1:
				t.Fatalf("run %d step %d: report %v old, timeout %v: factor %v, want 1", run, step, now.Sub(last.At), c.Timeout, next)
			case !stale && (next < c.Floor-1e-12 || next > c.Ceiling+1e-12):
				t.Fatalf("run %d step %d: factor %v outside [%v, %v]", run, step, next, c.Floor, c.Ceiling)
			case !stale && f >= c.Floor && f <= c.Ceiling && math.Abs(next-f) > c.MaxStep+1e-12:
				t.Fatalf("run %d step %d: factor moved %v -> %v, more than max_step %v", run, step, f, next, c.MaxStep)
			}
			w := uint32(r.IntN(3))
			if e := EffectiveWeights(nil, []uint32{w}, []float64{next})[0]; (w > 0) != (e > 0) {
				t.Fatalf("run %d step %d: weight %d factor %v: effective %d", run, step, w, next, e)
			}
			f = next
		}
	}
}

func TestEffectiveWeights(t *testing.T) {
	got := EffectiveWeights(nil, []uint32{0, 1, 3, 2}, []float64{2, 0.1, 0.5})
	want := []uint32{0, 100, 1500, 2000}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("EffectiveWeights = %v, want %v (a zero weight stays 0, a missing factor is 1)", got, want)
		}
	}
}

// TestSetWeights: effective weights replace the configured ones of
// weighted, weighted-subset and multivalue draws, nil restores them, and
// a wrong length is refused.
func TestSetWeights(t *testing.T) {
	recs := []Record{{Weight: 1}, {Weight: 1}}
	for _, tc := range []struct {
		p *Policy
		n int
	}{{Weighted, 0}, {WeightedSubset, 1}, {Multivalue, 1}} {
		cfg := Config{Policy: tc.p, Records: recs, N: tc.n}
		if tc.p == Multivalue {
			cfg.Records = []Record{{}, {}}
		}
		s, err := NewSet(cfg)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.SetWeights([]uint32{1}); err == nil {
			t.Fatalf("%s: one weight for two records accepted", tc.p)
		}
		if err := s.SetWeights([]uint32{1, 999}); err != nil {
			t.Fatal(err)
		}
		r := rand.New(rand.NewPCG(3, 4))
		first := 0
		for range 2000 {
			if idx, _ := s.Select(nil, Query{}, r); idx[0] == 0 {
				first++
			}
		}
		if first > 40 { // expected 2 of 2000
			t.Errorf("%s: weights 1 and 999: record 0 first %d of 2000", tc.p, first)
		}
		_ = s.SetWeights(nil)
		first = 0
		for range 2000 {
			if idx, _ := s.Select(nil, Query{}, r); idx[0] == 0 {
				first++
			}
		}
		if first < 800 || first > 1200 {
			t.Errorf("%s: configured weights back: record 0 first %d of 2000, want about 1000", tc.p, first)
		}
	}
}

// TestSelectWithWeightsAllocs: effective weights cost no allocation per
// Select, for every fed policy.
func TestSelectWithWeightsAllocs(t *testing.T) {
	for _, tc := range []struct {
		p    *Policy
		n    int
		recs []Record
	}{
		{Weighted, 0, []Record{{Weight: 1}, {Weight: 2}, {Weight: 3}}},
		{WeightedSubset, 2, []Record{{Weight: 1}, {Weight: 2}, {Weight: 3}}},
		{Multivalue, 2, []Record{{}, {}, {}}},
	} {
		s, err := NewSet(Config{Policy: tc.p, Records: tc.recs, N: tc.n})
		if err != nil {
			t.Fatal(err)
		}
		if err := s.SetWeights([]uint32{100, 2000, 3}); err != nil {
			t.Fatal(err)
		}
		dst := make([]int, 0, s.Len())
		r := rand.New(rand.NewPCG(5, 6))
		if a := testing.AllocsPerRun(100, func() { dst, _ = s.Select(dst, Query{}, r) }); a != 0 {
			t.Errorf("%s with effective weights: %v allocations per Select", tc.p, a)
		}
	}
}
