package edge

import "github.com/prometheus/client_golang/prometheus"

// originCollector reads the origin counters at scrape time, so that the
// session path updates atomics only.
type originCollector struct{ s *Origins }

var (
	originSessionsDesc   = prometheus.NewDesc("corral_edge_origin_sessions", "Device sessions established on the origin.", []string{"origin"}, nil)
	originHandshakesDesc = prometheus.NewDesc("corral_edge_origin_handshakes", "Handshakes in flight to the origin (picked, no Welcome or failure yet).", []string{"origin"}, nil)
	originEjectionsDesc  = prometheus.NewDesc("corral_edge_origin_ejections_total", "Times the outlier detection ejected the origin.", []string{"origin"}, nil)
	originEjectedDesc    = prometheus.NewDesc("corral_edge_origins_ejected", "Origins of the answer ejected now.", nil, nil)
	originResolvedDesc   = prometheus.NewDesc("corral_edge_origins_resolved", "Addresses in the current origin answer.", nil, nil)
	originStaleDesc      = prometheus.NewDesc("corral_edge_origins_stale", "1 when the last resolution failed and the last good answer is used.", nil, nil)
	originResolvesDesc   = prometheus.NewDesc("corral_edge_origin_resolves_total", "Resolutions of the origin name attempted.", nil, nil)
	originResolveErrDesc = prometheus.NewDesc("corral_edge_origin_resolve_errors_total", "Resolutions of the origin name that failed (the last good answer was kept).", nil, nil)
	originFailOpenDesc   = prometheus.NewDesc("corral_edge_origin_fail_open_total", "Picks that found no usable origin and chose among all (ejected or unhealthy).", nil, nil)
	originDownDesc       = prometheus.NewDesc("corral_edge_origins_down", "Origins of the answer whose Relay transport is down (connection refused or lost, not re-established): no new sessions go there.", nil, nil)
	originAllDownDesc    = prometheus.NewDesc("corral_edge_origin_picks_all_down_total", "Picks refused because the transport of every origin that could be picked (of the hand with shard) was down.", nil, nil)
	originSkippedDesc    = prometheus.NewDesc("corral_edge_origin_ejections_skipped_total", "Ejections refused because max_ejection_percent of the origins were ejected.", nil, nil)
)

func (c *originCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{originSessionsDesc, originHandshakesDesc, originEjectionsDesc, originEjectedDesc,
		originResolvedDesc, originStaleDesc, originResolvesDesc, originResolveErrDesc, originFailOpenDesc, originSkippedDesc,
		originDownDesc, originAllDownDesc} {
		ch <- d
	}
}

func (c *originCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.s
	s.mu.Lock()
	for _, o := range s.byAddr {
		ch <- prometheus.MustNewConstMetric(originSessionsDesc, prometheus.GaugeValue, float64(o.sessions.Load()), o.addr)
		ch <- prometheus.MustNewConstMetric(originHandshakesDesc, prometheus.GaugeValue, float64(o.handshakes.Load()), o.addr)
		ch <- prometheus.MustNewConstMetric(originEjectionsDesc, prometheus.CounterValue, float64(o.ejections.Load()), o.addr)
	}
	s.mu.Unlock()
	resolved := 0
	if sn := s.snap.Load(); sn != nil {
		resolved = len(sn.list)
	}
	stale := 0.0
	if s.stale.Load() {
		stale = 1
	}
	ch <- prometheus.MustNewConstMetric(originEjectedDesc, prometheus.GaugeValue, float64(s.ejectedCount(s.now())))
	ch <- prometheus.MustNewConstMetric(originResolvedDesc, prometheus.GaugeValue, float64(resolved))
	ch <- prometheus.MustNewConstMetric(originStaleDesc, prometheus.GaugeValue, stale)
	ch <- prometheus.MustNewConstMetric(originResolvesDesc, prometheus.CounterValue, float64(s.resolves.Load()))
	ch <- prometheus.MustNewConstMetric(originResolveErrDesc, prometheus.CounterValue, float64(s.resolveErrors.Load()))
	ch <- prometheus.MustNewConstMetric(originFailOpenDesc, prometheus.CounterValue, float64(s.failOpen.Load()))
	ch <- prometheus.MustNewConstMetric(originSkippedDesc, prometheus.CounterValue, float64(s.ejectSkipped.Load()))
	ch <- prometheus.MustNewConstMetric(originDownDesc, prometheus.GaugeValue, float64(s.downCount()))
	ch <- prometheus.MustNewConstMetric(originAllDownDesc, prometheus.CounterValue, float64(s.allDown.Load()))
}
