package report

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/corralhq/corral/scenario"
	"github.com/corralhq/corral/sim"
)

// synthetic is a run of 10 one-second steps over two origins: steps 3 to
// 5 have 10,000 attempts with 4,000, 1,000 and 50 failures, 70 % of step
// 3's set-ups at origin a; step 8 has 10 attempts, all failed (too few to
// count); origin a holds 3 of 4 connections at step 4; requests fail 1 in
// 100 at step 4. The summary is sim's for those steps.
func synthetic() *sim.Result {
	r := &sim.Result{Scenario: "syn", Variant: "dns=weighted", Devices: 1_000_000, Step: 1,
		Priorities: []string{"P0"}, Origins: []string{"a", "b"}, Causes: sim.CauseNames()}
	for i := range 10 {
		s := sim.Step{T: float64(i), Successes: []int64{0}, RequestErrors: []int64{0}, Requests: 1000,
			Origins: []sim.OriginStep{{Connected: 500_000, Up: true}, {Connected: 500_000, Up: true}}}
		for c := range s.Errors {
			s.Errors[c] = []int64{0}
		}
		switch i {
		case 3, 4, 5:
			s.Attempts = 10_000
			s.Errors[sim.CauseBacklog][0] = map[int]int64{3: 4000, 4: 1000, 5: 50}[i]
			s.Origins[0].Attempts, s.Origins[1].Attempts = 5000, 5000
			if i == 3 {
				s.Origins[0].Attempts, s.Origins[1].Attempts = 7000, 3000
			}
		case 8:
			s.Attempts = 10
			s.Errors[sim.CauseTimeout][0] = 10
			s.Origins[0].Attempts = 10
		}
		s.AttemptErrors = failedAttempts(s)
		if s.Attempts > 0 {
			s.AttemptErrorRate = float64(s.AttemptErrors) / float64(s.Attempts)
		}
		if i == 4 {
			s.Origins[0].Connected = 750_000
			s.Origins[1].Connected = 250_000
			s.RequestErrors[0] = 10
			s.RequestErrorRate = 0.01
		}
		r.Steps = append(r.Steps, s)
	}
	r.Summary = sim.Summary{PeakConnected: 1_000_000, FinalConnected: 1_000_000, Requests: 10_000, RequestErrors: 10, TimeToSettle: 4, P0Downtime: 2.5, PeakUtilisation: 0.9,
		Errors: map[string]int64{"backlog": 5050, "timeout": 10}, AttemptErrors: 5060,
		PeakMinAttempts: 100, AttemptErrorPeak: 0.4, AttemptErrorPeakAt: 3, AttemptErrorAverage: 5060.0 / 30010, AttemptErrorEvent: 0.2, AttemptErrorSeconds: 2,
		RequestErrorPeak: 0.01, RequestErrorAverage: 0.001, PeakNewShare: 0.7, PeakNewShareOrigin: 0}
	return r
}

func TestMeasure(t *testing.T) {
	m := Measure(synthetic())
	want := Measures{MinAttempts: 100, AttemptFailPeak: 0.4, AttemptFailPeakAt: 3, AttemptFail: 5060.0 / 30010,
		FailingSeconds: 2, FailingFrom: 3, FailingTo: 5, RequestFail: 0.001, RequestFailPeak: 0.01,
		NewShare: 0.7, NewShareOrigin: "a", NewShareAt: 3,
		Busiest: "a", BusiestShare: 0.75, BusiestAt: 4, EvenShare: 0.5}
	if m != want {
		t.Errorf("Measure:\n got %+v\nwant %+v", m, want)
	}
}

func TestVerdict(t *testing.T) {
	got := Verdict(synthetic())
	want := "dns=weighted: 40 % of connection attempts failed at the worst step (t = 3 s); more than 1 % failed for 2 s; " +
		"17 % of all attempts failed over the run. Concentration: a took 70 % of the new streams at t = 3 s; a held up to 75 % of the connections (at t = 4 s); an even share is 50 %. " +
		"The fullest origin reached 90 % of its connection capacity. 0.1 % of the requests on held streams failed (1 % at the worst step). " +
		"P0 devices were without a connection 2.5 s on average; the fleet settled 4 s after the last scheduled event (from then on 99 % of the devices online connected, at most 1 % of requests failing)."
	if got != want {
		t.Errorf("Verdict:\n got %s\nwant %s", got, want)
	}
}

// TestNarrowTableFits100Columns: the terminal table of a sweep with the
// longest variant names shipped (backoff x overload) fits 100 columns;
// --wide has every column.
func TestNarrowTableFits100Columns(t *testing.T) {
	var rs []*sim.Result
	for _, b := range []string{"none", "exponential", "decorrelated", "grpc"} {
		for _, o := range []string{"errors", "adaptive"} {
			r := synthetic()
			r.Variant = "backoff=" + b + " overload=" + o
			r.Summary.Attempts = 4_951_000_000
			r.Summary.TimeToSettle = -1
			rs = append(rs, r)
		}
	}
	var b bytes.Buffer
	if err := SummaryTable(rs, false).Write(&b); err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(strings.TrimSpace(b.String()), "\n") {
		if len(l) > 100 {
			t.Errorf("line of %d columns: %q", len(l), l)
		}
	}
	if !strings.Contains(b.String(), "backoff overload") || !strings.Contains(b.String(), "decorrelated adaptive") {
		t.Errorf("variant column:\n%s", b.String())
	}
	b.Reset()
	if err := SummaryTable(rs, true).Write(&b); err != nil {
		t.Fatal(err)
	}
	for _, c := range columns {
		if !strings.Contains(b.String(), c.head) {
			t.Errorf("wide table lacks %q", c.head)
		}
	}
}

func TestViewOpensOnTheEvent(t *testing.T) {
	sc := &scenario.Scenario{Traffic: scenario.Traffic{Arrivals: []scenario.Arrival{{At: 3 * time.Second}}}}
	r := synthetic()
	for i := 10; i < 100; i++ { // 90 calm steps after the event
		s := r.Steps[0]
		s.T = float64(i)
		r.Steps = append(r.Steps, s)
	}
	r.Summary.PeakAttemptsSec = 10_000
	if v := View(sc, []*sim.Result{r}); v != [2]float64{0, 38} {
		t.Errorf("View = %v, want [0 38] (the event at 3 s, the last failure at 8 s)", v)
	}
	if v := View(sc, []*sim.Result{synthetic()}); v != [2]float64{} {
		t.Errorf("View of a run that is all event = %v, want all", v)
	}
}
