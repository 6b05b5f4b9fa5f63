package edge

import (
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/corralhq/corral/internal/testkit"
)

// outlierSet is a static set of n origins on a manual clock.
func outlierSet(t *testing.T, n int, oc OutlierConfig) (*Origins, *testkit.Clock, *prometheus.Registry) {
	t.Helper()
	clock := testkit.NewClock(time.Unix(1_000_000, 0))
	reg := prometheus.NewRegistry()
	s := newTestOrigins(t, OriginsConfig{Static: staticOrigins(n), Outlier: oc}, OriginsOptions{Now: clock.Now, Registerer: reg})
	return s, clock, reg
}

func fail(o *Origin, n int) {
	for range n {
		o.Report(OriginFailure)
	}
}

// TestOutlierConsecutiveFailures: consecutive_failures failures in a row
// eject; a success resets the count; a neutral outcome neither counts nor
// resets; failures of sessions and handshakes count as reports do.
func TestOutlierConsecutiveFailures(t *testing.T) {
	s, _, reg := outlierSet(t, 3, OutlierConfig{})
	o := s.List()[0]
	fail(o, DefaultConsecutiveFailures-1)
	if o.Ejected() {
		t.Fatal("ejected after 4 failures; want 5")
	}
	o.Report(OriginSuccess)
	fail(o, DefaultConsecutiveFailures-1)
	if o.Ejected() {
		t.Fatal("ejected after a success and 4 failures: the success did not reset the count")
	}
	o.Report(OriginNeutral)
	o.handshakes.Add(1)
	o.HandshakeDone(OriginFailure)
	if !o.Ejected() {
		t.Fatal("not ejected after 5 consecutive failures (a neutral outcome among them)")
	}
	if got := counts(t, s, "", 300, OriginNeutral); got[o.Addr()] != 0 {
		t.Errorf("the ejected origin got %d of 300 picks", got[o.Addr()])
	}
	if v := gaugeValue(t, reg, "corral_edge_origin_ejections_total", o.Addr()); v != 1 {
		t.Errorf("ejections_total %v; want 1", v)
	}
	if v := gaugeValue(t, reg, "corral_edge_origins_ejected", ""); v != 1 {
		t.Errorf("ejected gauge %v; want 1", v)
	}

	// Sessions end with failures too.
	p := s.List()[1]
	for range DefaultConsecutiveFailures {
		p.sessions.Add(1)
		p.SessionDone(OriginFailure)
	}
	if p.Ejected() {
		t.Fatal("a second origin of 3 ejected at max_ejection_percent 10")
	}
	if v := counterValue(t, reg, "corral_edge_origin_ejections_skipped_total"); v != 1 {
		t.Errorf("ejections_skipped_total %v; want 1", v)
	}
}

// TestOutlierEjectionGrows: an origin is ejected for base_ejection_time
// times the number of times it was ejected, capped by max_ejection_time;
// it is back in service when the time is up.
func TestOutlierEjectionGrows(t *testing.T) {
	s, clock, _ := outlierSet(t, 3, OutlierConfig{BaseEjectionTime: 30 * time.Second, MaxEjectionTime: 100 * time.Second})
	o := s.List()[0]
	for i, want := range []time.Duration{30 * time.Second, 60 * time.Second, 90 * time.Second, 100 * time.Second, 100 * time.Second} {
		fail(o, DefaultConsecutiveFailures)
		clock.Advance(want - time.Millisecond)
		if !o.Ejected() {
			t.Fatalf("ejection %d ended before %v", i+1, want)
		}
		clock.Advance(time.Millisecond)
		if o.Ejected() {
			t.Fatalf("ejection %d lasts beyond %v", i+1, want)
		}
		if got := counts(t, s, "", 300, OriginNeutral); got[o.Addr()] == 0 {
			t.Fatalf("after ejection %d the origin gets no picks", i+1)
		}
	}
	if o.Ejections() != 5 {
		t.Errorf("%d ejections; want 5", o.Ejections())
	}
}

// TestOutlierFailuresWhileEjected: failures that arrive during an
// ejection (of exchanges begun before it) neither extend it nor count
// towards the next one.
func TestOutlierFailuresWhileEjected(t *testing.T) {
	s, clock, _ := outlierSet(t, 3, OutlierConfig{})
	o := s.List()[0]
	fail(o, DefaultConsecutiveFailures)
	fail(o, 3*DefaultConsecutiveFailures)
	clock.Advance(DefaultBaseEjectionTime)
	if o.Ejected() || o.Ejections() != 1 {
		t.Fatalf("failures while ejected: ejected %v after 30s, %d ejections; want false, 1", o.Ejected(), o.Ejections())
	}
	fail(o, DefaultConsecutiveFailures-1)
	if o.Ejected() {
		t.Fatal("ejected again after 4 failures: failures during the ejection counted")
	}
}

// TestOutlierDecay: every interval an origin spends back in service takes
// one from its ejection count, so a host that recovered is ejected for
// less the next time; after long enough it is back at the base time.
func TestOutlierDecay(t *testing.T) {
	for _, tc := range []struct {
		name    string
		healthy time.Duration // in service after the third ejection ended
		want    time.Duration // the fourth ejection
	}{
		{name: "no decay within an interval", healthy: 9 * time.Second, want: 120 * time.Second},
		{name: "two intervals take two", healthy: 20 * time.Second, want: 60 * time.Second},
		{name: "a long healthy time returns to the base", healthy: time.Hour, want: 30 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, clock, _ := outlierSet(t, 3, OutlierConfig{})
			o := s.List()[0]
			for _, d := range []time.Duration{30 * time.Second, 60 * time.Second, 90 * time.Second} {
				fail(o, DefaultConsecutiveFailures)
				clock.Advance(d)
			}
			clock.Advance(tc.healthy)
			fail(o, DefaultConsecutiveFailures)
			clock.Advance(tc.want - time.Millisecond)
			if !o.Ejected() {
				t.Fatalf("the fourth ejection ended before %v", tc.want)
			}
			clock.Advance(time.Millisecond)
			if o.Ejected() {
				t.Fatalf("the fourth ejection lasts beyond %v", tc.want)
			}
		})
	}
}

// TestOutlierMaxEjectionPercent: no more than max_ejection_percent of the
// origins are ejected at once, but one always may be; when an ejection
// ends, another origin can be ejected.
func TestOutlierMaxEjectionPercent(t *testing.T) {
	for _, tc := range []struct {
		origins, percent, want int
	}{
		{origins: 10, percent: 10, want: 1},
		{origins: 3, percent: 10, want: 1},
		{origins: 3, percent: 50, want: 1},
		{origins: 3, percent: 67, want: 2},
		{origins: 4, percent: 50, want: 2},
		{origins: 3, percent: 100, want: 3},
	} {
		t.Run(fmt.Sprintf("%d of %d at %d%%", tc.want, tc.origins, tc.percent), func(t *testing.T) {
			s, clock, reg := outlierSet(t, tc.origins, OutlierConfig{MaxEjectionPercent: tc.percent})
			for _, o := range s.List() {
				fail(o, DefaultConsecutiveFailures)
			}
			if got := s.ejectedCount(clock.Now()); got != tc.want {
				t.Fatalf("%d origins ejected; want %d", got, tc.want)
			}
			if v := counterValue(t, reg, "corral_edge_origin_ejections_skipped_total"); int(v) != tc.origins-tc.want {
				t.Errorf("ejections_skipped_total %v; want %d", v, tc.origins-tc.want)
			}
			if tc.want == tc.origins {
				return
			}
			// The refused origins keep their count: the first failure
			// after an ejection ends ejects the next one.
			clock.Advance(DefaultBaseEjectionTime)
			last := s.List()[tc.origins-1]
			last.Report(OriginFailure)
			if !last.Ejected() {
				t.Error("a refused origin was not ejected once the first ejections ended")
			}
		})
	}
}

// TestOutlierDisabled: with disabled, failures eject nothing.
func TestOutlierDisabled(t *testing.T) {
	s, _, _ := outlierSet(t, 3, OutlierConfig{Disabled: true})
	o := s.List()[0]
	fail(o, 10*DefaultConsecutiveFailures)
	if o.Ejected() {
		t.Fatal("ejected with the outlier detection disabled")
	}
}

// TestOutlierOriginOutOfAnswer: an origin that left the answer is not
// ejected (it gets no new session anyway) and does not count towards the
// share of ejected origins.
func TestOutlierOriginOutOfAnswer(t *testing.T) {
	s, clock, _ := outlierSet(t, 3, OutlierConfig{})
	gone := s.List()[2]
	gone.sessions.Add(1)
	if err := s.apply(mustAddrPorts(t, staticOrigins(2))); err != nil {
		t.Fatal(err)
	}
	fail(gone, DefaultConsecutiveFailures)
	if gone.Ejected() {
		t.Error("an origin out of the answer was ejected")
	}
	fail(s.List()[0], DefaultConsecutiveFailures)
	if s.ejectedCount(clock.Now()) != 1 {
		t.Error("the first ejection of the answer was refused")
	}
}
