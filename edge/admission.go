package edge

import (
	"cmp"
	"context"
	"fmt"
	rtmetrics "runtime/metrics"
	"slices"
	"time"

	"github.com/corralhq/corral/internal/fdcount"
	"github.com/corralhq/corral/internal/lifecycle"
	"github.com/corralhq/corral/limit"
	"github.com/corralhq/corral/wire"
)

// Admission, as on the hub (hub/overload.go) and with the same limit code:
//
//   - the handshake Limiter: a slot from the device's Hello to the
//     origin's Welcome; the latency of that handshake is its sample (a
//     session that lives for hours is never one), and a handshake the
//     origin fails (overload, timeout, a broken stream) is a drop. A
//     Hello that finds no slot waits in the Limiter's waiting room,
//     highest priority first, for at most queue.max_wait: a herd becomes
//     a queue the origins drain at their pace, P0 first, instead of
//     refusals that send each device into a longer backoff;
//   - the message Limiter: a slot per device Publish sent up, until the
//     origin answers it;
//   - the staged Shedder: fed the Go heap and the open descriptors (and
//     the handshake latencies with latency_stages); it admits new
//     sessions by priority and says how many open ones to sever, lowest
//     priority first. P0 is refused and severed only in its lifeboat
//     stage.
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
	latency   bool // handshake latencies feed the Shedder
	countFDs  bool // the Shedder has a descriptor ceiling (resources.max_fds)
}

// defaultHandshakeWait is the handshake waiting room's max_wait at the
// edge: well inside the dial budget of the SDKs (the Go client's
// DialTimeout and the JS SDK's connectTimeoutMs are 5 s, TCP connect and
// upgrade included), and at most half the handshake timeout: a Hello
// whose wait expires gets its hint, sized by the backlog, while its
// device still listens.
const defaultHandshakeWait = 2 * time.Second

// defaultSlowHandshake is admission.slow_handshake: the handshake
// latency percentile above which a window of the handshake limit counts
// as congested.
const defaultSlowHandshake = 500 * time.Millisecond

func (a *admission) init(cfg AdmissionConfig, handshakeTimeout time.Duration) error {
	if !cfg.Enabled {
		return nil
	}
	a.latency = cfg.LatencyStages
	a.countFDs = cfg.Shedder.Resources.MaxFDs > 0
	if cfg.Handshake.Limit == nil {
		// AIMD on the origins' own signals, not a gradient on latency:
		// the edge's handshake latency holds the edge's own CPU, which a
		// herd saturates with work no limit gates (accepts, TLS,
		// upgrades), and a gradient reads that as the origin's congestion
		// and throttles the origins' work as it arrives. Measured in the
		// edge storm (docs/benchmarks.md): the Gradient fell from 40 to 1
		// in 2.5 s of the herd and, on a loaded machine, held the edges
		// at 32 handshakes a second against origins that refused
		// nothing. An origin that cannot take more refuses (its refusals
		// are drops, which cut the limit) or slows past slow_handshake,
		// which an origin in reach of its edges does only when it is
		// overloaded.
		aimd, err := limit.NewAIMD(limit.AIMDConfig{Timeout: cmp.Or(cfg.SlowHandshake, defaultSlowHandshake)})
		if err != nil {
			return fmt.Errorf("edge: admission.slow_handshake: %w", err)
		}
		cfg.Handshake.Limit = aimd
	}
	if cfg.Handshake.Queue.MaxWait == 0 {
		cfg.Handshake.Queue.MaxWait = defaultHandshakeWait
		if handshakeTimeout > 0 {
			cfg.Handshake.Queue.MaxWait = min(defaultHandshakeWait, handshakeTimeout/2)
		}
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

// admitSession asks the Shedder about a new session of rank; a refusal
// comes with the retry window of its re-admission.
func (a *admission) admitSession(rank int, now time.Time) (limit.Retry, bool) {
	if a.shedder == nil {
		return limit.Retry{}, true
	}
	d := a.shedder.AdmitAt(limiterPriority(rank), now)
	return d.Retry, d.Admit
}

// refusal is the close that turns work away with r, its retry window sent
// whole (wire's retry_within_ms): the client draws within it and adds no
// jitter of its own, so a herd spaced by a Limiter's virtual queue comes
// back as spaced.
func refusal(code wire.CloseCode, r limit.Retry, text string) wire.Close {
	return wire.Close{Code: code, RetryAfter: r.After, RetryWithin: r.Within, Text: text}
}

// acquireHandshake takes a handshake slot for rank, or queues the Hello
// in the Limiter's waiting room: granted is then called once, on its own
// goroutine, with the slot or with false (the wait expired). held is
// false when there is no Limiter (nothing to release).
func (a *admission) acquireHandshake(rank int, granted func(tok limit.Token, ok bool)) (tok limit.Token, held bool, w limit.Wait) {
	if a.handshake == nil {
		return limit.Token{}, false, limit.Acquired
	}
	tok, w = a.handshake.AcquireOrWait(limiterPriority(rank), granted)
	return tok, w == limit.Acquired, w
}

// refusalHint is the retry window of work of rank a Limiter refused after
// it waited for waited (0: refused at once): the Limiter's (its place in
// the virtual queue: the backlog ahead over the admission rate), or the
// Shedder's when its stage turns rank away and will admit it later. (A
// Shedder whose stage admits rank gives a range of Retry.Min, which is no
// hint of when a slot frees: taking the later of the two put every
// refused Hello a whole second out.)
func (a *admission) refusalHint(l *limit.Limiter, rank int, now time.Time, waited time.Duration) limit.Retry {
	p := limiterPriority(rank)
	r := l.RetryWindowWaited(p, waited)
	if a.shedder != nil && !a.shedder.Stage().Admits(p) {
		if sr := a.shedder.RetryWindowAt(p, now); sr.After > r.After {
			r = sr
		}
	}
	return r
}

// acquireMessage takes a message slot for a Publish of rank.
func (a *admission) acquireMessage(rank int, now time.Time) (tok limit.Token, held bool, retry limit.Retry, ok bool) {
	return a.acquire(a.messages, rank, now)
}

func (a *admission) acquire(l *limit.Limiter, rank int, now time.Time) (limit.Token, bool, limit.Retry, bool) {
	if l == nil {
		return limit.Token{}, false, limit.Retry{}, true
	}
	tok, ok := l.TryAcquirePriority(limiterPriority(rank))
	if !ok {
		return limit.Token{}, false, a.refusalHint(l, rank, now, 0), false
	}
	return tok, true, limit.Retry{}, true
}

// observeHandshake feeds a handshake latency to the Shedder, with
// latency_stages.
func (a *admission) observeHandshake(d time.Duration) {
	if a.shedder != nil && a.latency {
		a.shedder.Observe(d)
	}
}

// refuseConnection reports whether a new device connection is refused
// before its Hello, and the hint: while draining, at max_sessions, and in
// the lifeboat stage (which refuses P0 too: no Hello could be admitted).
func (e *Edge) refuseConnection() (limit.Retry, bool) {
	now := e.now()
	if e.draining.Load() {
		return limit.Retry{After: e.retryHint()}, true
	}
	if max := e.cfg.MaxSessions; max > 0 && e.Sessions() >= max {
		e.metrics.atCapacity.Inc()
		base := e.drainCfg.RetryAfter
		return limit.Retry{After: base, Within: base}, true
	}
	if sh := e.adm.shedder; sh != nil && !sh.Stage().Admits(limit.P0) {
		e.metrics.shed.WithLabelValues("reject_connection", "p0").Inc()
		return sh.RetryWindowAt(limit.P0, now), true
	}
	return limit.Retry{}, false
}

// observeResources feeds the Go heap and the open descriptors to the
// Shedder. The descriptors are counted only under a ceiling: the count
// costs about 0.5 us a descriptor (internal/fdcount), half a second of a
// core every second at a million, for a figure the Shedder ignores
// without max_fds.
func (a *admission) observeResources() {
	s := []rtmetrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	rtmetrics.Read(s)
	heap := uint64(0)
	if s[0].Value.Kind() == rtmetrics.KindUint64 {
		heap = s[0].Value.Uint64()
	}
	fds := 0
	if a.countFDs {
		fds, _ = fdcount.Open()
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
// many it severed. The open sessions it gives the Shedder are counted as
// sessions are welcomed and close (Edge.severable); the sessions are
// listed only when some are to be severed: a list every round (every
// 100 ms) cost 7.8 ms at 100,000 sessions and 108 ms at a million, with
// the edge's lock held while it copied them (BenchmarkSeverOnce).
func (e *Edge) severOnce() int {
	now := e.now()
	q := e.adm.shedder.SeverQuotaAt(e.severable.Load(), now)
	if q == (limit.Counts{}) {
		return 0
	}
	var byRank [limit.NumPriorities][]*session
	for _, s := range e.snapshotSessions() {
		if s.state.Load() != stateWelcomed || s.isClosing() {
			continue
		}
		byRank[s.rank] = append(byRank[s.rank], s)
	}
	n := 0
	for p := range q {
		if q[p] == 0 {
			continue
		}
		list := byRank[p]
		slices.SortFunc(list, func(a, b *session) int { return cmp.Compare(b.start, a.start) })
		for i := int64(0); i < q[p] && int(i) < len(list); i++ {
			r := e.adm.shedder.RetryWindowAt(limit.Priority(p), now)
			if list[i].close(refusal(wire.CloseGoingAway, r, "shed "+limit.Priority(p).String()), true) {
				e.metrics.shed.WithLabelValues("sever", priorityLabel(p)).Inc()
				n++
			}
		}
	}
	return n
}
