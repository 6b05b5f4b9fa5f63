package hub

import (
	"cmp"
	"context"
	"fmt"
	rtmetrics "runtime/metrics"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/corralhq/corral/internal/fdcount"
	"github.com/corralhq/corral/internal/lifecycle"
	"github.com/corralhq/corral/limit"
	"github.com/corralhq/corral/wire"
)

// Overload is the hub's admission and shedding policy: *limit.Shedder
// implements it. AdmitAt decides on a new session of priority p;
// SeverQuotaAt says how many open sessions of each priority to sever now;
// RetryWindowAt gives the retry window of a severed session (or of a
// refused publish), sent whole to the client (wire's retry_within_ms).
type Overload interface {
	AdmitAt(p limit.Priority, now time.Time) limit.Decision
	SeverQuotaAt(open limit.Counts, now time.Time) limit.Counts
	RetryWindowAt(p limit.Priority, now time.Time) limit.Retry
}

var _ Overload = (*limit.Shedder)(nil)

// resourceObserver is the optional part of an Overload that learns the
// process's heap and file descriptors (*limit.Shedder has it).
type resourceObserver interface{ ObserveResources(heap uint64, fds int) }

// observeResources feeds the Go heap and the open descriptors to the
// policy. The descriptors are counted only when the policy can use them
// (countFDs): the count costs about 0.5 us a descriptor
// (internal/fdcount), half a second of a core every second at a million.
func (h *Hub) observeResources() {
	o, ok := h.overload.(resourceObserver)
	if !ok {
		return
	}
	s := []rtmetrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	rtmetrics.Read(s)
	heap := uint64(0)
	if s[0].Value.Kind() == rtmetrics.KindUint64 {
		heap = s[0].Value.Uint64()
	}
	fds := 0
	if h.countFDs {
		fds, _ = fdcount.Open()
	}
	o.ObserveResources(heap, fds)
}

// latencyObserver is the optional part of an Overload that learns from
// handshake latencies (*limit.Shedder has it).
type latencyObserver interface{ Observe(time.Duration) }

type admission struct {
	admit bool
	retry limit.Retry
}

// refusal is the close that turns work away with r, its retry window sent
// whole (wire's retry_within_ms): the client draws within it and adds no
// jitter of its own.
func refusal(code wire.CloseCode, r limit.Retry, text string) wire.Close {
	return wire.Close{Code: code, RetryAfter: r.After, RetryWithin: r.Within, Text: text}
}

// admit asks the overload policy about a new session of rank.
func (h *Hub) admit(rank int) admission {
	if h.overload == nil {
		return admission{admit: true}
	}
	d := h.overload.AdmitAt(limit.Priority(rank), h.now())
	r := d.Retry
	if r.After <= 0 { // a policy that gives a point hint only
		r = limit.Retry{After: d.RetryAfter}
	}
	return admission{admit: d.Admit, retry: r}
}

// observeHandshake feeds the time from connection to Welcome to the
// handshake histogram, and to the policy with overload.latency_stages.
func (h *Hub) observeHandshake(d time.Duration) {
	h.latency.handshake.Observe(d.Seconds())
	if !h.cfg.Overload.LatencyStages {
		return
	}
	if o, ok := h.overload.(latencyObserver); ok {
		o.Observe(d)
	}
}

// latencyMetrics are the latency histograms of what the hub's overload
// control measures: handshakes (connection to Welcome, the Shedder's
// signal) and publishes (the history append or ingest, the publish
// Limiter's samples).
type latencyMetrics struct {
	handshake prometheus.Histogram
	publish   [limit.NumPriorities]prometheus.Observer
}

// registerOverloadMetrics creates the latency histograms and registers
// them on reg, with the publish Limiter's series (corral_hub_publish_*:
// limit, inflight, ceiling{priority}, acquired and refused counts) and the
// Shedder's (corral_hub_overload_*: stage, decisions by priority, stage
// changes, the latency it compares with its target) when the hub has
// them. A nil reg registers nothing.
func (h *Hub) registerOverloadMetrics(reg prometheus.Registerer) error {
	h.latency.handshake = prometheus.NewHistogram(prometheus.HistogramOpts{Name: "corral_hub_handshake_duration_seconds",
		Help:    "Time from connection to Welcome of the sessions admitted.",
		Buckets: prometheus.ExponentialBucketsRange(0.001, 10, 15)})
	publish := prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "corral_hub_publish_duration_seconds",
		Help:    "Time to store (or ingest) a publish that passed validation and the publish limiter, by priority (p0, p1, p2).",
		Buckets: prometheus.ExponentialBucketsRange(0.0005, 5, 15)}, []string{"priority"})
	for p := range limit.NumPriorities {
		h.latency.publish[p] = publish.WithLabelValues(limit.Priority(p).String())
	}
	if reg == nil {
		return nil
	}
	for _, c := range []prometheus.Collector{h.latency.handshake, publish} {
		if err := reg.Register(c); err != nil {
			return fmt.Errorf("hub: metrics: %w", err)
		}
	}
	if h.limiter != nil {
		if _, err := limit.NewCollector(limit.MetricsConfig{Registerer: reg, Subsystem: "hub_publish", Limiter: h.limiter}); err != nil {
			return fmt.Errorf("hub: %w", err)
		}
	}
	if sh, ok := h.overload.(*limit.Shedder); ok {
		if _, err := limit.NewCollector(limit.MetricsConfig{Registerer: reg, Subsystem: "hub_overload", Shedder: sh}); err != nil {
			return fmt.Errorf("hub: %w", err)
		}
	}
	return nil
}

// observePublish records the latency of a publish of rank that started
// at start.
func (h *Hub) observePublish(rank int, start time.Time) {
	h.latency.publish[min(max(rank, 0), limit.NumPriorities-1)].Observe(h.now().Sub(start).Seconds())
}

// severLoop asks the policy every tick how many sessions of each priority
// to sever, and severs them: GoAway with the policy's retry hint, then
// close 1001. The newest sessions of a priority go first (they have the
// least state to lose).
func (h *Hub) severLoop(ctx context.Context, tick time.Duration) {
	if h.overload == nil {
		return
	}
	i := 0
	lifecycle.Every(ctx, tick, func() {
		if i%10 == 0 {
			h.observeResources()
		}
		i++
		h.severOnce()
	})
}

// severOnce runs one round of severing and returns how many sessions it
// severed. The open sessions it gives the policy are counted as sessions
// are welcomed and close (Hub.severable); the sessions are listed only
// when some are to be severed: a list every round (every 100 ms) is
// O(sessions) with the hub's lock held while it copies them (the edge's
// took 108 ms at a million, edge's BenchmarkSeverOnce).
func (h *Hub) severOnce() int {
	now := h.now()
	q := h.overload.SeverQuotaAt(h.severable.Load(), now)
	if q == (limit.Counts{}) {
		return 0
	}
	byRank := [limit.NumPriorities][]*session{}
	for _, s := range h.snapshotSessions() {
		if !s.helloDone.Load() {
			continue
		}
		s.mu.Lock()
		closing := s.closing
		s.mu.Unlock()
		if closing {
			continue
		}
		byRank[s.rank] = append(byRank[s.rank], s)
	}
	n := 0
	for p := range q {
		list := byRank[p]
		if q[p] == 0 {
			continue
		}
		slices.SortFunc(list, func(a, b *session) int { return cmp.Compare(b.start, a.start) }) // newest first
		for i := int64(0); i < q[p] && int(i) < len(list); i++ {
			r := h.overload.RetryWindowAt(limit.Priority(p), now)
			h.metrics.shedInc("sever", p)
			list[i].close(refusal(wire.CloseGoingAway, r, "shed "+limit.Priority(p).String()), true)
			n++
		}
	}
	return n
}
