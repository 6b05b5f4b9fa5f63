package hub

import "github.com/corralhq/corral/limit"

// Stats is a hub's state at one instant, for its status page, programs
// that embed it and tests that do not read Prometheus.
type Stats struct {
	// NodeID is the hub's node id; Ready is nil when it takes sessions,
	// else why not (Ready()).
	NodeID string
	Ready  error
	// Draining is true from the start of the drain.
	Draining bool
	// Sessions is the sessions open, relayed ones included; RelayStreams
	// the edges' Relay streams open.
	Sessions, RelayStreams int
	// Stage is the overload Shedder's stage (StageNormal without
	// overload.enabled or with an Overload of the embedder's own);
	// PublishLimit the in-flight publish limit (0 without).
	Stage        limit.Stage
	PublishLimit int
	// HistoryReplicas is the replica count of the history streams as the
	// hub opened them (0 before, or with the memory store).
	HistoryReplicas int64
	// Opened is the sessions opened since the hub started (the sum of
	// corral_hub_sessions_opened_total), which its load reports carry.
	Opened uint64
}

// Stats returns the hub's state now. It is safe for concurrent use.
func (h *Hub) Stats() Stats {
	st := Stats{
		NodeID: h.nodeID, Ready: h.Ready(), Draining: h.draining.Load(),
		Sessions: h.Sessions(), HistoryReplicas: h.replicas.Load(), Opened: h.opened.Load(),
	}
	h.relay.mu.Lock()
	st.RelayStreams = len(h.relay.streams)
	h.relay.mu.Unlock()
	if sh, ok := h.overload.(*limit.Shedder); ok {
		st.Stage = sh.Stage()
	}
	if h.limiter != nil {
		st.PublishLimit = h.limiter.Limit()
	}
	return st
}
