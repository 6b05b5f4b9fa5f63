package edge

import (
	"context"
	"math"
	"math/rand/v2"
	"time"

	"github.com/corralhq/corral/wire"
)

// Drain and rebalancing. Shutdown closes the listeners, then sends every
// session a GoAway with a jittered retry hint followed by its close (1001),
// paced at drain.rate per second, raised when that pace cannot reach every
// session by drainSendBy of drain.deadline; no session is cut without its
// GoAway because time ran out. Each session also ends at max_session_age
// +-10 % (gRPC's A9 max connection age, jittered the same way), with the
// same jittered GoAway, so that long-lived sessions spread again over the
// edges and origins that came up since they connected.

// drainSendBy is the share of drain.deadline within which every GoAway is
// sent.
const drainSendBy = 0.9

// stopFlush bounds how long Run waits at its end for sessions that were
// sent their close to be written out.
const stopFlush = 5 * time.Second

// drainPlan returns the pace (GoAways per second) of a drain of n
// sessions, the time by which the last one is sent, and whether the pace
// was raised above cfg.Rate to meet the deadline.
func drainPlan(n int, cfg DrainConfig) (pace float64, sendBy time.Duration, raised bool) {
	sendBy = time.Duration(float64(cfg.Deadline) * drainSendBy)
	pace = float64(cfg.Rate)
	if n <= 1 {
		return pace, sendBy, false
	}
	if sendBy <= 0 {
		return math.Max(pace, float64(n)*1e3), 0, true
	}
	if need := float64(n-1) / sendBy.Seconds(); need > pace {
		return need, sendBy, true
	}
	return pace, sendBy, false
}

// jitterAge returns age +-10 %, uniformly.
func jitterAge(age time.Duration) time.Duration {
	spread := int64(age) / 5 // 20 % wide
	if spread <= 0 {
		return age
	}
	return age - time.Duration(spread/2) + time.Duration(rand.Int64N(spread+1))
}

// retryHint is drain.retry_after plus up to 100 % jitter: the hint of a
// session the edge sends away (drain, max age, a broken Relay stream, no
// origin), so that those sessions do not all come back at once.
func (e *Edge) retryHint() time.Duration {
	base := e.drainCfg.RetryAfter
	return base + time.Duration(rand.Int64N(int64(base)+1))
}

// goAwayClose is a 1001 close with a jittered retry hint.
func (e *Edge) goAwayClose(text string) wire.Close {
	return wire.Close{Code: wire.CloseGoingAway, RetryAfter: e.retryHint(), Text: text}
}

// sendAway closes s with a jittered GoAway and counts it, unless s was
// already closing.
func (e *Edge) sendAway(s *session, text string) {
	if s.close(e.goAwayClose(text), true) {
		e.metrics.shed.WithLabelValues("drain", priorityLabel(int(s.rank))).Inc()
	}
}

// drain sends every session its GoAway at the pace of drainPlan, then
// waits for the sessions to leave until ctx ends. When ctx ends before
// every GoAway is sent, the rest are sent at once: never a cut.
func (e *Edge) drain(ctx context.Context) {
	sessions := e.snapshotSessions()
	n := len(sessions)
	if n == 0 {
		return
	}
	pace, sendBy, raised := drainPlan(n, e.drainCfg)
	if raised {
		e.log.Warn("edge: drain.deadline too short for drain.rate: raising the drain pace so that every session gets its GoAway",
			"sessions", n, "rate", e.drainCfg.Rate, "deadline", e.drainCfg.Deadline, "pace", int(math.Ceil(pace)))
	} else {
		e.log.Info("draining", "sessions", n, "pace", int(math.Ceil(pace)), "deadline", e.drainCfg.Deadline)
	}
	period := max(time.Duration(float64(time.Second)/pace), 5*time.Millisecond)
	tick := time.NewTicker(period)
	defer tick.Stop()
	start := time.Now()
	for sent := 0; sent < n; {
		due := n
		if el := time.Since(start); el < sendBy && ctx.Err() == nil {
			due = min(n, 1+int(el.Seconds()*pace))
		}
		for ; sent < due; sent++ {
			e.sendAway(sessions[sent], "edge draining")
		}
		if sent == n {
			break
		}
		select {
		case <-ctx.Done():
		case <-tick.C:
		}
	}
	e.awaitSessions(ctx)
}

// awaitSessions waits until no session is left or ctx ends.
func (e *Edge) awaitSessions(ctx context.Context) {
	t := time.NewTicker(10 * time.Millisecond)
	defer t.Stop()
	for e.Sessions() > 0 {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// stopSessions is Run's last word to the sessions still open: a jittered
// GoAway and a close each, then a bounded wait for them to be written.
func (e *Edge) stopSessions() {
	for _, s := range e.snapshotSessions() {
		e.sendAway(s, "edge stopped")
	}
	ctx, cancel := context.WithTimeout(context.Background(), stopFlush)
	defer cancel()
	e.awaitSessions(ctx)
	if n := e.Sessions(); n > 0 {
		e.log.Warn("edge: sessions not closed in time, cutting them", "sessions", n, "waited", stopFlush)
	}
}
