package limit

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// LimiterSnapshot is a Limiter's state at one instant, for callers that do
// not use Prometheus (the cohort simulator, tests, dashboards).
type LimiterSnapshot struct {
	// Limit is the current limit.
	Limit int
	// InFlight is the number of unreleased tokens.
	InFlight int
	// Ceilings is the admission ceiling of each priority.
	Ceilings [NumPriorities]int
	// Acquired is the number of tokens ever admitted.
	Acquired int64
	// Rejected is the number of acquisitions refused.
	Rejected int64
	// RejectedByPriority counts refusals of TryAcquirePriority.
	RejectedByPriority Counts
	// Ignored and Dropped count tokens released with Ignore and Drop.
	Ignored, Dropped int64
	// Invalid counts timed tokens whose latency was negative or huge
	// (explicit times that went backwards) and were not sampled.
	Invalid int64
	// Waiting is the number of requests in the waiting room now; Queued
	// counts those that ever waited, Expired those whose wait ended
	// without a slot (also counted in Rejected).
	Waiting         int
	Queued, Expired int64
	// Rate is the admissions per second (Limiter.Rate); Capacity the
	// rate the waiting room estimates the node serves (Limiter.Capacity)
	// and Backlog the work ahead of it (Limiter.Backlog).
	Rate, Capacity, Backlog float64
	// Algorithm is the Limit's own counters.
	Algorithm LimitStats
}

// Snapshot returns the Limiter's counters.
func (l *Limiter) Snapshot() LimiterSnapshot {
	l.mu.Lock()
	seq := uint32(l.word.Load() >> 32)
	acquired := l.acquired + int64(seq-l.lastSeq)
	l.mu.Unlock()
	s := LimiterSnapshot{
		Limit:     l.Limit(),
		InFlight:  l.InFlight(),
		Acquired:  acquired,
		Rejected:  l.rejected.Load(),
		Ignored:   l.ignored.Load(),
		Dropped:   l.dropped.Load(),
		Invalid:   l.invalid.Load(),
		Algorithm: l.lim.Stats(),
		Rate:      l.Rate(),
		Capacity:  l.Capacity(),
		Backlog:   l.Backlog(),
	}
	if r := l.room; r != nil {
		s.Waiting = int(r.n.Load())
		s.Queued, s.Expired = r.queued.Load(), r.expired.Load()
	}
	for p := range s.Ceilings {
		s.Ceilings[p] = int(l.ceiling(int8(p)))
		s.RejectedByPriority[p] = l.prioRej[p].Load()
	}
	return s
}

// ShedderSnapshot is a Shedder's state at one instant.
type ShedderSnapshot struct {
	// Stage is the current stage.
	Stage Stage
	// Admitted, Rejected and Severed count decisions per priority
	// (Severed counts what SeverQuota handed out).
	Admitted, Rejected, Severed Counts
	// Transitions is the number of stage changes.
	Transitions int64
	// Latency is the latency percentile of the last evaluation that had
	// enough samples.
	Latency time.Duration
	// Samples is the number of latencies that evaluation saw.
	Samples int64
	// FallDwell is the current (possibly damped) fall dwell.
	FallDwell time.Duration
	// Readmit is how far the current stage is on its way down, 0 to 1: in
	// reject-p2, reject-p1 and the lifeboat the share of the priority it
	// first turned away that it admits again; in the stages that sever,
	// the part of FallDwell the calm has lasted. The stage falls at 1.
	Readmit float64
	// Emergency reports a resource ceiling reached at the last evaluation.
	Emergency bool
}

// Snapshot returns the Shedder's counters.
func (s *Shedder) Snapshot() ShedderSnapshot {
	s.mu.Lock()
	out := ShedderSnapshot{
		Stage:       s.Stage(),
		Transitions: s.transitions,
		Latency:     s.lastP99,
		Samples:     s.lastCount,
		FallDwell:   s.fallDwell,
		Readmit:     s.readmitShare(),
		Emergency:   s.emergency,
	}
	s.mu.Unlock()
	out.Admitted, out.Rejected, out.Severed = s.admitted.Load(), s.rejected.Load(), s.severed.Load()
	return out
}

// MetricsConfig configures a Collector. Limiter and Shedder may each be
// nil; the Collector then exports only the other's metrics.
type MetricsConfig struct {
	// Registerer receives the Collector. Nil means the caller registers
	// it (or calls Collect directly).
	Registerer prometheus.Registerer
	// Namespace and Subsystem prefix every metric name. Namespace
	// defaults to "corral", Subsystem to "limit".
	Namespace, Subsystem string
	// ConstLabels are added to every metric (for example the limiter's
	// role: "conn" or "msg"); the help texts name them.
	ConstLabels prometheus.Labels
	// Limiter is the Limiter to export, or nil.
	Limiter *Limiter
	// Shedder is the Shedder to export, or nil.
	Shedder *Shedder
}

// Collector exports a Limiter's and a Shedder's state as Prometheus
// metrics, read at scrape time so the hot paths pay nothing. It is safe for
// concurrent use.
type Collector struct {
	cfg MetricsConfig

	limit, inflight, ceiling, acquired, rejected, prioRejected *prometheus.Desc
	waiting, queued, expired, capacity, backlog                *prometheus.Desc
	stage, admitted, shedRejected, severed                     *prometheus.Desc
	transitions, latency, readmit                              *prometheus.Desc
}

var _ prometheus.Collector = (*Collector)(nil)

// NewCollector returns a Collector and registers it with cfg.Registerer
// when set. The metrics are <namespace>_<subsystem>_ followed by: limit,
// inflight, ceiling{priority}, acquired_total, rejected_total,
// priority_rejected_total{priority}, waiting, queued_total,
// queue_expired_total, capacity, backlog (from the Limiter); stage,
// admitted_total{priority}, shed_rejected_total{priority},
// severed_total{priority}, stage_transitions_total, latency_seconds (from
// the Shedder). Every priority's series exists from the first scrape (at
// zero), labelled p0, p1 and p2, and each help text ends with the labels
// its series carry ("Labels: priority (p0, p1, p2).", constant labels
// with their values, separated by semicolons), or none.
func NewCollector(cfg MetricsConfig) (*Collector, error) {
	if cfg.Limiter == nil && cfg.Shedder == nil {
		return nil, fmt.Errorf("limit: metrics: need a Limiter or a Shedder")
	}
	def(&cfg.Namespace, "corral")
	def(&cfg.Subsystem, "limit")
	name := func(n string) string { return prometheus.BuildFQName(cfg.Namespace, cfg.Subsystem, n) }
	desc := func(n, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc(name(n), help+labelsHelp(cfg.ConstLabels, labels), labels, cfg.ConstLabels)
	}
	c := &Collector{
		cfg:          cfg,
		limit:        desc("limit", "Current concurrency limit."),
		inflight:     desc("inflight", "Admitted work not yet released."),
		ceiling:      desc("ceiling", "Admission ceiling of each priority: in-flight at which the limiter refuses it (the limit for p0; below it by the reserves of higher priorities).", "priority"),
		acquired:     desc("acquired_total", "Work admitted by the limiter."),
		rejected:     desc("rejected_total", "Work refused by the limiter."),
		prioRejected: desc("priority_rejected_total", "Work refused by the limiter, by priority.", "priority"),
		waiting:      desc("waiting", "Requests in the waiting room, waiting for a slot."),
		queued:       desc("queued_total", "Requests that waited for a slot in the waiting room."),
		expired:      desc("queue_expired_total", "Waits that ended without a slot (refused; also in rejected_total)."),
		capacity:     desc("capacity", "Admissions per second the node serves, as the waiting room estimates them (the places of refused work are spaced by it, or by a rate given for it: Limiter.SetPlaceRate); 0 unknown."),
		backlog:      desc("backlog", "Work ahead of the node: requests waiting plus places promised to refused work and not yet served."),
		stage:        desc("stage", "Current shedding stage (0 normal, 1 reject-p2, 2 sever-p2, 3 reject-p1, 4 sever-p1, 5 lifeboat)."),
		admitted:     desc("admitted_total", "Work admitted by the shedder, by priority.", "priority"),
		shedRejected: desc("shed_rejected_total", "Work rejected by the shedder, by priority.", "priority"),
		severed:      desc("severed_total", "Sessions the shedder asked to sever, by priority.", "priority"),
		transitions:  desc("stage_transitions_total", "Stage changes."),
		latency:      desc("latency_seconds", "Latency percentile at the last stage evaluation."),
		readmit:      desc("readmit_share", "How far the stage is on its way down (0 to 1; it falls at 1): in reject-p2, reject-p1 and lifeboat the share of the priority it first turned away that it admits again, in the stages that sever the part of the fall dwell the calm has lasted."),
	}
	if cfg.Registerer != nil {
		if err := cfg.Registerer.Register(c); err != nil {
			return nil, fmt.Errorf("limit: metrics: register: %w", err)
		}
	}
	return c, nil
}

// Describe sends the descriptors of the exported metrics.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	if c.cfg.Limiter != nil {
		for _, d := range []*prometheus.Desc{c.limit, c.inflight, c.ceiling, c.acquired, c.rejected, c.prioRejected, c.waiting, c.queued, c.expired, c.capacity, c.backlog} {
			ch <- d
		}
	}
	if c.cfg.Shedder != nil {
		for _, d := range []*prometheus.Desc{c.stage, c.admitted, c.shedRejected, c.severed, c.transitions, c.latency, c.readmit} {
			ch <- d
		}
	}
}

// Collect sends the current values.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	gauge, counter := prometheus.GaugeValue, prometheus.CounterValue
	perPrio := func(d *prometheus.Desc, v Counts) {
		for p := range NumPriorities {
			ch <- prometheus.MustNewConstMetric(d, counter, float64(v[p]), Priority(p).String())
		}
	}
	if l := c.cfg.Limiter; l != nil {
		s := l.Snapshot()
		ch <- prometheus.MustNewConstMetric(c.limit, gauge, float64(s.Limit))
		ch <- prometheus.MustNewConstMetric(c.inflight, gauge, float64(s.InFlight))
		for p, v := range s.Ceilings {
			ch <- prometheus.MustNewConstMetric(c.ceiling, gauge, float64(v), Priority(p).String())
		}
		ch <- prometheus.MustNewConstMetric(c.acquired, counter, float64(s.Acquired))
		ch <- prometheus.MustNewConstMetric(c.rejected, counter, float64(s.Rejected))
		perPrio(c.prioRejected, s.RejectedByPriority)
		ch <- prometheus.MustNewConstMetric(c.waiting, gauge, float64(s.Waiting))
		ch <- prometheus.MustNewConstMetric(c.queued, counter, float64(s.Queued))
		ch <- prometheus.MustNewConstMetric(c.expired, counter, float64(s.Expired))
		ch <- prometheus.MustNewConstMetric(c.capacity, gauge, s.Capacity)
		ch <- prometheus.MustNewConstMetric(c.backlog, gauge, s.Backlog)
	}
	if sh := c.cfg.Shedder; sh != nil {
		s := sh.Snapshot()
		ch <- prometheus.MustNewConstMetric(c.stage, gauge, float64(s.Stage))
		perPrio(c.admitted, s.Admitted)
		perPrio(c.shedRejected, s.Rejected)
		perPrio(c.severed, s.Severed)
		ch <- prometheus.MustNewConstMetric(c.transitions, counter, float64(s.Transitions))
		ch <- prometheus.MustNewConstMetric(c.latency, gauge, s.Latency.Seconds())
		ch <- prometheus.MustNewConstMetric(c.readmit, gauge, s.Readmit)
	}
}

// labelsHelp is the end of a help text naming the labels of its series:
// the constant ones with their value, then the variable ones (only
// priority here) with theirs.
func labelsHelp(constLabels prometheus.Labels, labels []string) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(constLabels)) {
		parts = append(parts, fmt.Sprintf("%s (%s)", k, constLabels[k]))
	}
	for _, l := range labels {
		if l == "priority" {
			l += " (p0, p1, p2)"
		}
		parts = append(parts, l)
	}
	if len(parts) == 0 {
		return ""
	}
	return " Labels: " + strings.Join(parts, "; ") + "."
}
