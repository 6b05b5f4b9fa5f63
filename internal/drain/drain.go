// Package drain paces the GoAways of a server's graceful shutdown: the
// plan (how fast, by when), the loop that sends them in order at that
// pace, the wait for the sessions to leave, and the jittered retry hint.
// The hub and the edge drain with it; what a GoAway is and how a session
// is sent away stays theirs, passed in as callbacks. It imports nothing of
// corral.
//
// The pace is a floor, not a limit: when the sessions cannot all be
// reached at the configured rate within the deadline, the pace is raised
// so that the last GoAway goes out by SendBy of the deadline, leaving the
// rest of it for the writers to flush. No session is ever cut without its
// GoAway because time ran out: a cut session reconnects at once, without a
// hint, with everyone else cut at the same moment, the herd the drain
// exists to prevent.
package drain

import (
	"context"
	"math"
	"math/rand/v2"
	"time"
)

// SendBy is the share of the drain deadline within which every GoAway is
// sent; the rest of the deadline is for the frames to be written and the
// clients to leave.
const SendBy = 0.9

// minPeriod bounds how often the pacing loop wakes: at a higher pace it
// sends several GoAways a tick.
const minPeriod = 5 * time.Millisecond

// awaitPoll is how often Await looks at the number of sessions left.
const awaitPoll = 10 * time.Millisecond

// Plan is the pace of a drain of N sessions. The zero value sends nothing.
// A Plan is a value: safe to copy and to use from several goroutines.
type Plan struct {
	// N is how many sessions the drain sends away.
	N int
	// Pace is how many GoAways a second it sends.
	Pace float64
	// SendBy is the time, from the start, by which the last one is sent.
	SendBy time.Duration
	// Raised says that Pace was raised above the rate to meet the
	// deadline.
	Raised bool
}

// NewPlan returns the plan of a drain of n sessions at rate GoAways a
// second at least, within deadline: the first GoAway goes out at once, the
// other n-1 at the pace, the last by SendBy of the deadline.
func NewPlan(n, rate int, deadline time.Duration) Plan {
	p := Plan{N: n, Pace: float64(rate), SendBy: time.Duration(float64(deadline) * SendBy)}
	if n <= 1 {
		return p
	}
	if p.SendBy <= 0 { // a deadline of nanoseconds: all at once
		p.Pace, p.SendBy, p.Raised = math.Max(p.Pace, float64(n)*1e3), 0, true
		return p
	}
	if need := float64(n-1) / p.SendBy.Seconds(); need > p.Pace {
		p.Pace, p.Raised = need, true
	}
	return p
}

// Send calls send(i) for i from 0 to N-1, in order, at the plan's pace,
// and returns after the last. A late tick (a busy machine) catches up
// instead of falling behind; once SendBy has passed or ctx has ended, the
// rest are sent at once: never a session left without its GoAway.
func (p Plan) Send(ctx context.Context, send func(i int)) {
	if p.N <= 0 {
		return
	}
	period := minPeriod
	if p.Pace > 0 {
		period = max(time.Duration(float64(time.Second)/p.Pace), minPeriod)
	}
	tick := time.NewTicker(period)
	defer tick.Stop()
	start := time.Now()
	for sent := 0; sent < p.N; {
		// How many should be out by now.
		due := p.N
		if el := time.Since(start); el < p.SendBy && ctx.Err() == nil {
			due = min(p.N, 1+int(el.Seconds()*p.Pace))
		}
		for ; sent < due; sent++ {
			send(sent)
		}
		if sent == p.N {
			break
		}
		select {
		case <-ctx.Done():
		case <-tick.C:
		}
	}
}

// Await waits until left() is 0 or ctx ends, looking every 10 ms.
func Await(ctx context.Context, left func() int) {
	t := time.NewTicker(awaitPoll)
	defer t.Stop()
	for left() > 0 {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Hint returns base plus up to 100 % jitter, uniformly: the retry hint of
// a session sent away, so that the sessions of a server do not all come
// back at the same moment. A base of 0 or less is returned as it is.
func Hint(base time.Duration) time.Duration {
	if base <= 0 {
		return base
	}
	return base + time.Duration(rand.Int64N(int64(base)+1))
}
