package main

import (
	"math"
	"strings"
	"testing"
	"time"
)

// tornDown is a return of 100 set-ups a second during a teardown of 2 s,
// then 2,800 in 1.5 s.
var tornDown = []point{{0, 0}, {2, 200}, {3.5, 3000}}

// TestTeardownOfTheHubsCount: a hub that tears its 3,000 dropped sessions
// down over 2 s (1,500 a second) while it sets up 100 a second, then
// takes the rest back at 2,800 in 1.5 s, reads a teardown part of 0.2 to
// 1.8 s after the drop, a steady part of 2,400 over 2.054-3.339 s
// (1,866.7 a second), and a rate alone of 1,500 / (1 - 100/1,866.7) =
// 1,584.9 a second: the time its set-ups took is given back. A teardown
// within a reading is refused as too short for the readings; one during
// which the hub set up sessions at more than half its steady rate is
// refused as not holding it busy.
func TestTeardownOfTheHubsCount(t *testing.T) {
	rs := readingsOf(2, tornDown)
	st, err := steadyOfOpens(rs, 1)
	if err != nil {
		t.Fatal(err)
	}
	if math.Abs(st.Rate()-1866.7) > 19 {
		t.Fatalf("steady rate %.1f/s, want 1,866.7", st.Rate())
	}
	td, after, err := teardownOfOpens(rs, 1, st)
	if err != nil {
		t.Fatal(err)
	}
	if after != st {
		t.Errorf("a steady part that starts after the teardown was re-timed: %+v, was %+v", after, st)
	}
	if td.Cut != 3000 || (td.From-200*time.Millisecond).Abs() > 5*time.Millisecond || (td.To-1800*time.Millisecond).Abs() > 5*time.Millisecond {
		t.Errorf("teardown part %+v, want 3,000 cut over 0.2-1.8 s", td)
	}
	if o := td.Observed(); math.Abs(o-1500) > 15 {
		t.Errorf("observed %.1f ends/s, want 1,500", o)
	}
	if a := td.Alone(st.Rate()); math.Abs(a-1584.9) > 16 {
		t.Errorf("alone %.1f ends/s, want 1,584.9", a)
	}
	in := Inputs{Steady: map[string]Steady{"hub-1": st}, Teardown: map[string]Teardown{"hub-1": td}, Every: 100 * time.Millisecond}
	if mean, _ := in.TeardownRate(); math.Abs(mean-td.Alone(st.Rate())) > 1e-9 {
		t.Errorf("TeardownRate %.1f, want the one hub's %.1f", mean, td.Alone(st.Rate()))
	}

	// A return whose tenth comes during the teardown (200 set-ups a
	// second, then 2,600 in 1.5 s): its steady part starts at the
	// teardown's end (1.8 s, 360 set up) and runs to nine tenths (2,700 at
	// 3.327 s).
	rs = readingsOf(2, []point{{0, 0}, {2, 400}, {3.5, 3000}})
	if st, err = steadyOfOpens(rs, 1); err != nil {
		t.Fatal(err)
	}
	if _, after, err = teardownOfOpens(rs, 1, st); err != nil {
		t.Fatal(err)
	}
	if want := (2700.0 - 360) / (2 + 2300/(2600/1.5) - 1.8); (after.From-1800*time.Millisecond).Abs() > 5*time.Millisecond || math.Abs(after.Rate()-want) > want/100 {
		t.Errorf("re-timed steady part %+v at %.1f/s, want from 1.8 s at %.1f/s", after, after.Rate(), want)
	}

	for _, c := range []struct {
		name string
		rs   []Sample
		want string
	}{
		{"teardown within a reading", readingsOf(0.1, steadyReturn), "give the herd more devices"},
		{"set-ups during the teardown", readingsOf(2, []point{{0, 0}, {2, 1600}, {3.5, 3000}}), "did not hold it busy"},
	} {
		st, err := steadyOfOpens(c.rs, 1)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if _, _, err := teardownOfOpens(c.rs, 1, st); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want a refusal saying %q", c.name, err, c.want)
		}
	}
}

// TestApplyTeardown: a measured teardown rate is written into the file's
// teardown_per_second line and decodes; without one the line is
// commented out with the reason, so the calibrated file charges nothing
// for an end rather than the shipped file's figure.
func TestApplyTeardown(t *testing.T) {
	src := []byte("name: c\nseed: 1\nduration: 10s\npopulation: {devices: 10, initial: 10}\ndns: {policy: multivalue}\norigins:\n  - name: hub\n    headroom: 2\n    max_new_per_second: 1\n    handshake_latency: 1ms\n    backlog: 0\n    teardown_per_second: 5700\n")
	rs := readingsOf(2, tornDown)
	st, err := steadyOfOpens(rs, 1)
	if err != nil {
		t.Fatal(err)
	}
	td, _, err := teardownOfOpens(rs, 1, st)
	if err != nil {
		t.Fatal(err)
	}
	in := Inputs{Steady: map[string]Steady{"hub-1": st}, Every: 100 * time.Millisecond, HandshakeLatency: time.Millisecond}
	without, err := Apply("c.yaml", src, in, 2)
	if err != nil {
		t.Fatal(err)
	}
	in.Teardown = map[string]Teardown{"hub-1": td}
	with, err := Apply("c.yaml", src, in, 2)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(with), "teardown_per_second: 158") {
		t.Errorf("measured: the file says\n%s\nwant teardown_per_second: 158x", with)
	}
	if strings.Contains(string(without), "teardown_per_second: ") || !strings.Contains(string(without), "# teardown_per_second not measured") {
		t.Errorf("not measured: the file says\n%s\nwant the line commented out", without)
	}
}
