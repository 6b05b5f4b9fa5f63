package main

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/corralhq/corral/kraken"
	"github.com/corralhq/corral/sim"
)

// Figures are what the comparison compares, read the same way from a
// kraken result and from a sim result of one storm (a drop of every
// session at one time).
type Figures struct {
	// Share is each origin's share of the sessions held at the end of the
	// run, by origin name (a hub's node id, the sim's origin name).
	Share map[string]float64
	// PeakErrorRate is the highest share of failed attempts among the
	// attempts that ended (failed or welcomed) in a whole second from the
	// drop on, over the seconds in which at least MinAttempts ended (0
	// when none failed).
	PeakErrorRate float64
	// Back99 is the time from the drop until 99 % of the dropped devices
	// held a session again; -1 when they never did within the run.
	Back99 time.Duration
	// AttemptsPerDevice is the attempts started from the drop on over the
	// devices dropped; an attempt is one try of one origin (a kraken
	// device's connect; in the sim an origin's Attempts), so a round
	// over several origins counts each.
	AttemptsPerDevice float64
	// Dropped is the number of sessions the drop cut.
	Dropped int64
	// Failed is the number of attempts (tries of one origin) from the
	// drop on that failed.
	Failed int64
	// Failures counts the failed attempts by kind (kraken's over the
	// whole run, its warm-up included; the sim's from the drop on):
	// "refused" (the origin turned the attempt away at once), "timeout"
	// (the attempt did not end within the client's connect timeout),
	// "down" (no origin listening); any other kind is one the sim does
	// not model, named by kraken's reason.
	Failures map[string]int64
}

// MinAttempts is the fewest attempts that end in a second for it to count for the
// peak error rate: a second of three attempts and one failure is no
// peak. It is a hundredth of the devices, at least 10.
func MinAttempts(devices int64) int64 { return max(10, devices/100) }

// krakenKind maps a kraken failure reason to the kind of failure the sim
// models, or returns the reason itself when the sim has no such kind.
func krakenKind(reason string) string {
	switch {
	case reason == "close_1013", strings.HasPrefix(reason, "http_5"):
		return "refused" // 1013 try again later, an HTTP 503 refusal
	case reason == "timeout", reason == "dial_timeout":
		return "timeout"
	case reason == "dial_refused":
		return "down"
	}
	return reason
}

// simKind maps a sim failure cause to the kind of failure kraken sees.
func simKind(c string) string {
	switch c {
	case "backlog", "capacity", "shed":
		return "refused"
	}
	return c // timeout, down
}

// FromKraken reads the figures of r, a run with one drop storm.
func FromKraken(r *kraken.Result) (Figures, error) {
	if len(r.Storms) != 1 || r.Storms[0].Kind != "drop" {
		return Figures{}, errors.New("calibrate: the kraken result has no single drop storm")
	}
	s := r.Storms[0]
	f := Figures{Share: map[string]float64{}, Dropped: s.Dropped, Back99: -1, Failures: map[string]int64{}}
	if s.Dropped == 0 {
		return f, errors.New("calibrate: the kraken drop cut no session")
	}
	// From the storm's start, as the sim counts it: kraken's back_99_ms
	// counts each device from its own cut, and the drop loop reaches the
	// last of 50,000 a while after the storm's start.
	if s.BackSince == nil {
		return f, errors.New("calibrate: the kraken result has no back_since (a kraken from before it): run it again")
	}
	if s.Since99Ms != nil {
		f.Back99 = time.Duration(*s.Since99Ms * float64(time.Millisecond))
	}
	from := int(s.AtSeconds)
	var total int64
	for name, series := range r.HeldByOrigin {
		if len(series) > 0 {
			f.Share[name] = float64(series[len(series)-1])
			total += series[len(series)-1]
		}
	}
	for name := range f.Share {
		f.Share[name] /= float64(max(total, 1))
	}
	// The attempts that ended in a second: its failures and its Welcomes
	// (the rise of the sessions held, plus the drop's cuts in its
	// second). A failure counts in the second it ends, an attempt in the
	// second it starts: over the attempts started, a second after a stall
	// can fail more than it started.
	var attempts int64
	minA := MinAttempts(r.Devices)
	for sec := from; sec < len(r.AttemptsPerSecond); sec++ {
		attempts += r.AttemptsPerSecond[sec]
		var failed int64
		for _, series := range r.FailuresPerSecond {
			if sec < len(series) {
				failed += series[sec]
			}
		}
		if sec < 1 || sec >= len(r.HeldPerSecond) {
			continue
		}
		welcomes := r.HeldPerSecond[sec] - r.HeldPerSecond[sec-1]
		if sec == from {
			welcomes += s.Dropped
		}
		if ended := failed + max(0, welcomes); ended >= minA {
			f.PeakErrorRate = max(f.PeakErrorRate, float64(failed)/float64(ended))
		}
	}
	f.AttemptsPerDevice = float64(attempts) / float64(s.Dropped)
	for _, series := range r.FailuresPerSecond {
		for sec, v := range series {
			if sec >= from {
				f.Failed += v
			}
		}
	}
	// The reasons are the whole run's (the warm-up's too: kraken counts
	// them by reason, not by second).
	for reason, c := range r.Failures {
		if strings.HasPrefix(reason, "subscribe_") {
			continue // a channel's refusal on a held session, not an attempt's
		}
		if n := c.Total(); n > 0 {
			f.Failures[krakenKind(reason)] += n
		}
	}
	return f, nil
}

// FromSim reads the figures of r, a run of a scenario whose only storm is
// a drop at dropAt.
func FromSim(r *sim.Result, dropAt time.Duration) (Figures, error) {
	f := Figures{Share: map[string]float64{}, Back99: -1, Failures: map[string]int64{}}
	if len(r.Steps) == 0 {
		return f, errors.New("calibrate: the sim result has no steps")
	}
	step := time.Duration(r.Step * float64(time.Second))
	k := slices.IndexFunc(r.Steps, func(s sim.Step) bool { return time.Duration(s.T*float64(time.Second)) >= dropAt-step/2 })
	if k < 1 {
		return f, fmt.Errorf("calibrate: the sim run has no step before the drop at %v", dropAt)
	}
	before := r.Steps[k-1].Connected
	for _, s := range r.Steps[k:] {
		f.Dropped += s.Dropped
	}
	if f.Dropped == 0 {
		return f, errors.New("calibrate: the sim drop cut no session")
	}
	need := before - f.Dropped/100 // 99 % of the dropped back
	last := r.Steps[len(r.Steps)-1]
	var total int64
	for i, o := range last.Origins {
		f.Share[r.Origins[i]] = float64(o.Connected)
		total += o.Connected
	}
	for name := range f.Share {
		f.Share[name] /= float64(max(total, 1))
	}
	// Whole seconds of event time, as kraken's series count them.
	type second struct{ ended, failed int64 }
	secs := map[int]*second{}
	var attempts int64
	for _, s := range r.Steps[k:] {
		sec := int(math.Floor(s.T + 1e-9))
		if secs[sec] == nil {
			secs[sec] = &second{}
		}
		for _, v := range s.Successes {
			secs[sec].ended += v
		}
		// Every try that reached an origin, as kraken counts every
		// connect: a device's round (edge.attempts) tries several
		// origins before it backs off, and each refusal is an attempt
		// that failed. The device-level counts (Step.Attempts,
		// AttemptErrors) see one attempt per round.
		for _, o := range s.Origins {
			attempts += o.Attempts
			for c, v := range o.Failures {
				if v > 0 {
					secs[sec].ended += v
					secs[sec].failed += v
					f.Failed += v
					f.Failures[simKind(r.Causes[c])] += v
				}
			}
		}
		if f.Back99 < 0 && s.Connected >= need {
			f.Back99 = time.Duration((s.T+r.Step)*float64(time.Second)) - dropAt
		}
	}
	minA := MinAttempts(r.Devices)
	for _, s := range secs {
		if s.ended >= minA {
			f.PeakErrorRate = max(f.PeakErrorRate, float64(s.failed)/float64(s.ended))
		}
	}
	f.AttemptsPerDevice = float64(attempts) / float64(f.Dropped)
	return f, nil
}

// Mean is the mean of several runs' figures (each seed's): shares,
// rates, times and attempts averaged, failures added; Back99 is -1 when
// any run never got 99 % back.
func Mean(fs []Figures) Figures {
	m := Figures{Share: map[string]float64{}, Failures: map[string]int64{}}
	if len(fs) == 0 {
		return m
	}
	n := float64(len(fs))
	var back time.Duration
	never := false
	for _, f := range fs {
		for k, v := range f.Share {
			m.Share[k] += v / n
		}
		for k, v := range f.Failures {
			m.Failures[k] += v
		}
		m.PeakErrorRate += f.PeakErrorRate / n
		m.AttemptsPerDevice += f.AttemptsPerDevice / n
		m.Dropped += f.Dropped
		m.Failed += f.Failed
		if f.Back99 < 0 {
			never = true
		}
		back += f.Back99
	}
	m.Back99 = back / time.Duration(len(fs))
	if never {
		m.Back99 = -1
	}
	return m
}
