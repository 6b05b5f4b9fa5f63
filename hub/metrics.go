package hub

import (
	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the hub's Prometheus series, registered on the Registerer of
// Options (never a global one).
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
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		sessions: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "corral_hub_sessions",
			Help: "Open sessions by transport (ws, grpc)."}, []string{"transport"}),
		sessionsOpened: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "corral_hub_sessions_opened_total",
			Help: "Connections accepted, by transport (before Hello)."}, []string{"transport"}),
		closes: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "corral_hub_session_closes_total",
			Help: "Sessions closed by the hub or the peer, by close code."}, []string{"code"}),
		authRejected: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "corral_hub_auth_rejected_total",
			Help: "Session tokens and API keys rejected, by reason (missing, malformed, forged, expired, invalid, priority, tenant)."}, []string{"reason"}),
		framesIn: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "corral_hub_frames_received_total",
			Help: "Client frames received, by type."}, []string{"type"}),
		delivered: prometheus.NewCounter(prometheus.CounterOpts{Name: "corral_hub_messages_delivered_total",
			Help: "Channel messages queued to sessions."}),
		dropped: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "corral_hub_messages_dropped_total",
			Help: "Channel messages dropped from full session queues (slow consumers), by priority."}, []string{"priority"}),
		published: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "corral_hub_published_total",
			Help: "Messages published through this hub, by API (session, grpc, http, nats, ingest)."}, []string{"api"}),
		resumes: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "corral_hub_resumes_total",
			Help: "Subscriptions that asked to resume, by result (recovered, gap)."}, []string{"result"}),
		resumeSource: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "corral_hub_subscribe_sources_total",
			Help: "Where subscriptions got their position and missed messages: recent (the hub's in-memory tail of the channel) or store (history)."}, []string{"source"}),
		backfills: prometheus.NewCounter(prometheus.CounterOpts{Name: "corral_hub_backfills_total",
			Help: "Holes in the NATS fan-out filled from history."}),
		channels: prometheus.NewGauge(prometheus.GaugeOpts{Name: "corral_hub_channels",
			Help: "Channels with at least one subscriber on this hub."}),
		historyErrors: prometheus.NewCounter(prometheus.CounterOpts{Name: "corral_hub_history_errors_total",
			Help: "History store errors (append or read)."}),
		shed: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "corral_hub_shed_total",
			Help: "Sessions turned away by overload control, by action (reject, sever, drain) and priority."}, []string{"action", "priority"}),
	}
	if reg != nil {
		reg.MustRegister(m.sessions, m.sessionsOpened, m.closes, m.authRejected, m.framesIn, m.delivered,
			m.dropped, m.published, m.resumes, m.resumeSource, m.backfills, m.channels, m.historyErrors, m.shed)
	}
	return m
}
