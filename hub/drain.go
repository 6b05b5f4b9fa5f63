package hub

import (
	"context"
	"math"
	"time"

	"github.com/corralhq/corral/internal/drain"
	"github.com/corralhq/corral/wire"
)

// Drain. Shutdown closes the listeners, then sends every session a GoAway
// with a jittered retry hint followed by a close frame (1001), paced at
// drain.rate per second, raised (and logged) when that pace cannot reach
// every session by drain.SendBy of the deadline: internal/drain plans and
// paces it, and says why no session is ever cut without its GoAway.

// stopFlush bounds how long Run waits, once it stops, for sessions that
// were sent their close to be written out and torn down, before it stops
// the WebSocket engine (which would cut them). A writer stuck on a peer
// that does not read is cut after min(1s, session.write_timeout) anyway.
const stopFlush = 5 * time.Second

// goAwayClose is the close of a session sent away by a drain or a stop: a
// GoAway whose retry hint is drain.retry_after plus up to 100 % jitter, so
// that the sessions of a hub do not all come back at the same moment.
func (h *Hub) goAwayClose(text string) wire.Close {
	return wire.Close{Code: wire.CloseGoingAway, RetryAfter: drain.Hint(h.drainCfg.RetryAfter), Text: text}
}

// sendAway closes s with a jittered GoAway and counts it, unless s was
// already closing: a session the drain sent away that is still leaving
// when its deadline ends is met again by stopSessions, and must neither
// get a second GoAway nor be counted twice.
func (h *Hub) sendAway(s *session, text string) {
	rank := 2
	if s.helloDone.Load() {
		rank = int(s.rank)
	}
	if s.close(h.goAwayClose(text), true) {
		h.metrics.shedInc("drain", rank)
	}
}

// drain sends every session its GoAway at the pace of drain.NewPlan, then
// waits for the sessions to leave until ctx ends. When ctx ends before
// every GoAway is sent, the rest are sent at once: never a cut.
func (h *Hub) drain(ctx context.Context) {
	sessions := h.snapshotSessions()
	n := len(sessions)
	if n == 0 {
		return
	}
	plan := drain.NewPlan(n, h.drainCfg.Rate, h.drainCfg.Deadline)
	if plan.Raised {
		h.log.Warn("hub: drain.deadline too short for drain.rate: raising the drain pace so that every session gets its GoAway",
			"sessions", n, "rate", h.drainCfg.Rate, "deadline", h.drainCfg.Deadline, "pace", int(math.Ceil(plan.Pace)), "last_goaway_by", plan.SendBy)
	} else {
		h.log.Info("draining", "sessions", n, "pace", int(math.Ceil(plan.Pace)), "deadline", h.drainCfg.Deadline)
	}
	plan.Send(ctx, func(i int) { h.sendAway(sessions[i], "hub draining") })
	h.awaitSessions(ctx)
}

// awaitSessions waits until no session is left or ctx ends.
func (h *Hub) awaitSessions(ctx context.Context) { drain.Await(ctx, h.Sessions) }

// stopSessions is Run's last word to the sessions still open (none after
// a drain; all of them when Run's context ends without Shutdown): a
// jittered GoAway and a close frame each, then a bounded wait for them to
// be written before the transports stop.
func (h *Hub) stopSessions() {
	for _, s := range h.snapshotSessions() {
		h.sendAway(s, "hub stopped")
	}
	ctx, cancel := context.WithTimeout(context.Background(), stopFlush)
	defer cancel()
	h.awaitSessions(ctx)
	if n := h.Sessions(); n > 0 {
		h.log.Warn("hub: sessions not closed in time, cutting them", "sessions", n, "waited", stopFlush)
	}
}
