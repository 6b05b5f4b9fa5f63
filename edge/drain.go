package edge

import (
	"context"
	"math"
	"math/rand/v2"
	"time"

	"github.com/corralhq/corral/internal/drain"
	"github.com/corralhq/corral/wire"
)

// Drain and rebalancing. Shutdown closes the listeners, then sends every
// session a GoAway with a jittered retry hint followed by its close (1001),
// paced at drain.rate per second, raised when that pace cannot reach every
// session by drain.SendBy of drain.deadline (internal/drain plans and
// paces it); no session is cut without its GoAway because time ran out.
// Each session also ends at max_session_age +-10 % (gRPC's A9 max
// connection age, jittered the same way), with the same jittered GoAway,
// so that long-lived sessions spread again over the edges and origins that
// came up since they connected.

// stopFlush bounds how long Run waits at its end for sessions that were
// sent their close to be written out.
const stopFlush = 5 * time.Second

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
	return drain.Hint(e.drainCfg.RetryAfter)
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

// drain sends every session its GoAway at the pace of drain.NewPlan, then
// waits for the sessions to leave until ctx ends. When ctx ends before
// every GoAway is sent, the rest are sent at once: never a cut.
func (e *Edge) drain(ctx context.Context) {
	sessions := e.snapshotSessions()
	n := len(sessions)
	if n == 0 {
		return
	}
	plan := drain.NewPlan(n, e.drainCfg.Rate, e.drainCfg.Deadline)
	if plan.Raised {
		e.log.Warn("edge: drain.deadline too short for drain.rate: raising the drain pace so that every session gets its GoAway",
			"sessions", n, "rate", e.drainCfg.Rate, "deadline", e.drainCfg.Deadline, "pace", int(math.Ceil(plan.Pace)))
	} else {
		e.log.Info("draining", "sessions", n, "pace", int(math.Ceil(plan.Pace)), "deadline", e.drainCfg.Deadline)
	}
	plan.Send(ctx, func(i int) { e.sendAway(sessions[i], "edge draining") })
	e.awaitSessions(ctx)
}

// awaitSessions waits until no session is left or ctx ends.
func (e *Edge) awaitSessions(ctx context.Context) { drain.Await(ctx, e.Sessions) }

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
