package main

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/corralhq/corral/kraken"
)

// point is a corner of a piecewise-linear curve: v at t seconds.
type point struct{ t, v float64 }

// along is the piecewise-linear curve through ps at t, flat before its
// first corner and after its last.
func along(ps []point, t float64) float64 {
	if t <= ps[0].t {
		return ps[0].v
	}
	for i := 1; i < len(ps); i++ {
		if t <= ps[i].t {
			a, b := ps[i-1], ps[i]
			return a.v + (b.v-a.v)*(t-a.t)/(b.t-a.t)
		}
	}
	return ps[len(ps)-1].v
}

// readingsOf is one hub's readings every 100 ms over 6 s: a warm-up sets
// up 3,000 sessions over the first second, held until a drop between the
// readings at 2.0 s and 2.1 s cuts them all; the hub tears them down over
// lag seconds while the sessions of back (by seconds after 2.0 s) are set
// up.
func readingsOf(lag float64, back []point) []Sample {
	var rs []Sample
	for i := range 61 {
		var w, o float64
		if i <= 20 {
			w = 3000 * min(1, float64(i)/10)
			o = w
		} else {
			d := float64(i-20) / 10
			r := along(back, d)
			w, o = 3000+r, 3000-3000*min(1, d/lag)+r
		}
		rs = append(rs, Sample{At: time.Duration(i) * 100 * time.Millisecond, Welcomes: int64(math.Round(w)), Open: int64(math.Round(o))})
	}
	return rs
}

func opensOf(rs []Sample) *Samples {
	return &Samples{Every: 100 * time.Millisecond, Hubs: map[string][]Sample{"hub-1": rs}}
}

// steadyReturn is a return after a ramp of 0.3 s with nothing set up, at
// 2,000/s to 2,800 sessions, then a slower tail to 3,000 at 2.7 s: a
// tenth (300) at 0.45 s, nine tenths (2,700) at 1.65 s after the drop.
var steadyReturn = []point{{0, 0}, {0.3, 0}, {1.7, 2800}, {2.7, 3000}}

func near(a, b time.Duration) bool { return (a - b).Abs() < time.Microsecond }

// TestSteadyPartOfTheHubsCount: the rate is read from the hub's count of
// the sessions it set up, from its reading at the drop (the warm-up's
// 3,000 left out) to the end: 2,000/s over 0.45-1.65 s after the drop,
// whatever the ramp before and the tail after. The same return behind a
// hub that tears the dropped sessions down within a reading, or over 3 s
// while the return comes in (its open sessions then never fall below
// half), reads the same: the open sessions place the drop and nothing
// else (a rule that read them would see no return at all for the lagging
// hub's first seconds).
func TestSteadyPartOfTheHubsCount(t *testing.T) {
	for _, c := range []struct {
		name string
		lag  float64
		back []point
	}{
		{"teardown within a reading", 0.1, steadyReturn},
		{"teardown over 3 s, under the return", 3, steadyReturn},
		{"a longer ramp and tail", 0.5, []point{{0, 0}, {0.2, 0}, {0.3, 50}, {0.4, 200}, {1.7, 2800}, {1.8, 2850}, {3.5, 3000}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			steady, err := MeasureRates(opensOf(readingsOf(c.lag, c.back)), 1)
			if err != nil {
				t.Fatal(err)
			}
			s := steady["hub-1"]
			if s.Took != 3000 || !near(s.From, 450*time.Millisecond) || !near(s.To, 1650*time.Millisecond) {
				t.Errorf("steady part %+v, want 3,000 taken back, a tenth at 0.45 s and nine tenths at 1.65 s after the drop", s)
			}
			if got := s.Rate(); math.Abs(got-2000) > 1e-3 {
				t.Errorf("rate %.3f/s, want 2,000/s (2,400 over 1.2 s)", got)
			}
		})
	}
}

// TestRateIsTheHubsNotKrakensHeld: a herd whose kraken held series lags
// by kraken's teardown (the shape of the 50,000-device run of 2026-12-02,
// 14:59 UTC: the sessions it holds on hub-1 fall for 8 s as kraken handles
// the closes, then rise steeply) while the hub's own count says 2,000/s.
// Measure takes the hub's count; kraken's series, read by the same
// tenths, says 2,400 over 8.08-9.86 s after the drop (1,348/s) and stays
// a cross-check that agrees on what the hub took back.
func TestRateIsTheHubsNotKrakensHeld(t *testing.T) {
	herd := &kraken.Result{
		HeldByOrigin: map[string][]int64{"hub-1": {3000, 3000, 2600, 2300, 1900, 1400, 900, 500, 250, 200, 1500, 2900, 3000, 3000}},
		Storms:       []*kraken.Storm{{Kind: "drop", AtSeconds: 2, Share: 1}},
	}
	idle := kraken.NewHistogram()
	idle.Record(time.Millisecond)
	in, err := Measure(herd, opensOf(readingsOf(0.1, steadyReturn)), &kraken.Result{Latency: kraken.Latency{Welcome: idle}})
	if err != nil {
		t.Fatal(err)
	}
	if got := in.Steady["hub-1"].Rate(); math.Abs(got-2000) > 1e-3 {
		t.Errorf("rate %.3f/s (%+v), want the hub's 2,000/s", got, in.Steady["hub-1"])
	}
	if mean, _ := in.Rate(); math.Abs(mean-2000) > 1e-3 {
		t.Errorf("mean rate %.3f/s, want 2,000/s", mean)
	}
	h := in.Held["hub-1"]
	if h.Took != 3000 || math.Abs(h.Rate()-2000) < 500 {
		t.Errorf("kraken's held series read %+v (%.0f/s): want 3,000 taken back at a rate far from the hub's (the test would not tell the two apart)", h, h.Rate())
	}
	if want := "hub-1 took 3000 back (its own count 3000), 1348/s over 8.08-9.86 s"; in.CrossCheck() != want {
		t.Errorf("cross-check %q, want %q", in.CrossCheck(), want)
	}
}

// TestSteadyPartRefusals: readings that do not hold the drop, a hub that
// took nothing back, a steady part too short for its readings, a count
// that fell and other bad input are refused, each saying why.
func TestSteadyPartRefusals(t *testing.T) {
	noDrop := readingsOf(0.1, steadyReturn)[:21]
	nothingBack := readingsOf(0.1, []point{{0, 0}})
	restart := readingsOf(0.1, steadyReturn)
	restart[40].Welcomes = 10
	same := readingsOf(0.1, steadyReturn)
	same[5].At = same[4].At
	for _, c := range []struct {
		name  string
		opens *Samples
		share float64
		want  string
	}{
		// 10,000/s from 0.1 s: a tenth at 0.13 s, nine tenths at 0.37 s.
		{"a steady part of 0.24 s", opensOf(readingsOf(0.1, []point{{0, 0}, {0.1, 0}, {0.4, 3000}})), 1,
			"hub-1: its steady part (a tenth to nine tenths of the 3000 it took back, 0.13 to 0.37 s after the drop) lasted 0.24 s, under 5 times the intervals of the readings around its ends (0.10 s and 0.10 s)"},
		{"no drop in the readings", opensOf(noDrop), 1, "hub-1: its open sessions (at most 3000) never fell by a hundredth of the drop's share 1: the readings do not hold the drop"},
		{"nothing taken back", opensOf(nothingBack), 1, "hub-1: took no session back after the drop (3000 Welcomes at it, 3000 at the end)"},
		{"a count that fell", opensOf(restart), 1, "hub-1: its Welcomes fell from"},
		{"two readings at one time", opensOf(same), 1, "hub-1: reading 5 at 400ms is not after the one before"},
		{"one reading", opensOf(noDrop[:1]), 1, "hub-1: too few readings (1) to hold a herd"},
		{"no hub", &Samples{}, 1, "hold no hub"},
		{"a share of 0", opensOf(readingsOf(0.1, steadyReturn)), 0, "a drop of share 0"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if _, err := MeasureRates(c.opens, c.share); err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("error %v, want one containing %q", err, c.want)
			}
		})
	}
	if _, err := Measure(&kraken.Result{}, opensOf(readingsOf(0.1, steadyReturn)), &kraken.Result{}); err == nil || !strings.Contains(err.Error(), "no single drop storm") {
		t.Errorf("a herd without its drop: %v, want a refusal", err)
	}
}

// herdOf is a herd pass's result of one origin, hub-1, holding held at
// the end of each second, with every session dropped at 2 s.
func herdOf(held ...int64) *kraken.Result {
	return &kraken.Result{HeldByOrigin: map[string][]int64{"hub-1": held},
		Storms: []*kraken.Storm{{Kind: "drop", AtSeconds: 2, Share: 1}}}
}

// TestKrakenHeldCrossCheck: kraken's series are read by the same tenths,
// the part opening at the last rise through a tenth before nine tenths
// (a second can end with sessions the drop has not cut yet: 4,000 here,
// 200 a second later), so the cross-check gives 3,000/s and not the
// 1,709/s of a part opened by the uncut sessions; a series that never
// reaches nine tenths is left out, not refused.
func TestKrakenHeldCrossCheck(t *testing.T) {
	held, err := KrakenHeld(herdOf(10000, 10000, 4000, 200, 3200, 6200, 9200, 10000))
	if err != nil {
		t.Fatal(err)
	}
	if got := held["hub-1"].Rate(); math.Abs(got-3000) > 1e-6 {
		t.Errorf("rate %.3f/s (%+v), want 3,000/s", got, held["hub-1"])
	}
	held, err = KrakenHeld(herdOf(900, 900, 0, 0, 0))
	if err != nil || len(held) != 0 {
		t.Errorf("a series that took nothing back: %v, %v; want it left out", held, err)
	}
	if _, err := KrakenHeld(&kraken.Result{HeldByOrigin: map[string][]int64{"hub-1": {1, 2}}}); err == nil || !strings.Contains(err.Error(), "no single drop storm") {
		t.Errorf("no drop: %v, want a refusal", err)
	}
}
