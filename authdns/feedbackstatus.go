package authdns

import (
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/corralhq/corral/health"
	"github.com/corralhq/corral/internal/admin"
)

// feedbackCollector exports the last tick's effective weights and the
// reports received.
type feedbackCollector struct {
	f                             *feedback
	weight, ttl, reports, origins *prometheus.Desc
}

func newFeedbackCollector(f *feedback) *feedbackCollector {
	return &feedbackCollector{f: f,
		weight:  prometheus.NewDesc("corral_dns_feedback_weight", "Effective weight of a record under load feedback, in units of its configured weight (multivalue records weigh 1).", []string{"name", "type", "value"}, nil),
		ttl:     prometheus.NewDesc("corral_dns_feedback_ttl_seconds", "TTL of the answers of a record set under load feedback, in seconds: its configured TTL capped by feedback.max_ttl.", []string{"name", "type"}, nil),
		reports: prometheus.NewDesc("corral_dns_feedback_reports_total", "Load reports received, by result (ok, bad: not decoded).", []string{"result"}, nil),
		origins: prometheus.NewDesc("corral_dns_feedback_origins", "Origins heard from, by state (fresh, silent: no report within the timeout).", []string{"state"}, nil),
	}
}

func (c *feedbackCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.weight
	ch <- c.ttl
	ch <- c.reports
	ch <- c.origins
}

func (c *feedbackCollector) Collect(ch chan<- prometheus.Metric) {
	v := c.f.view.Load()
	seen, sets := map[[3]string]bool{}, map[[2]string]bool{}
	for _, w := range v.weights {
		if k := [2]string{w.name, w.rtype}; !sets[k] { // one series per set
			sets[k] = true
			ch <- prometheus.MustNewConstMetric(c.ttl, prometheus.GaugeValue, float64(w.ttl), w.name, w.rtype)
		}
		k := [3]string{w.name, w.rtype, w.value}
		if seen[k] { // the same value twice in a set: one series
			continue
		}
		seen[k] = true
		ch <- prometheus.MustNewConstMetric(c.weight, prometheus.GaugeValue, w.effective, w.name, w.rtype, w.value)
	}
	ch <- prometheus.MustNewConstMetric(c.reports, prometheus.CounterValue, float64(c.f.reports[0].Load()), "ok")
	ch <- prometheus.MustNewConstMetric(c.reports, prometheus.CounterValue, float64(c.f.reports[1].Load()), "bad")
	fresh := 0
	for _, o := range v.origins {
		if o.fresh {
			fresh++
		}
	}
	ch <- prometheus.MustNewConstMetric(c.origins, prometheus.GaugeValue, float64(fresh), "fresh")
	ch <- prometheus.MustNewConstMetric(c.origins, prometheus.GaugeValue, float64(len(v.origins)-fresh), "silent")
}

// FeedbackWeight is one record's effective weight under load feedback.
type FeedbackWeight struct {
	Name  string `json:"name"`
	Type  string `json:"type"`
	Value string `json:"value"`
	// Origin is the address of the origin whose report set it (empty:
	// none heard from).
	Origin string `json:"origin,omitempty"`
	// Configured and Effective are in units of the configured weight
	// (multivalue records weigh 1).
	Configured float64 `json:"configured"`
	Effective  float64 `json:"effective"`
	// TTL is the TTL of the set's answers, its ConfiguredTTL capped by
	// feedback.max_ttl, in whole seconds ("30s").
	TTL           string `json:"ttl"`
	ConfiguredTTL string `json:"configured_ttl"`
}

// FeedbackWeights returns the effective weights the last feedback
// interval set, in zone order; nil without feedback. It is safe for
// concurrent use.
func (s *Server) FeedbackWeights() []FeedbackWeight {
	if s.fb == nil {
		return nil
	}
	v := s.fb.view.Load()
	out := make([]FeedbackWeight, 0, len(v.weights))
	for _, w := range v.weights {
		out = append(out, FeedbackWeight{Name: w.name, Type: w.rtype, Value: w.value, Origin: w.origin, Configured: w.configured, Effective: w.effective,
			TTL: ttlString(w.ttl), ConfiguredTTL: ttlString(w.configuredTTL)})
	}
	return out
}

// HealthHandler returns the health page of the admin listener: the
// health checks (as health.Checker's page) and, with load feedback, the
// effective weights and the origins heard from; JSON with format=json.
func (s *Server) HealthHandler() http.Handler {
	return admin.StatusPage(admin.StatusPageConfig{
		JSON: func() any {
			list := s.checker.Status()
			out := struct {
				Checks       []health.StatusJSON `json:"checks"`
				Feedback     []FeedbackWeight    `json:"feedback,omitempty"`
				BigResolvers []BigResolver       `json:"big_resolvers,omitempty"`
			}{Checks: make([]health.StatusJSON, 0, len(list)), Feedback: s.FeedbackWeights(), BigResolvers: s.BigResolvers()}
			for _, c := range list {
				out.Checks = append(out.Checks, c.JSON())
			}
			return out
		},
		HTML: s.healthStatus,
	})
}

func (s *Server) healthStatus() admin.Status {
	list := s.checker.Status()
	healthy := 0
	t := admin.Table{Title: "checks", Columns: []string{"name", "kind", "target", "state", "since", "last probe", "last error", "last latency", "probes"}}
	for _, c := range list {
		state := "unhealthy"
		if c.Healthy {
			healthy++
			state = "healthy"
		}
		if c.Forced {
			state += " (forced)"
		}
		t.Rows = append(t.Rows, admin.Row{Bad: !c.Healthy, Cells: []string{c.Name, c.Kind, c.Target, state, stamp(c.Since), stamp(c.LastProbe), c.LastError, latency(c.LastLatency), strconv.FormatUint(c.Probes, 10)}})
	}
	st := admin.Status{Title: "health checks", Summary: fmt.Sprintf("%d of %d healthy at %s", healthy, len(list), stamp(s.now())), Bad: healthy < len(list), Tables: []admin.Table{t}}
	if s.res != nil {
		v := s.res.view.Load()
		rt := admin.Table{Title: "resolvers: big", Columns: []string{"resolver", "share of the queries"}}
		if s.res.aud != nil {
			rt.Columns = append(rt.Columns, "share of the sessions (audience)")
		}
		pct := func(x float64) string {
			if x == 0 {
				return "-"
			}
			return strconv.FormatFloat(100*x, 'f', 1, 64) + " %"
		}
		for _, b := range s.BigResolvers() {
			cells := []string{b.Prefix.String(), pct(b.Share)}
			if s.res.aud != nil {
				cells = append(cells, pct(b.Audience))
			}
			rt.Rows = append(rt.Rows, admin.Row{Cells: cells})
		}
		st.Tables = append(st.Tables, rt)
		st.Facts = append(st.Facts, admin.Fact{Name: "resolvers", Value: fmt.Sprintf("%d big by queries, %d tracked, big above %g of %d queries in the window, at %s",
			len(v.big), v.tracked, v.bigShare, v.total, stamp(v.at))})
		if a := s.res.aud; a != nil {
			av := a.view.Load()
			st.Facts = append(st.Facts, admin.Fact{Name: "resolver audiences", Value: fmt.Sprintf("%d big above %g of a set's opened sessions, %d tracked, %d answers not noted (sets full), half-life %v",
				len(av.big), a.rule.BigShare, av.tracked, a.dropped.Load(), a.cfg.HalfLife)})
		}
	}
	if s.fb == nil {
		return st
	}
	v := s.fb.view.Load()
	wt := admin.Table{Title: "load feedback: effective weights", Columns: []string{"name", "type", "value", "origin", "configured", "effective", "ttl (configured)"}}
	for _, w := range v.weights {
		wt.Rows = append(wt.Rows, admin.Row{Bad: w.effective < w.configured, Cells: []string{w.name, w.rtype, w.value, w.origin,
			strconv.FormatFloat(w.configured, 'g', 4, 64), strconv.FormatFloat(w.effective, 'g', 4, 64),
			ttlString(w.ttl) + " (" + ttlString(w.configuredTTL) + ")"}})
	}
	ot := admin.Table{Title: "load feedback: origins", Columns: []string{"addr", "node", "kind", "sessions / capacity", "in flight / limit", "stage", "pressure", "last report"}}
	for _, o := range v.origins {
		ot.Rows = append(ot.Rows, admin.Row{Bad: !o.fresh, Cells: []string{o.addr, o.node, o.kind, fmt.Sprintf("%d / %d", o.load.Sessions, o.load.Capacity),
			fmt.Sprintf("%d / %d", o.load.Inflight, o.load.Limit), strconv.Itoa(o.load.Stage), strconv.FormatFloat(o.load.Pressure(), 'f', 2, 64), stamp(o.load.At)}})
	}
	st.Tables = append(st.Tables, wt, ot)
	st.Facts = append(st.Facts, admin.Fact{Name: "feedback interval", Value: s.cfg.Feedback.interval().String()},
		admin.Fact{Name: "answer TTL cap (feedback.max_ttl)", Value: ttlString(uint32(s.cfg.Feedback.bounds().MaxTTL / time.Second))}, admin.Fact{Name: "last step", Value: stamp(v.at)})
	return st
}

// ttlString writes a TTL of whole seconds as the config can ("30s",
// "3600s").
func ttlString(sec uint32) string { return strconv.FormatUint(uint64(sec), 10) + "s" }

func stamp(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format("2006-01-02 15:04:05.000Z")
}

func latency(d time.Duration) string {
	if d == 0 {
		return "-"
	}
	return d.Round(time.Microsecond).String()
}
