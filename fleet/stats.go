package fleet

import (
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Stats is the fleet at one instant, read from each part's own metrics
// registry (the numbers its /metrics would show), for `corral up`'s
// dashboard. Counters are totals since the part started.
type Stats struct {
	// UnixMS is when the snapshot was taken, in milliseconds.
	UnixMS int64 `json:"unix_ms"`
	// Policy is the origin record's routing policy.
	Policy string      `json:"policy"`
	Hubs   []NodeStats `json:"hubs"`
	Edges  []NodeStats `json:"edges"`
	DNS    DNSStats    `json:"dns"`
}

// NodeStats is one hub or edge. Per-priority arrays are P0, P1, P2.
type NodeStats struct {
	Name string `json:"name"`
	// Addr is the node's address; State is "up", "paused" or "killed"
	// (edges: "up" or "stopped").
	Addr  string `json:"addr"`
	State string `json:"state"`
	// Sessions is the sessions open (every transport; a hub counts an
	// edge's device sessions as relay sessions).
	Sessions int64 `json:"sessions"`
	// Limit is the adaptive limit: an edge's handshake Limiter, a hub's
	// publish Limiter (0 with admission off). Stage is the Shedder's
	// stage (0 normal, 1 to 3 shedding P2, P1 and up, P0 too).
	Limit int64 `json:"limit"`
	Stage int64 `json:"stage"`
	// Admitted, Refused and Severed are the Shedder's counts of new
	// sessions admitted and refused and of open sessions severed.
	Admitted [3]int64 `json:"admitted"`
	Refused  [3]int64 `json:"refused"`
	Severed  [3]int64 `json:"severed"`
	// ReplayHits and ReplayMisses are an edge's replay cache lookups
	// (resumes answered from the cache, and those sent to a hub).
	ReplayHits   int64 `json:"replay_hits,omitempty"`
	ReplayMisses int64 `json:"replay_misses,omitempty"`
	// StoreReads are a hub's subscriptions served from its history store
	// (the origin reads the edges' cache saves), RecentReads those served
	// from its recent-message window.
	StoreReads  int64 `json:"store_reads,omitempty"`
	RecentReads int64 `json:"recent_reads,omitempty"`
}

// DNSStats is the DNS server: answers by policy and the health of each
// origin record.
type DNSStats struct {
	Addr string `json:"addr"`
	// Answers counts the answers chosen by each routing policy.
	Answers map[string]int64 `json:"answers"`
	// Records are the origin record's values with their health checks.
	Records []RecordHealth `json:"records"`
}

// RecordHealth is one value of the origin record.
type RecordHealth struct {
	Value   string `json:"value"`
	Check   string `json:"check"`
	Healthy bool   `json:"healthy"`
}

// Stats reads every part's metrics now.
func (f *Fleet) Stats() Stats {
	f.mu.Lock()
	defer f.mu.Unlock()
	st := Stats{UnixMS: time.Now().UnixMilli(), Policy: f.policy, Hubs: []NodeStats{}, Edges: []NodeStats{},
		DNS: DNSStats{Answers: map[string]int64{}, Records: []RecordHealth{}}}
	dm := gather(f.dnsPart.Registry)
	for i, h := range f.hubs {
		m := gather(h.Registry)
		n := NodeStats{Name: h.Name, Addr: h.IP, State: "up",
			Sessions: m.sum("corral_hub_sessions"), Limit: m.sum("corral_hub_publish_limit"), Stage: m.sum("corral_hub_overload_stage"),
			StoreReads: m.sum("corral_hub_subscribe_sources_total", "source", "store"), RecentReads: m.sum("corral_hub_subscribe_sources_total", "source", "recent")}
		m.priorities(&n, "corral_hub_overload_")
		switch {
		case h.killed:
			n.State = "killed"
		case h.gate.isPaused():
			n.State = "paused"
		}
		st.Hubs = append(st.Hubs, n)
		check := "hub-" + strconv.Itoa(i+1)
		st.DNS.Records = append(st.DNS.Records, RecordHealth{Value: h.IP, Check: check, Healthy: dm.sum("corral_health_check_healthy", "check", check) > 0})
	}
	for _, e := range f.edges {
		m := gather(e.Registry)
		n := NodeStats{Name: e.Name, Addr: e.IP, State: "up",
			Sessions: m.sum("corral_edge_sessions"), Limit: m.sum("corral_edge_handshake_limit"), Stage: m.sum("corral_edge_overload_stage"),
			ReplayHits: m.sum("corral_edge_replay_hits_total"), ReplayMisses: m.sum("corral_edge_replay_misses_total")}
		m.priorities(&n, "corral_edge_overload_")
		if e.stopped {
			n.State = "stopped"
		}
		st.Edges = append(st.Edges, n)
	}
	if f.dns != nil {
		st.DNS.Addr = f.dns.Addr().String()
	}
	for _, s := range dm["corral_dns_policy_answers_total"] {
		st.DNS.Answers[s.labels["policy"]] = int64(s.value)
	}
	return st
}

// sample is one series of a gathered metric.
type sample struct {
	labels map[string]string
	value  float64
}

// metrics are a registry's series by metric name.
type metrics map[string][]sample

// gather reads reg; a registry that fails to gather reads empty.
func gather(reg *prometheus.Registry) metrics {
	m := metrics{}
	if reg == nil {
		return m
	}
	mfs, _ := reg.Gather()
	for _, mf := range mfs {
		for _, mt := range mf.GetMetric() {
			s := sample{labels: map[string]string{}}
			for _, l := range mt.GetLabel() {
				s.labels[l.GetName()] = l.GetValue()
			}
			switch {
			case mt.GetCounter() != nil:
				s.value = mt.GetCounter().GetValue()
			case mt.GetGauge() != nil:
				s.value = mt.GetGauge().GetValue()
			default:
				continue
			}
			m[mf.GetName()] = append(m[mf.GetName()], s)
		}
	}
	return m
}

// sum adds the series of name whose labels hold every (key, value) pair
// of kv.
func (m metrics) sum(name string, kv ...string) int64 {
	var t float64
	for _, s := range m[name] {
		ok := true
		for i := 0; i+1 < len(kv); i += 2 {
			if s.labels[kv[i]] != kv[i+1] {
				ok = false
			}
		}
		if ok {
			t += s.value
		}
	}
	return int64(t)
}

// priorities fills the Shedder's per-priority counts of prefix
// (admitted_total, shed_rejected_total, severed_total).
func (m metrics) priorities(n *NodeStats, prefix string) {
	for p := range 3 {
		l := "p" + strconv.Itoa(p)
		n.Admitted[p] = m.sum(prefix+"admitted_total", "priority", l)
		n.Refused[p] = m.sum(prefix+"shed_rejected_total", "priority", l)
		n.Severed[p] = m.sum(prefix+"severed_total", "priority", l)
	}
}
