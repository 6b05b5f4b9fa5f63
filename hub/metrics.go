package hub

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/corralhq/corral/hub/auth"
	"github.com/corralhq/corral/wire"
)

// metrics are the hub's Prometheus series, registered on the Registerer of
// Options (never a global one). Every labelled series the hub can emit is
// created at zero by newMetrics, so that rates work from the first scrape;
// the label values are the lists below, and the help texts name them.
type metrics struct {
	sessions       *prometheus.GaugeVec   // transport
	sessionsOpened *prometheus.CounterVec // transport
	closes         *prometheus.CounterVec // code
	authRejected   *prometheus.CounterVec // reason
	framesIn       *prometheus.CounterVec // type
	delivered      prometheus.Counter
	dropped        *prometheus.CounterVec // priority
	published      *prometheus.CounterVec // api
	resumes        *prometheus.CounterVec // result
	resumeSource   *prometheus.CounterVec // source
	backfills      prometheus.Counter
	channels       prometheus.Gauge
	historyErrors  prometheus.Counter
	shed           *prometheus.CounterVec // action, priority
	relayStreams   prometheus.Gauge
	relaySessions  *prometheus.GaugeVec // device
	unserved       prometheus.Counter

	// The series a session's set-up and close count, resolved once
	// (resolve): WithLabelValues hashes the label values and looks the
	// series up under the vector's lock on every call, about 2,700 of a
	// WebSocket set-up's user-mode instructions for its five counts
	// (callgrind, bench/hub/run.sh instructions; issue 10, item 13).
	sessionsOf       resolved[prometheus.Gauge]   // sessions by transport
	sessionsOpenedOf resolved[prometheus.Counter] // sessionsOpened by transport
	framesInOf       resolved[prometheus.Counter] // framesIn by type
	resumeSourceOf   resolved[prometheus.Counter] // resumeSource by source
	droppedOf        resolved[prometheus.Counter] // dropped by priority
	closesOf         map[wire.CloseCode]prometheus.Counter
	closesOther      prometheus.Counter
}

// resolved are the series of a one-label vector for the label values the
// hub emits, looked up by a scan of those few values; a value outside
// them goes through the vector (and is counted all the same).
type resolved[M any] struct {
	values []string
	series []M
	vec    func(...string) M // the vector's WithLabelValues
}

// resolve creates (at zero) and keeps the series of each of values.
func resolve[M any](with func(...string) M, values []string) resolved[M] {
	r := resolved[M]{values: values, series: make([]M, len(values)), vec: with}
	for i, v := range values {
		r.series[i] = with(v)
	}
	return r
}

// with returns the series of label value v.
func (r *resolved[M]) with(v string) M {
	for i, x := range r.values {
		if x == v {
			return r.series[i]
		}
	}
	return r.vec(v)
}

// closesFor returns the close counter of code c (that of "other" for a
// code outside wire's table).
func (m *metrics) closesFor(c wire.CloseCode) prometheus.Counter {
	if s, ok := m.closesOf[c]; ok {
		return s
	}
	return m.closesOther
}

// The label values of the hub's series.
var (
	labelTransports = []string{"ws", "grpc", "relay"}
	// labelRelayDevices: how the device reached the edge (RelayOpen.transport).
	labelRelayDevices = []string{"ws", "grpc", "other"}
	// labelAuthReasons: the token reasons of hub/auth, a claimed priority
	// above the token's, the API key reasons (unknown or missing key; a
	// valid key used for a tenant it does not serve), and a Relay stream
	// without a valid relay key.
	labelAuthReasons = []string{
		string(auth.ReasonMissing), string(auth.ReasonMalformed), string(auth.ReasonForged),
		string(auth.ReasonExpired), string(auth.ReasonNoExpiry), string(auth.ReasonInvalid),
		"priority", "api_key", string(auth.ReasonTenant), "relay_key",
	}
	labelFrameTypes  = []string{"hello", "subscribe", "unsubscribe", "publish", "ack", "ping", "pong"}
	labelDropped     = []string{"p1", "p2"} // P0 is never dropped: the session closes with 4000
	labelAPIs        = []string{"session", "grpc", "http", "nats", "go", "ingest"}
	labelResumes     = []string{"recovered", "gap"}
	labelSources     = []string{"recent", "store"}
	labelShedActions = []string{"reject", "sever", "drain", "reject_publish"}
	labelPriorities  = []string{"p0", "p1", "p2"}
	labelOtherCode   = "other"
)

// priorityLabel is the label value of a priority rank: "p0", "p1" or "p2",
// as the HTTP publish API and the protocol's enum names spell them.
func priorityLabel(rank int) string {
	if rank >= 0 && rank < len(labelPriorities) {
		return labelPriorities[rank]
	}
	return labelPriorities[len(labelPriorities)-1]
}

// closeCodeLabel is the label value of a close code: the number for a code
// of wire's table, "other" for anything else (a peer chooses the code of
// its own close frame, and must not choose the series).
func closeCodeLabel(c wire.CloseCode) string {
	if c.Known() {
		return strconv.Itoa(int(c))
	}
	return labelOtherCode
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		sessions: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "corral_hub_sessions",
			Help: "Open sessions (after Welcome), by transport (ws, grpc, relay)."}, []string{"transport"}),
		sessionsOpened: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "corral_hub_sessions_opened_total",
			Help: "Connections accepted (before Hello), by transport (ws, grpc, relay: a RelayOpen)."}, []string{"transport"}),
		closes: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "corral_hub_session_closes_total",
			Help: "Sessions closed by the hub or the peer, by code (a close code of wire's table, or other)."}, []string{"code"}),
		authRejected: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "corral_hub_auth_rejected_total",
			Help: "Session tokens and API keys rejected, by reason (tokens: missing, malformed, forged, expired, no_expiry, invalid, priority; API keys: api_key for a missing or unknown key, tenant for a valid key used for another tenant; relay_key for a Relay stream without a valid relay key)."}, []string{"reason"}),
		framesIn: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "corral_hub_frames_received_total",
			Help: "Client frames received, by type (hello, subscribe, unsubscribe, publish, ack, ping, pong)."}, []string{"type"}),
		delivered: prometheus.NewCounter(prometheus.CounterOpts{Name: "corral_hub_messages_delivered_total",
			Help: "Channel messages queued to sessions."}),
		dropped: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "corral_hub_messages_dropped_total",
			Help: "Channel messages dropped from full session queues (slow consumers), by priority (p1, p2; P0 is never dropped)."}, []string{"priority"}),
		published: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "corral_hub_published_total",
			Help: "Messages published through this hub, by api (session, grpc, http, nats, go for Hub.Publish, ingest)."}, []string{"api"}),
		resumes: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "corral_hub_resumes_total",
			Help: "Subscriptions that asked to resume, by result (recovered, gap)."}, []string{"result"}),
		resumeSource: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "corral_hub_subscribe_sources_total",
			Help: "Where subscriptions got their position and missed messages, by source (recent: the hub's in-memory tail of the channel; store: history)."}, []string{"source"}),
		backfills: prometheus.NewCounter(prometheus.CounterOpts{Name: "corral_hub_backfills_total",
			Help: "Holes in the NATS fan-out filled from history."}),
		channels: prometheus.NewGauge(prometheus.GaugeOpts{Name: "corral_hub_channels",
			Help: "Channels with at least one subscriber on this hub."}),
		historyErrors: prometheus.NewCounter(prometheus.CounterOpts{Name: "corral_hub_history_errors_total",
			Help: "History store errors (append or read)."}),
		relayStreams: prometheus.NewGauge(prometheus.GaugeOpts{Name: "corral_hub_relay_streams",
			Help: "Open Corral.Relay streams (authenticated edges' streams)."}),
		relaySessions: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "corral_hub_relay_sessions",
			Help: "Sessions open on Relay streams (RelayOpen to teardown, before Hello included), by device (how the device reached the edge: ws, grpc, other)."}, []string{"device"}),
		unserved: prometheus.NewCounter(prometheus.CounterOpts{Name: "corral_hub_upgrades_unserved_total",
			Help: "WebSocket upgrades answered 503 with Retry-After because the connection could not be moved to the poller (the process out of file descriptors)."}),
		shed: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "corral_hub_shed_total",
			Help: "Sessions and publishes turned away, by action (reject: a new session, sever: an open session, drain: a session sent away by a drain, reject_publish: a publish with no slot) and priority (p0, p1, p2)."}, []string{"action", "priority"}),
	}
	m.sessionsOf = resolve(m.sessions.WithLabelValues, labelTransports)
	m.sessionsOpenedOf = resolve(m.sessionsOpened.WithLabelValues, labelTransports)
	m.closesOf = make(map[wire.CloseCode]prometheus.Counter)
	for _, c := range wire.CloseCodes() {
		m.closesOf[c] = m.closes.WithLabelValues(closeCodeLabel(c))
	}
	m.closesOther = m.closes.WithLabelValues(labelOtherCode)
	for _, d := range labelRelayDevices {
		m.relaySessions.WithLabelValues(d)
	}
	zero(m.authRejected, labelAuthReasons)
	m.framesInOf = resolve(m.framesIn.WithLabelValues, labelFrameTypes)
	m.droppedOf = resolve(m.dropped.WithLabelValues, labelDropped)
	zero(m.published, labelAPIs)
	zero(m.resumes, labelResumes)
	m.resumeSourceOf = resolve(m.resumeSource.WithLabelValues, labelSources)
	for _, a := range labelShedActions {
		for _, p := range labelPriorities {
			m.shed.WithLabelValues(a, p)
		}
	}
	if reg != nil {
		reg.MustRegister(m.sessions, m.sessionsOpened, m.closes, m.authRejected, m.framesIn, m.delivered,
			m.dropped, m.published, m.resumes, m.resumeSource, m.backfills, m.channels, m.historyErrors, m.shed,
			m.relayStreams, m.relaySessions, m.unserved)
	}
	return m
}

// zero creates the series of v for each label value.
func zero(v *prometheus.CounterVec, values []string) {
	for _, l := range values {
		v.WithLabelValues(l)
	}
}

// shedInc counts one session or publish turned away by action at rank.
func (m *metrics) shedInc(action string, rank int) {
	m.shed.WithLabelValues(action, priorityLabel(rank)).Inc()
}
