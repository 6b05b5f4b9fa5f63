package edge

import (
	"fmt"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/corralhq/corral/limit"
	"github.com/corralhq/corral/wire"
)

// metrics are the edge's Prometheus series, registered on the Registerer of
// Options (never a global one). Labelled series with fixed label values
// are created at zero, so that rates work from the first scrape.
type metrics struct {
	sessions       *prometheus.GaugeVec   // transport
	opened         *prometheus.CounterVec // transport
	closes         *prometheus.CounterVec // code
	framesIn       *prometheus.CounterVec // type
	relayStreams   *prometheus.GaugeVec   // origin
	streamFailures *prometheus.CounterVec // origin
	shed           *prometheus.CounterVec // action, priority
	slow           prometheus.Counter
	dropped        *prometheus.CounterVec // priority
	replayServed   prometheus.Counter
	replayWaiting  prometheus.Gauge
	handshake      prometheus.Histogram
	refusalHints   prometheus.Histogram
	unserved       prometheus.Counter
	atCapacity     prometheus.Counter
}

// The label values of the edge's series.
var (
	labelTransports  = []string{"ws", "grpc"}
	labelFrameTypes  = []string{"hello", "subscribe", "unsubscribe", "publish", "ack", "ping", "pong"}
	labelShedActions = []string{"reject", "queue_handshake", "reject_handshake", "reject_publish", "reject_connection", "sever", "drain", "max_age", "origin_lost"}
	labelPriorities  = []string{"p0", "p1", "p2"}
)

func priorityLabel(rank int) string {
	if rank >= 0 && rank < len(labelPriorities) {
		return labelPriorities[rank]
	}
	return labelPriorities[len(labelPriorities)-1]
}

// closeCodeLabel is the number of a code of wire's table, "other" for any
// other code (a device chooses its own close code, not the series).
func closeCodeLabel(c wire.CloseCode) string {
	if c.Known() {
		return strconv.Itoa(int(c))
	}
	return "other"
}

func newMetrics(e *Edge, reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		sessions: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "corral_edge_sessions",
			Help: "Open device sessions (after the origin's Welcome), by transport (ws, grpc)."}, []string{"transport"}),
		opened: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "corral_edge_sessions_opened_total",
			Help: "Device connections accepted (before Hello), by transport (ws, grpc)."}, []string{"transport"}),
		closes: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "corral_edge_session_closes_total",
			Help: "Device sessions closed, by code (a close code of wire's table, or other)."}, []string{"code"}),
		framesIn: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "corral_edge_frames_received_total",
			Help: "Device frames that passed the frame checks, by type (hello, subscribe, unsubscribe, publish, ack, ping, pong)."}, []string{"type"}),
		relayStreams: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "corral_edge_relay_streams",
			Help: "Open Relay streams to each origin address."}, []string{"origin"}),
		streamFailures: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "corral_edge_relay_stream_failures_total",
			Help: "Relay streams that broke, by origin address."}, []string{"origin"}),
		shed: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "corral_edge_shed_total",
			Help: "Sessions and publishes refused or sent away, by action (reject, queue_handshake (a Hello that waited for a handshake slot), reject_handshake, reject_publish, reject_connection, sever, drain, max_age, origin_lost) and priority (p0, p1, p2)."},
			[]string{"action", "priority"}),
		slow: prometheus.NewCounter(prometheus.CounterOpts{Name: "corral_edge_slow_consumers_total",
			Help: "Device sessions closed with 4000 because their outbound queue overflowed."}),
		dropped: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "corral_edge_messages_dropped_total",
			Help: "P1 and P2 messages dropped for a device whose queue was full (told as Gap frames), by priority (p1, p2)."}, []string{"priority"}),
		replayServed: prometheus.NewCounter(prometheus.CounterOpts{Name: "corral_edge_replay_messages_served_total",
			Help: "Messages sent to devices from the replay cache (the resumes it covered)."}),
		replayWaiting: prometheus.NewGauge(prometheus.GaugeOpts{Name: "corral_edge_replay_waiting",
			Help: "Resumes waiting for an identical one on its way upstream (coalesced reads in progress)."}),
		unserved: prometheus.NewCounter(prometheus.CounterOpts{Name: "corral_edge_upgrades_unserved_total",
			Help: "WebSocket upgrades answered 503 with Retry-After because the connection could not be moved to the poller (the process out of file descriptors)."}),
		atCapacity: prometheus.NewCounter(prometheus.CounterOpts{Name: "corral_edge_connections_at_capacity_total",
			Help: "Device connections refused before their Hello because the edge held max_sessions (503 with Retry-After, or Unavailable with grpc-retry-pushback-ms)."}),
		handshake: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "corral_edge_handshake_duration_seconds",
			Help:    "Time from a device's Hello to the origin's Welcome.",
			Buckets: prometheus.ExponentialBucketsRange(0.0005, 10, 16)}),
		refusalHints: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "corral_edge_handshake_retry_after_seconds",
			Help:    "The retry hint (the start of its window) of each Hello refused for want of a handshake slot: its place in the waiting room's virtual queue, or the Shedder's when its stage turns the priority away.",
			Buckets: prometheus.ExponentialBucketsRange(0.001, 300, 20)}),
	}
	for _, t := range labelTransports {
		m.sessions.WithLabelValues(t)
		m.opened.WithLabelValues(t)
	}
	for _, c := range wire.CloseCodes() {
		m.closes.WithLabelValues(closeCodeLabel(c))
	}
	for _, t := range labelFrameTypes {
		m.framesIn.WithLabelValues(t)
	}
	for _, p := range labelPriorities[1:] {
		m.dropped.WithLabelValues(p)
	}
	for _, a := range labelShedActions {
		for _, p := range labelPriorities {
			m.shed.WithLabelValues(a, p)
		}
	}
	if reg == nil {
		return m, nil
	}
	for _, c := range []prometheus.Collector{m.sessions, m.opened, m.closes, m.framesIn, m.relayStreams, m.streamFailures, m.shed, m.slow, m.dropped, m.replayServed, m.replayWaiting, m.handshake, m.refusalHints, m.unserved, m.atCapacity} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("edge: metrics: %w", err)
		}
	}
	for _, l := range []struct {
		sub string
		lim *limit.Limiter
		sh  *limit.Shedder
	}{{"edge_handshake", e.adm.handshake, nil}, {"edge_messages", e.adm.messages, nil}, {"edge_overload", nil, e.adm.shedder}} {
		if l.lim == nil && l.sh == nil {
			continue
		}
		if _, err := limit.NewCollector(limit.MetricsConfig{Registerer: reg, Subsystem: l.sub, Limiter: l.lim, Shedder: l.sh}); err != nil {
			return nil, fmt.Errorf("edge: %w", err)
		}
	}
	return m, nil
}
