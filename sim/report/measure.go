package report

import (
	"github.com/corralhq/corral/sim"
)

// Measures are figures of a run for the report: sim's summary of
// connection attempts and requests on held streams (kept apart, peaks over
// steps with enough attempts) with what the report adds from the steps:
// when the failures started and ended, when the busiest origin got its
// largest share of set-ups, and which origin held the largest share of the
// connections.
type Measures struct {
	// MinAttempts is the least number of attempts a step needs to count in
	// a peak (Summary.PeakMinAttempts).
	MinAttempts int64
	// AttemptFailPeak is the highest share of failed connection attempts
	// over steps with at least MinAttempts attempts, at AttemptFailPeakAt
	// (seconds of event time; -1 when no step has that many).
	AttemptFailPeak   float64
	AttemptFailPeakAt float64
	// AttemptFail is the share of failed attempts over the run.
	AttemptFail float64
	// FailingSeconds is the event time during which more than 1 % of a
	// step's attempts failed (steps with at least MinAttempts), within
	// FailingFrom to FailingTo (-1 when none did).
	FailingSeconds         float64
	FailingFrom, FailingTo float64
	// RequestFail is the share of requests on held streams that failed
	// over the run, RequestFailPeak the highest share in one step (with
	// at least MinAttempts requests).
	RequestFail, RequestFailPeak float64
	// NewShare is the largest share of a step's stream set-ups one origin
	// received (steps with at least MinAttempts attempts), NewShareOrigin
	// that origin and NewShareAt the step ("" and -1 without such a step).
	NewShare       float64
	NewShareOrigin string
	NewShareAt     float64
	// Busiest is the origin that held the largest share of the
	// connections at a step (of the steps holding at least a tenth of
	// the peak connections), BusiestShare that share and BusiestAt the
	// step's time; EvenShare is an origin's share when every up origin
	// holds the same.
	Busiest      string
	BusiestShare float64
	BusiestAt    float64
	EvenShare    float64
}

// failingShare is the share of a step's attempts above which the step
// counts as failing (as sim's Summary.AttemptErrorSeconds).
const failingShare = 0.01

// Measure returns the Measures of r.
func Measure(r *sim.Result) Measures {
	sum := r.Summary
	m := Measures{MinAttempts: sum.PeakMinAttempts, AttemptFailPeak: sum.AttemptErrorPeak, AttemptFailPeakAt: sum.AttemptErrorPeakAt,
		AttemptFail: sum.AttemptErrorAverage, FailingSeconds: sum.AttemptErrorSeconds, FailingFrom: -1, FailingTo: -1,
		RequestFail: sum.RequestErrorAverage, RequestFailPeak: sum.RequestErrorPeak, NewShare: sum.PeakNewShare, NewShareAt: -1, BusiestAt: -1}
	for _, s := range r.Steps {
		if s.Attempts >= m.MinAttempts {
			if s.AttemptErrorRate > failingShare {
				if m.FailingFrom < 0 {
					m.FailingFrom = s.T
				}
				m.FailingTo = s.T + r.Step
			}
			var all int64
			for _, o := range s.Origins {
				all += o.Attempts
			}
			for i, o := range s.Origins {
				if all > 0 && m.NewShareAt < 0 && i < len(r.Origins) && float64(o.Attempts)/float64(all) == sum.PeakNewShare && sum.PeakNewShareOrigin == i {
					m.NewShareOrigin, m.NewShareAt = r.Origins[i], s.T
				}
			}
		}
		var total int64
		up := 0
		for _, o := range s.Origins {
			total += o.Connected
			if o.Up {
				up++
			}
		}
		if total == 0 || total < sum.PeakConnected/10 {
			continue // a share of a handful of connections says nothing
		}
		for i, o := range s.Origins {
			share := float64(o.Connected) / float64(total)
			if share > m.BusiestShare && i < len(r.Origins) {
				m.Busiest, m.BusiestShare, m.BusiestAt = r.Origins[i], share, s.T
				m.EvenShare = 1 / float64(max(1, up))
			}
		}
	}
	return m
}

// failedAttempts is the number of connection attempts of s that failed,
// every cause.
func failedAttempts(s sim.Step) int64 {
	var n int64
	for _, e := range s.Errors {
		n += sum(e)
	}
	return n
}

func sum(xs []int64) int64 {
	var s int64
	for _, x := range xs {
		s += x
	}
	return s
}
