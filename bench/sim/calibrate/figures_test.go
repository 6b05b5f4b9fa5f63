package main

import (
	"math"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/corralhq/corral/kraken"
	"github.com/corralhq/corral/scenario"
	"github.com/corralhq/corral/sim"
)

// handStorm is one storm told twice, as kraken and as the sim would
// report it: 100 devices on hub-1 and hub-2 (60 and 40), all dropped at
// 2 s; in the second after the drop 100 attempts start, 40 fail
// (refused) and 60 are back; in the next 40 attempts start and all are
// back. Kraken saw each drop 0.5 s late (it had to handle the closes),
// so its per-device figure (back_99_ms, 1.5 s) is not the one compared:
// since_99_ms, from the storm's start, is.
func handStorm() (*kraken.Result, *sim.Result) {
	back, since := 1500.0, 2000.0
	k := &kraken.Result{
		Devices:           100,
		AttemptsPerSecond: []int64{0, 0, 100, 40, 0},
		HeldPerSecond:     []int64{100, 100, 60, 100, 100},
		FailuresPerSecond: map[string][]int64{"p0": {0, 0, 40, 0, 0}},
		HeldByOrigin:      map[string][]int64{"hub-1": {60, 60, 36, 60, 60}, "hub-2": {40, 40, 24, 40, 40}},
		Failures:          map[string]kraken.Counts{"close_1013": {"p0": 40}, "subscribe_denied": {"p0": 3}},
		Storms:            []*kraken.Storm{{Kind: "drop", AtSeconds: 2, Share: 1, Dropped: 100, Back: 100, Back99Ms: &back, Since99Ms: &since, BackSince: kraken.NewHistogram()}},
	}
	s := &sim.Result{
		Devices: 100, Step: 0.5, Origins: []string{"hub-1", "hub-2"}, Causes: sim.CauseNames(),
	}
	step := func(t float64, connected, dropped, attempts, ok, refused int64, o1, o2 int64) sim.Step {
		st := sim.Step{T: t, Connected: connected, Dropped: dropped, Attempts: attempts, Successes: []int64{ok}, AttemptErrors: refused,
			Origins: []sim.OriginStep{{Connected: o1, Attempts: attempts}, {Connected: o2}}}
		st.Origins[0].Failures[sim.CauseBacklog] = refused
		for c := range st.Errors {
			st.Errors[c] = []int64{0}
		}
		st.Errors[sim.CauseBacklog][0] = refused
		return st
	}
	s.Steps = []sim.Step{
		step(0, 100, 0, 0, 0, 0, 60, 40), step(0.5, 100, 0, 0, 0, 0, 60, 40),
		step(1, 100, 0, 0, 0, 0, 60, 40), step(1.5, 100, 0, 0, 0, 0, 60, 40),
		step(2, 30, 100, 60, 30, 30, 18, 12), step(2.5, 60, 0, 40, 30, 10, 36, 24),
		step(3, 80, 0, 20, 20, 0, 48, 32), step(3.5, 100, 0, 20, 20, 0, 60, 40),
		step(4, 100, 0, 0, 0, 0, 60, 40), step(4.5, 100, 0, 0, 0, 0, 60, 40),
	}
	return k, s
}

// TestFiguresReadBothSidesAlike: the same storm, told by kraken and by
// the sim, gives the same figures, and every row of the comparison is
// within target with nothing unexplained.
func TestFiguresReadBothSidesAlike(t *testing.T) {
	k, s := handStorm()
	kf, err := FromKraken(k)
	if err != nil {
		t.Fatal(err)
	}
	sf, err := FromSim(s, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []struct {
		side string
		f    Figures
	}{{"kraken", kf}, {"sim", sf}} {
		if f.f.Dropped != 100 || f.f.AttemptsPerDevice != 1.4 || f.f.PeakErrorRate != 0.4 || f.f.Failed != 40 ||
			f.f.Back99 != 2*time.Second || f.f.Share["hub-1"] != 0.6 || f.f.Share["hub-2"] != 0.4 {
			t.Errorf("%s: %+v; want 100 dropped, 1.4 attempts each, peak 40 %%, 40 failed, 99 %% back 2 s after the drop, shares 60/40", f.side, f.f)
		}
	}
	if kf.Failures["refused"] != 40 || len(kf.Failures) != 1 {
		t.Errorf("kraken's failures %v: want the 40 refusals alone (a subscribe refusal is no attempt's)", kf.Failures)
	}
	for _, r := range Compare(kf, sf) {
		if !r.Within || r.Ratio != 1 {
			t.Errorf("%s: ratio %v, want 1", r.Figure, r.Ratio)
		}
	}
	if u := Unexplained(kf, sf); len(u) != 0 {
		t.Errorf("unexplained: %v", u)
	}
}

// TestFiguresCountEveryTry: a device's round tries several origins
// before it backs off (the client's rule, edge.attempts in the sim), and
// kraken counts each connect; the sim's figures count each try that
// reached an origin too, not the device-level attempt. 10 devices
// dropped; 10 attempts start, 5 are refused by hub-1 and tried again on
// hub-2 within the step, where 2 are refused again: 15 tries, 7 failed.
func TestFiguresCountEveryTry(t *testing.T) {
	s := &sim.Result{Devices: 10, Step: 1, Origins: []string{"hub-1", "hub-2"}, Causes: sim.CauseNames()}
	idle := sim.Step{Connected: 10, Successes: []int64{0}, Origins: []sim.OriginStep{{Connected: 5}, {Connected: 5}}}
	storm := sim.Step{T: 1, Connected: 8, Dropped: 10, Attempts: 10, Successes: []int64{8}, AttemptErrors: 2,
		Origins: []sim.OriginStep{{Connected: 5, Attempts: 10}, {Connected: 3, Attempts: 5}}}
	storm.Origins[0].Failures[sim.CauseBacklog] = 5
	storm.Origins[1].Failures[sim.CauseBacklog] = 2
	s.Steps = []sim.Step{idle, storm}
	f, err := FromSim(s, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if f.AttemptsPerDevice != 1.5 || f.Failed != 7 || f.Failures["refused"] != 7 || math.Abs(f.PeakErrorRate-7.0/15) > 1e-9 {
		t.Errorf("%+v; want 1.5 attempts per device, 7 failed (refused), peak 7 of 15 ended", f)
	}
}

// TestUnexplainedFailures: a failure kind the sim has no cause for, or
// one side's kind the other lacks, is listed.
func TestUnexplainedFailures(t *testing.T) {
	for _, c := range []struct {
		name       string
		k, s       map[string]int64
		wantSubstr string
	}{
		{"a reason the sim does not model", map[string]int64{"close_4000": 2}, nil, "close_4000: a kind the sim does not model"},
		{"kraken's refusals, none in the sim", map[string]int64{"refused": 5}, nil, "kraken counts 5 failures refused, the sim none"},
		{"the sim's timeouts, none in kraken", nil, map[string]int64{"timeout": 7}, "the sim counts 7 failures timeout, kraken none"},
	} {
		t.Run(c.name, func(t *testing.T) {
			u := Unexplained(Figures{Failures: c.k}, Figures{Failures: c.s})
			if len(u) != 1 || !strings.Contains(u[0], c.wantSubstr) {
				t.Errorf("unexplained %q, want one containing %q", u, c.wantSubstr)
			}
		})
	}
}

// TestCompareRatio: the ratio is sim over kraken and within target only
// within 10 %; a figure only the sim has is off target.
func TestCompareRatio(t *testing.T) {
	for _, c := range []struct {
		name   string
		k, s   float64
		within bool
	}{
		{"equal", 2, 2, true}, {"9 % above", 2, 2.18, true}, {"11 % below", 2, 1.78, false},
		{"both zero", 0, 0, true}, {"only the sim's", 0, 0.1, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			if r := row("x", "", c.k, c.s); r.Within != c.within {
				t.Errorf("kraken %v, sim %v: within %v (ratio %v), want %v", c.k, c.s, r.Within, r.Ratio, c.within)
			}
		})
	}
}

// TestMeasureLatencyIsTheMedian: the idle pass's latency is the median
// of its Welcomes (here 1 to 20 ms: 10 ms), not its fastest one.
func TestMeasureLatencyIsTheMedian(t *testing.T) {
	h := kraken.NewHistogram()
	for i := 20; i >= 1; i-- {
		h.Record(time.Duration(i) * time.Millisecond)
	}
	got, err := MeasureLatency(&kraken.Result{Latency: kraken.Latency{Welcome: h}})
	if err != nil {
		t.Fatal(err)
	}
	if got < 9900*time.Microsecond || got > 10100*time.Microsecond {
		t.Errorf("latency %v, want the median of 1..20 ms, 10 ms", got)
	}
	if _, err := MeasureLatency(&kraken.Result{Latency: kraken.Latency{Welcome: kraken.NewHistogram()}}); err == nil {
		t.Error("an idle pass without a Welcome: no error")
	}
}

// TestApplyWritesTheInputs: the shipped file takes the measured inputs
// on its origin lines, at the seed, and still decodes; a file with two
// origin groups is refused.
func TestApplyWritesTheInputs(t *testing.T) {
	src, err := os.ReadFile("../../../scenarios/calibrate.yaml")
	if err != nil {
		t.Fatal(err)
	}
	in := Inputs{Steady: map[string]Steady{ // 1,000/s and 1,200/s
		"hub-1": {From: 500 * time.Millisecond, To: 4500 * time.Millisecond, Took: 5000},
		"hub-2": {From: 250 * time.Millisecond, To: 4250 * time.Millisecond, Took: 6000},
	}, Every: 100 * time.Millisecond, HandshakeLatency: 1500 * time.Microsecond, Backlog: 7}
	b, err := Apply("calibrate.yaml", src, in, 42)
	if err != nil {
		t.Fatal(err)
	}
	sc, err := scenario.Decode("calibrate.yaml", b)
	if err != nil {
		t.Fatal(err)
	}
	o := sc.Origins[0]
	if sc.Seed != 42 || o.MaxNewPerSecond != 1100 || o.HandshakeLatency != 1500*time.Microsecond || o.Backlog != 7 || o.Count != 3 {
		t.Errorf("seed %d, origin %+v; want seed 42, 1100/s, 1.5ms, backlog 7, count 3 kept", sc.Seed, o)
	}
	if !strings.Contains(string(b), "from its own count of the sessions it set up (read every 100ms), a tenth to nine tenths of what it took back, times after the drop (hub-1 1000/s over 0.50-4.50 s, hub-2 1200/s over 0.25-4.25 s; spread 9.1 %") {
		t.Errorf("the rate's line does not say where it comes from:\n%s", b)
	}
	if mean, spread := in.Rate(); mean != 1100 || math.Abs(spread-1.0/11) > 1e-9 {
		t.Errorf("Rate() = %v, %v; want 1100, 1/11", mean, spread)
	}
	two := strings.Replace(string(src), "origins:\n", "origins:\n  - {name: edge, max_new_per_second: 5, headroom: 1}\n  - name: x\n    max_new_per_second: 3\n    headroom: 1\n", 1)
	if _, err := Apply("two.yaml", []byte(two), in, 1); err == nil || !strings.Contains(err.Error(), "want one") {
		t.Errorf("two origin groups: %v, want a refusal", err)
	}
}
