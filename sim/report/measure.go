package report

import (
	"github.com/corralhq/corral/sim"
)

// FailingShare is the share of a step's connection attempts that fail for
// the step to count as failing in Measures.FailingSeconds.
const FailingShare = 0.01

// Measures are figures of a run that the report derives from its steps:
// connection attempts and requests on held streams apart, the peak over
// steps with enough attempts to mean something, and how long the failures
// lasted.
type Measures struct {
	// MinAttempts is the least number of attempts a step needs for its
	// share of failed attempts to count in AttemptFailPeak: the larger of
	// 100 and one device in 10,000.
	MinAttempts int64
	// AttemptFailPeak is the highest share of failed connection attempts
	// over steps with at least MinAttempts attempts, at AttemptFailPeakAt
	// (seconds of event time); 0 and -1 when no step has that many.
	AttemptFailPeak   float64
	AttemptFailPeakAt float64
	// AttemptFail is the share of failed attempts over the run.
	AttemptFail float64
	// FailingSeconds is the event time during which at least FailingShare
	// of a step's attempts failed (steps with at least MinAttempts), from
	// FailingFrom to FailingTo (-1 when none did).
	FailingSeconds         float64
	FailingFrom, FailingTo float64
	// RequestFail is the share of requests on held streams that failed
	// over the run, RequestFailPeak the highest share in one step.
	RequestFail, RequestFailPeak float64
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

// Measure derives the Measures of r from its steps.
func Measure(r *sim.Result) Measures {
	m := Measures{MinAttempts: max(100, r.Devices/10_000), AttemptFailPeakAt: -1, FailingFrom: -1, FailingTo: -1, BusiestAt: -1}
	var attempts, failed, requests, reqFailed int64
	for _, s := range r.Steps {
		f := failedAttempts(s)
		attempts += s.Attempts
		failed += f
		rf := sum(s.RequestErrors)
		requests += s.Requests
		reqFailed += rf
		if s.Requests > 0 {
			m.RequestFailPeak = max(m.RequestFailPeak, float64(rf)/float64(s.Requests))
		}
		if s.Attempts >= m.MinAttempts {
			share := float64(f) / float64(s.Attempts)
			if share > m.AttemptFailPeak {
				m.AttemptFailPeak, m.AttemptFailPeakAt = share, s.T
			}
			if share >= FailingShare {
				m.FailingSeconds += r.Step
				if m.FailingFrom < 0 {
					m.FailingFrom = s.T
				}
				m.FailingTo = s.T + r.Step
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
		if total == 0 || total < r.Summary.PeakConnected/10 {
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
	if attempts > 0 {
		m.AttemptFail = float64(failed) / float64(attempts)
	}
	if requests > 0 {
		m.RequestFail = float64(reqFailed) / float64(requests)
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
