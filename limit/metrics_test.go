package limit

import (
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
# HELP corral_edge_conn_priority_rejected_total Work refused by the limiter, by priority.
# TYPE corral_edge_conn_priority_rejected_total counter
corral_edge_conn_priority_rejected_total{priority="p0"} 0
corral_edge_conn_priority_rejected_total{priority="p1"} 0
corral_edge_conn_priority_rejected_total{priority="p2"} 1
# HELP corral_edge_conn_admitted_total Work admitted by the shedder, by priority.
# TYPE corral_edge_conn_admitted_total counter
corral_edge_conn_admitted_total{priority="p0"} 1
corral_edge_conn_admitted_total{priority="p1"} 0
corral_edge_conn_admitted_total{priority="p2"} 1
# HELP corral_edge_conn_stage Current shedding stage (0 normal .. 5 lifeboat).
# TYPE corral_edge_conn_stage gauge
corral_edge_conn_stage 0
`
	names := []string{"corral_edge_conn_inflight", "corral_edge_conn_limit", "corral_edge_conn_priority_rejected_total",
		"corral_edge_conn_admitted_total", "corral_edge_conn_stage"}
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), names...); err != nil {
		t.Error(err)
	}
	tok.SuccessAt(clock.Now().Add(time.Millisecond))
	if n, err := testutil.GatherAndCount(reg); err != nil || n != 19 {
		t.Errorf("gathered %d series (err %v), want 19 (7 from the limiter, 12 from the shedder)", n, err)
	}
	if _, err := NewCollector(MetricsConfig{Registerer: reg, Subsystem: "edge_conn", Limiter: lim}); err == nil {
		t.Error("registering the same metrics twice succeeded")
	}
	if _, err := NewCollector(MetricsConfig{}); err == nil {
		t.Error("a collector with nothing to collect was accepted")
	}
}
