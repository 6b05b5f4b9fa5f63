package edge

import (
	"errors"
	"testing"
	"time"
)

// TestPickSkipsTransportDown: with the default outlier settings, an
// origin whose transport is down gets no pick, however many are down (no
// ejection cap applies, none is counted); fail-open over ejected origins
// does not reach one; with every transport down Pick refuses with
// ErrOriginsDown; an origin whose transport is back is picked again.
func TestPickSkipsTransportDown(t *testing.T) {
	s, clock, reg := outlierSet(t, 6, OutlierConfig{})
	list := s.List()
	dead := list[:3]
	for _, o := range dead {
		o.SetTransportDown(true)
	}
	got := counts(t, s, "", 600, OriginNeutral)
	for _, o := range dead {
		if got[o.Addr()] != 0 {
			t.Errorf("%s, transport down, got %d of 600 picks (%v)", o.Addr(), got[o.Addr()], got)
		}
	}
	if v := gaugeValue(t, reg, "corral_edge_origins_down", ""); v != 3 {
		t.Errorf("origins_down %v; want 3", v)
	}
	if s.ejectedCount(clock.Now()) != 0 {
		t.Error("an origin was ejected for its transport")
	}

	// The live ones ejected (at 100 % so that all may be): fail-open
	// picks among them, never a dead one.
	s2, _, _ := outlierSet(t, 4, OutlierConfig{MaxEjectionPercent: 100})
	l2 := s2.List()
	l2[0].SetTransportDown(true)
	l2[1].SetTransportDown(true)
	fail(l2[2], DefaultConsecutiveFailures)
	fail(l2[3], DefaultConsecutiveFailures)
	got = counts(t, s2, "", 300, OriginNeutral)
	if got[l2[0].Addr()]+got[l2[1].Addr()] != 0 || got[l2[2].Addr()] == 0 || got[l2[3].Addr()] == 0 {
		t.Errorf("fail-open picks %v; want only the two ejected origins whose transport is up", got)
	}

	for _, o := range list {
		o.SetTransportDown(true)
	}
	if o, err := s.Pick(""); !errors.Is(err, ErrOriginsDown) {
		t.Fatalf("every transport down: Pick gave %v, %v; want ErrOriginsDown", o, err)
	}
	if v := counterValue(t, reg, "corral_edge_origin_picks_all_down_total"); v != 1 {
		t.Errorf("picks_all_down_total %v; want 1", v)
	}

	back := list[4]
	back.SetTransportDown(false)
	got = counts(t, s, "", 50, OriginNeutral)
	if got[back.Addr()] != 50 {
		t.Errorf("the origin whose transport is back got %d of 50 picks (%v); want all", got[back.Addr()], got)
	}
}

// TestPickScoreFailingOrigin: an origin that answers but fails every
// handshake keeps no load, yet p2c does not prefer it: with the ejection
// off (so that only the score acts), while the clock stands still it
// stops winning draws after a few failures (a dozen against loads of
// hundreds), and as time passes it gets about one probe per
// failurePenaltyHalfLife; once it succeeds again it is picked as its
// load says. Comparing bare loads, it won every draw it was part of:
// 2,000 of 3,000.
func TestPickScoreFailingOrigin(t *testing.T) {
	s, clock, _ := outlierSet(t, 3, OutlierConfig{Disabled: true})
	bad := s.List()[1]
	pick := func(n int, step time.Duration) int {
		failed := 0
		for range n {
			o, err := s.Pick("")
			if err != nil {
				t.Fatal(err)
			}
			if o == bad {
				o.HandshakeDone(OriginFailure)
				failed++
			} else {
				o.HandshakeDone(OriginSuccess)
			}
			clock.Advance(step)
		}
		return failed
	}
	if n := pick(3000, 0); n > 20 {
		t.Errorf("clock still: the failing origin got %d of 3000 picks; want at most 20", n)
	}
	// 3,000 picks over 300 s: about 300 probes, one per half-life.
	if n, want := pick(3000, 100*time.Millisecond), int(300*time.Second/failurePenaltyHalfLife); n < want/2 || n > 2*want {
		t.Errorf("over 300 s the failing origin got %d probes; want about %d (one per %v)", n, want, failurePenaltyHalfLife)
	}
	bad.Report(OriginSuccess)
	if sc, l := bad.score(clock.Now().UnixNano()), float64(bad.Load()); sc != l {
		t.Errorf("after a success the score is %v; want its load %v", sc, l)
	}
}

// TestScoreDecays: each failure doubles load plus one; the doubling
// halves every failurePenaltyHalfLife; a burst is capped; a success
// clears it.
func TestScoreDecays(t *testing.T) {
	s, clock, _ := outlierSet(t, 3, OutlierConfig{Disabled: true})
	o := s.List()[0]
	o.sessions.Add(9)
	now := func() int64 { return clock.Now().UnixNano() }
	if sc := o.score(now()); sc != 9 {
		t.Fatalf("no failure: score %v; want the load 9", sc)
	}
	fail(o, 2)
	for _, tc := range []struct {
		after time.Duration
		want  float64
	}{{0, 39}, {failurePenaltyHalfLife, 19}, {failurePenaltyHalfLife, 9}, {failurePenaltyHalfLife, 9}} {
		clock.Advance(tc.after)
		if sc := o.score(now()); sc < tc.want-1e-6 || sc > tc.want+1e-6 {
			t.Errorf("2 failures, %v later: score %v; want %v", tc.after, sc, tc.want)
		}
	}
	fail(o, 1000)
	if sc := o.score(now()); sc < 1e7 {
		t.Errorf("1000 failures: score %v; want above any load", sc)
	}
	clock.Advance(maxPenaltyDoublings * failurePenaltyHalfLife)
	if sc := o.score(now()); sc != 9 {
		t.Errorf("1000 failures, %d half-lives later: score %v; want 9 (the burst capped)", maxPenaltyDoublings, sc)
	}
	fail(o, 3)
	o.Report(OriginSuccess)
	if sc := o.score(now()); sc != 9 {
		t.Errorf("after a success: score %v; want 9", sc)
	}
}

// TestPickTransportDownAllocatesNothing: Pick with origins down stays
// free of allocations.
func TestPickTransportDownAllocatesNothing(t *testing.T) {
	s, _, _ := outlierSet(t, 6, OutlierConfig{})
	s.List()[0].SetTransportDown(true)
	fail(s.List()[1], 3)
	if n := testing.AllocsPerRun(100, func() {
		o, _ := s.Pick("")
		o.HandshakeDone(OriginNeutral)
	}); n != 0 {
		t.Errorf("Pick allocates %v times", n)
	}
}
