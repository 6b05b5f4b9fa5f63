package authdns

import (
	"net/netip"
	"slices"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/corralhq/corral/authdns/answer"
)

// resolverCollector exports the counts of resolver-aware answers by class
// (summed over the workers' stats) and what the last step found.
type resolverCollector struct {
	r                                                      *resolvers
	coll                                                   *collector
	queries, answers, records, classes, entries, slotsDesc *prometheus.Desc
	audBig, audTracked, audDropped                         *prometheus.Desc
}

func newResolverCollector(r *resolvers, coll *collector) *resolverCollector {
	return &resolverCollector{r: r, coll: coll,
		queries:    prometheus.NewDesc("corral_dns_resolver_queries_total", "Queries answered from a record set, by the class of their resolver (resolver-aware answers: big above resolvers.big_share of the queries).", []string{"class"}, nil),
		answers:    prometheus.NewDesc("corral_dns_resolver_answers_total", "Answers of record sets whose answer depends on the resolver's class (multivalue, weighted-subset, weighted with big_weighted_subset), by class.", []string{"class"}, nil),
		records:    prometheus.NewDesc("corral_dns_resolver_answer_records_total", "Records in the answers of corral_dns_resolver_answers_total, by class; over them, the mean records per answer.", []string{"class"}, nil),
		classes:    prometheus.NewDesc("corral_dns_resolvers", "Resolvers with queries in the window at the last step, by class.", []string{"class"}, nil),
		entries:    prometheus.NewDesc("corral_dns_resolver_table_entries", "Slots in use in the resolver tables (one per UDP socket and one for TCP), at the last step; never above corral_dns_resolver_table_slots.", nil, nil),
		slotsDesc:  prometheus.NewDesc("corral_dns_resolver_table_slots", "Slots of the resolver tables, a fixed number (resolvers.table_size per table).", nil, nil),
		audBig:     prometheus.NewDesc("corral_dns_resolver_audience_big", "Resolvers classed big by their audience at the last feedback interval (resolvers.audience: above resolvers.big_share of a set's opened sessions, learned from where their answers sent them).", nil, nil),
		audTracked: prometheus.NewDesc("corral_dns_resolver_audience_tracked", "Resolvers whose answers audience learning tracks, over every set (at most resolvers.table_size per set).", nil, nil),
		audDropped: prometheus.NewDesc("corral_dns_resolver_audience_dropped_total", "Answers audience learning did not note: their set tracked resolvers.table_size resolvers already.", nil, nil),
	}
}

func (c *resolverCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.queries, c.answers, c.records, c.classes, c.entries, c.slotsDesc} {
		ch <- d
	}
	if c.r.aud != nil {
		ch <- c.audBig
		ch <- c.audTracked
		ch <- c.audDropped
	}
}

func (c *resolverCollector) Collect(ch chan<- prometheus.Metric) {
	c.coll.mu.Lock()
	all := c.coll.all
	c.coll.mu.Unlock()
	var sum [answer.NumClasses]classCounts
	for _, s := range all {
		for i := range s.byClass {
			sum[i].queries += s.byClass[i].queries.Load()
			sum[i].answers += s.byClass[i].answers.Load()
			sum[i].records += s.byClass[i].records.Load()
		}
	}
	v := c.r.view.Load()
	for i := range answer.NumClasses {
		name := answer.Class(i).String()
		ch <- prometheus.MustNewConstMetric(c.queries, prometheus.CounterValue, float64(sum[i].queries), name)
		ch <- prometheus.MustNewConstMetric(c.answers, prometheus.CounterValue, float64(sum[i].answers), name)
		ch <- prometheus.MustNewConstMetric(c.records, prometheus.CounterValue, float64(sum[i].records), name)
	}
	ch <- prometheus.MustNewConstMetric(c.classes, prometheus.GaugeValue, float64(len(v.big)), answer.ClassBig.String())
	ch <- prometheus.MustNewConstMetric(c.classes, prometheus.GaugeValue, float64(v.tracked-len(v.big)), answer.ClassSmall.String())
	ch <- prometheus.MustNewConstMetric(c.entries, prometheus.GaugeValue, float64(v.entries))
	c.r.mu.Lock()
	slots := 0
	for _, t := range c.r.tables {
		slots += len(t.slots)
	}
	c.r.mu.Unlock()
	ch <- prometheus.MustNewConstMetric(c.slotsDesc, prometheus.GaugeValue, float64(slots))
	if a := c.r.aud; a != nil {
		av := a.view.Load()
		ch <- prometheus.MustNewConstMetric(c.audBig, prometheus.GaugeValue, float64(len(av.big)))
		ch <- prometheus.MustNewConstMetric(c.audTracked, prometheus.GaugeValue, float64(av.tracked))
		ch <- prometheus.MustNewConstMetric(c.audDropped, prometheus.CounterValue, float64(a.dropped.Load()))
	}
}

var _ prometheus.Collector = (*resolverCollector)(nil)

// BigResolver is a resolver that resolver-aware answers class big.
type BigResolver struct {
	// Prefix is the resolver: a source prefix, or a client subnet.
	Prefix netip.Prefix `json:"prefix"`
	// Share is its share of the queries in the window, 0 to 1; 0 for a
	// resolver big by its audience only.
	Share float64 `json:"share"`
	// Audience is its share of the sessions a set's origins opened
	// (resolvers.audience), 0 to 1, when that classes it big.
	Audience float64 `json:"audience,omitempty"`
}

// BigResolvers returns the resolvers classed big, by their share of the
// queries at the last step (the largest first) and then those big by
// their audience only (the largest audience first); nil without
// resolver-aware answers. It is safe for concurrent use.
func (s *Server) BigResolvers() []BigResolver {
	if s.res == nil {
		return nil
	}
	v := s.res.view.Load()
	out := make([]BigResolver, 0, len(v.big))
	for _, b := range v.big {
		out = append(out, BigResolver{Prefix: b.prefix, Share: b.share})
	}
	if s.res.aud == nil {
		return out
	}
	byAud := s.res.aud.bigByAudience()
	for i := range out {
		out[i].Audience = byAud[out[i].Prefix]
		delete(byAud, out[i].Prefix)
	}
	rest := make([]BigResolver, 0, len(byAud))
	for p, a := range byAud {
		rest = append(rest, BigResolver{Prefix: p, Audience: a})
	}
	slices.SortFunc(rest, func(a, b BigResolver) int {
		if a.Audience != b.Audience {
			if a.Audience > b.Audience {
				return -1
			}
			return 1
		}
		return a.Prefix.Addr().Compare(b.Prefix.Addr())
	})
	return append(out, rest...)
}
