package edge

import (
	"cmp"
	"context"
	"fmt"
	"os"
	rtmetrics "runtime/metrics"
	"slices"
	"time"

	"github.com/corralhq/corral/internal/lifecycle"
	"github.com/corralhq/corral/limit"
	"github.com/corralhq/corral/wire"
)

// Admission, as on the hub (hub/overload.go) and with the same limit code:
//
//   - the handshake Limiter: a slot from the device's Hello to the
//     origin's Welcome; the latency of that handshake is its sample (a
//     session that lives for hours is never one), and a handshake the
//     origin fails (overload, timeout, a broken stream) is a drop;
//   - the message Limiter: a slot per device Publish sent up, until the
//     origin answers it;
//   - the staged Shedder: fed the handshake latencies, the Go heap and the
//     open descriptors; it admits new sessions by priority and says how
//     many open ones to sever, lowest priority first. P0 is refused and
//     severed only in its lifeboat stage.
//
// The refusals carry hints: a Hello or Publish refused gets 1013 with a
// retry hint (a gRPC device: Unavailable with grpc-retry-pushback-ms); a
// WebSocket upgrade refused before any Hello (draining, or the lifeboat
// stage, which refuses every priority) gets HTTP 503 with Retry-After; a
// severed session gets GoAway(retry_after), then 1001.

// admission holds the edge's limiters; all nil when admission is off.
type admission struct {
	handshake *limit.Limiter
	messages  *limit.Limiter
	shedder   *limit.Shedder
}

func (a *admission) init(cfg AdmissionConfig) error {
	if !cfg.Enabled {
		return nil
	}
	// The edge's handshake latency is mostly its origins': latency alone
	// takes the stage to sever-p1 at most, never to the lifeboat that
	// refuses P0 (an origin that can take no P0 says so itself, and its
	// refusal reaches the device unchanged). Resources still can.
	cfg.Shedder.LatencyCeiling = cmp.Or(cfg.Shedder.LatencyCeiling, limit.StageSeverP1)
	var err error
	if a.shedder, err = limit.NewShedder(cfg.Shedder); err != nil {
		return fmt.Errorf("edge: admission.shedder: %w", err)
	}
	if a.handshake, err = limit.NewLimiter(cfg.Handshake); err != nil {
		return fmt.Errorf("edge: admission.handshake: %w", err)
	}
	if a.messages, err = limit.NewLimiter(cfg.Messages); err != nil {
		return fmt.Errorf("edge: admission.messages: %w", err)
	}
	return nil
}

// admitSession asks the Shedder about a new session of rank.
func (a *admission) admitSession(rank int, now time.Time) (time.Duration, bool) {
	if a.shedder == nil {
		return 0, true
	}
	d := a.shedder.AdmitAt(limiterPriority(rank), now)
	return d.RetryAfter, d.Admit
}

// acquireHandshake takes a handshake slot for rank; held is false when
// there is no Limiter (nothing to release).
func (a *admission) acquireHandshake(rank int, now time.Time) (tok limit.Token, held bool, retry time.Duration, ok bool) {
	return a.acquire(a.handshake, rank, now)
}

// acquireMessage takes a message slot for a Publish of rank.
func (a *admission) acquireMessage(rank int, now time.Time) (tok limit.Token, held bool, retry time.Duration, ok bool) {
	return a.acquire(a.messages, rank, now)
}

func (a *admission) acquire(l *limit.Limiter, rank int, now time.Time) (limit.Token, bool, time.Duration, bool) {
	if l == nil {
		return limit.Token{}, false, 0, true
	}
	tok, ok := l.TryAcquirePriority(limiterPriority(rank))
	if !ok {
		ra := time.Second
		if a.shedder != nil {
			ra = a.shedder.RetryAfterAt(limiterPriority(rank), now)
		}
		return limit.Token{}, false, ra, false
	}
	return tok, true, 0, true
}

// observeHandshake feeds a handshake latency to the Shedder.
func (a *admission) observeHandshake(d time.Duration) {
	if a.shedder != nil {
		a.shedder.Observe(d)
	}
}

// refuseConnection reports whether a new device connection is refused
// before its Hello, and the hint: while draining, and in the lifeboat
// stage (which refuses P0 too: no Hello could be admitted).
func (e *Edge) refuseConnection() (time.Duration, bool) {
	now := e.now()
	if e.draining.Load() {
		return e.retryHint(), true
	}
	if sh := e.adm.shedder; sh != nil && !sh.Stage().Admits(limit.P0) {
		e.metrics.shed.WithLabelValues("reject_connection", "p0").Inc()
		return sh.RetryAfterAt(limit.P0, now), true
	}
	return 0, false
}

// observeResources feeds the Go heap and the open descriptors to the
// Shedder.
func (a *admission) observeResources() {
	s := []rtmetrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	rtmetrics.Read(s)
	heap := uint64(0)
	if s[0].Value.Kind() == rtmetrics.KindUint64 {
		heap = s[0].Value.Uint64()
	}
	fds := 0
	if ents, err := os.ReadDir("/proc/self/fd"); err == nil {
		fds = len(ents)
	}
	a.shedder.ObserveResources(heap, fds)
}

// severLoop asks the Shedder every tick how many sessions of each
// priority to sever, and severs them.
func (e *Edge) severLoop(ctx context.Context, tick time.Duration) {
	i := 0
	lifecycle.Every(ctx, tick, func() {
		if i%10 == 0 {
			e.adm.observeResources()
		}
		i++
		e.severOnce()
	})
}

// severOnce runs one round of severing: GoAway with the Shedder's retry
// hint, then 1001, newest sessions of a priority first. It returns how
// many it severed.
func (e *Edge) severOnce() int {
	now := e.now()
	var open limit.Counts
	var byRank [limit.NumPriorities][]*session
	for _, s := range e.snapshotSessions() {
		if s.state.Load() != stateWelcomed || s.isClosing() {
			continue
		}
		open[s.rank]++
		byRank[s.rank] = append(byRank[s.rank], s)
	}
	q := e.adm.shedder.SeverQuotaAt(open, now)
	n := 0
	for p := range q {
		if q[p] == 0 {
			continue
		}
		list := byRank[p]
		slices.SortFunc(list, func(a, b *session) int { return cmp.Compare(b.start, a.start) })
		for i := int64(0); i < q[p] && int(i) < len(list); i++ {
			ra := e.adm.shedder.RetryAfterAt(limit.Priority(p), now)
			if list[i].close(wire.Close{Code: wire.CloseGoingAway, RetryAfter: ra, Text: "shed " + limit.Priority(p).String()}, true) {
				e.metrics.shed.WithLabelValues("sever", priorityLabel(p)).Inc()
				n++
			}
		}
	}
	return n
}
