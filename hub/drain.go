package hub

import (
	"context"
	"math"
	"math/rand/v2"
	"time"

	"github.com/corralhq/corral/wire"
)

// Drain. Shutdown closes the listeners, then sends every session a GoAway
// with a jittered retry hint followed by a close frame (1001), paced at
// drain.rate per second. The pace is a floor, not a limit: when the
// sessions cannot all be reached at that rate within the drain deadline,
// the pace is raised (and logged) so that the last GoAway goes out by
// drainSendBy of the deadline, leaving the rest of it for the writers to
// flush. No session is ever cut without its GoAway and close frame because
// time ran out: a cut session reconnects at once, without a hint, with
// everyone else cut at the same moment, the herd the drain exists to
// prevent.

// drainSendBy is the share of drain.deadline within which every GoAway is
// sent; the rest of the deadline is for the frames to be written and the
// clients to leave.
const drainSendBy = 0.9

// stopFlush bounds how long Run waits, once it stops, for sessions that
// were sent their close to be written out and torn down, before it stops
// the WebSocket engine (which would cut them). A writer stuck on a peer
// that does not read is cut after min(1s, session.write_timeout) anyway.
const stopFlush = 5 * time.Second

// drainPlan returns the pace (GoAways per second) at which a drain of n
// sessions sends them, the time by which the last one is sent, and whether
// the pace was raised above cfg.Rate to meet the deadline. cfg has its
// defaults applied.
func drainPlan(n int, cfg DrainConfig) (pace float64, sendBy time.Duration, raised bool) {
	sendBy = time.Duration(float64(cfg.Deadline) * drainSendBy)
	pace = float64(cfg.Rate)
	if n <= 1 {
		return pace, sendBy, false
	}
	if sendBy <= 0 { // a deadline of nanoseconds: all at once
		return math.Max(pace, float64(n)*1e3), 0, true
	}
	// The first GoAway goes out at once, the other n-1 at the pace.
	if need := float64(n-1) / sendBy.Seconds(); need > pace {
		return need, sendBy, true
	}
	return pace, sendBy, false
}

// goAwayClose is the close of a session sent away by a drain or a stop: a
// GoAway whose retry hint is drain.retry_after plus up to 100 % jitter, so
// that the sessions of a hub do not all come back at the same moment.
func (h *Hub) goAwayClose(text string) wire.Close {
	base := h.drainCfg.RetryAfter
	jit := time.Duration(rand.Int64N(int64(base) + 1))
	return wire.Close{Code: wire.CloseGoingAway, RetryAfter: base + jit, Text: text}
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

// drain sends every session its GoAway at the pace of drainPlan, then
// waits for the sessions to leave until ctx ends. When ctx ends before
// every GoAway is sent, the rest are sent at once: never a cut.
func (h *Hub) drain(ctx context.Context) {
	sessions := h.snapshotSessions()
	n := len(sessions)
	if n == 0 {
		return
	}
	pace, sendBy, raised := drainPlan(n, h.drainCfg)
	if raised {
		h.log.Warn("hub: drain.deadline too short for drain.rate: raising the drain pace so that every session gets its GoAway",
			"sessions", n, "rate", h.drainCfg.Rate, "deadline", h.drainCfg.Deadline, "pace", int(math.Ceil(pace)), "last_goaway_by", sendBy)
	} else {
		h.log.Info("draining", "sessions", n, "pace", int(math.Ceil(pace)), "deadline", h.drainCfg.Deadline)
	}
	period := max(time.Duration(float64(time.Second)/pace), 5*time.Millisecond)
	tick := time.NewTicker(period)
	defer tick.Stop()
	start := time.Now()
	for sent := 0; sent < n; {
		// How many should be out by now: a late tick (a busy machine)
		// catches up instead of falling behind.
		due := n
		if el := time.Since(start); el < sendBy && ctx.Err() == nil {
			due = min(n, 1+int(el.Seconds()*pace))
		}
		for ; sent < due; sent++ {
			h.sendAway(sessions[sent], "hub draining")
		}
		if sent == n {
			break
		}
		select {
		case <-ctx.Done():
		case <-tick.C:
		}
	}
	h.awaitSessions(ctx)
}

// awaitSessions waits until no session is left or ctx ends.
func (h *Hub) awaitSessions(ctx context.Context) {
	t := time.NewTicker(10 * time.Millisecond)
	defer t.Stop()
	for h.Sessions() > 0 {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

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
