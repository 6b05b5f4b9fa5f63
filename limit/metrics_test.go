package limit

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/corralhq/corral/internal/testkit"
)

func TestCollector(t *testing.T) {
	clock := testkit.NewClock(simEpoch)
	f, _ := NewFixed(2)
	lim, err := NewLimiter(LimiterConfig{Limit: f, Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	shed, err := NewShedder(ShedderConfig{Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	if _, err := NewCollector(MetricsConfig{Registerer: reg, Subsystem: "edge_conn", Limiter: lim, Shedder: shed}); err != nil {
		t.Fatal(err)
	}
	tok, _ := lim.TryAcquirePriorityAt(P1, clock.Now())
	lim.TryAcquirePriorityAt(P2, clock.Now()) // P2 ceiling is 1 at a limit of 2: refused
	shed.AdmitAt(P0, clock.Now())
	shed.AdmitAt(P2, clock.Now())
	want := `
# HELP corral_edge_conn_inflight Admitted work not yet released.
# TYPE corral_edge_conn_inflight gauge
corral_edge_conn_inflight 1
# HELP corral_edge_conn_limit Current concurrency limit.
# TYPE corral_edge_conn_limit gauge
corral_edge_conn_limit 2
# HELP corral_edge_conn_ceiling Admission ceiling of each priority: in-flight at which the limiter refuses it (the limit for p0; below it by the reserves of higher priorities). Labels: priority (p0, p1, p2).
# TYPE corral_edge_conn_ceiling gauge
corral_edge_conn_ceiling{priority="p0"} 2
corral_edge_conn_ceiling{priority="p1"} 1
corral_edge_conn_ceiling{priority="p2"} 1
# HELP corral_edge_conn_priority_rejected_total Work refused by the limiter, by priority. Labels: priority (p0, p1, p2).
# TYPE corral_edge_conn_priority_rejected_total counter
corral_edge_conn_priority_rejected_total{priority="p0"} 0
corral_edge_conn_priority_rejected_total{priority="p1"} 0
corral_edge_conn_priority_rejected_total{priority="p2"} 1
# HELP corral_edge_conn_admitted_total Work admitted by the shedder, by priority. Labels: priority (p0, p1, p2).
# TYPE corral_edge_conn_admitted_total counter
corral_edge_conn_admitted_total{priority="p0"} 1
corral_edge_conn_admitted_total{priority="p1"} 0
corral_edge_conn_admitted_total{priority="p2"} 1
# HELP corral_edge_conn_backlog Work ahead of the node: requests waiting plus places promised to refused work and not yet served.
# TYPE corral_edge_conn_backlog gauge
corral_edge_conn_backlog 0
# HELP corral_edge_conn_stage Current shedding stage (0 normal, 1 reject-p2, 2 sever-p2, 3 reject-p1, 4 sever-p1, 5 lifeboat).
# TYPE corral_edge_conn_stage gauge
corral_edge_conn_stage 0
`
	names := []string{"corral_edge_conn_inflight", "corral_edge_conn_limit", "corral_edge_conn_ceiling", "corral_edge_conn_priority_rejected_total",
		"corral_edge_conn_admitted_total", "corral_edge_conn_stage", "corral_edge_conn_backlog"}
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), names...); err != nil {
		t.Error(err)
	}
	tok.SuccessAt(clock.Now().Add(time.Millisecond))
	if n, err := testutil.GatherAndCount(reg); err != nil || n != 28 {
		t.Errorf("gathered %d series (err %v), want 28 (15 from the limiter, 13 from the shedder)", n, err)
	}
	if _, err := NewCollector(MetricsConfig{Registerer: reg, Subsystem: "edge_conn", Limiter: lim}); err == nil {
		t.Error("registering the same metrics twice succeeded")
	}
	if _, err := NewCollector(MetricsConfig{}); err == nil {
		t.Error("a collector with nothing to collect was accepted")
	}
}

// TestCollectorHelpNamesItsLabels: every family's help text ends with
// exactly the labels its series carry, constant ones included, and every
// priority's series exists before anything happened.
func TestCollectorHelpNamesItsLabels(t *testing.T) {
	lim, err := NewLimiter(LimiterConfig{})
	if err != nil {
		t.Fatal(err)
	}
	shed, err := NewShedder(ShedderConfig{})
	if err != nil {
		t.Fatal(err)
	}
	for _, constLabels := range []prometheus.Labels{nil, {"limiter": "publish"}} {
		reg := prometheus.NewRegistry()
		if _, err := NewCollector(MetricsConfig{Registerer: reg, ConstLabels: constLabels, Limiter: lim, Shedder: shed}); err != nil {
			t.Fatal(err)
		}
		fams, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		if len(fams) != 18 {
			t.Errorf("%d families, want 18", len(fams))
		}
		for _, f := range fams {
			var names []string
			for _, lp := range f.GetMetric()[0].GetLabel() {
				names = append(names, lp.GetName())
			}
			help := f.GetHelp()
			var named []string
			if i := strings.Index(help, " Labels: "); i >= 0 {
				for _, part := range strings.Split(strings.TrimSuffix(help[i+len(" Labels: "):], "."), "; ") {
					named = append(named, strings.Fields(part)[0])
				}
			}
			slices.Sort(names)
			slices.Sort(named)
			if !slices.Equal(names, named) {
				t.Errorf("%s: help %q names labels %v, its series carry %v", f.GetName(), help, named, names)
			}
			if slices.Contains(names, "priority") && len(f.GetMetric()) != NumPriorities {
				t.Errorf("%s: %d series, want one per priority from the start", f.GetName(), len(f.GetMetric()))
			}
			for _, m := range f.GetMetric() {
				for _, lp := range m.GetLabel() {
					if lp.GetName() == "priority" && !slices.Contains([]string{"p0", "p1", "p2"}, lp.GetValue()) {
						t.Errorf("%s: priority label %q, want p0, p1 or p2", f.GetName(), lp.GetValue())
					}
				}
			}
		}
	}
}
