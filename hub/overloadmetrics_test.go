package hub

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/corralhq/corral/internal/config"
)

// TestOverloadMetricsExported: a hub with overload control (examples/hub.yaml)
// exports its publish limiter (limit, in-flight, each priority's
// ceiling), its shedding stage and the latency histograms of handshakes and
// publishes, on the registry of its Options, every priority's series at
// zero from the start and every help text naming its labels.
func TestOverloadMetricsExported(t *testing.T) {
	cfg := DefaultConfig()
	if err := config.Load("../examples/hub.yaml", &cfg, config.Options{}); err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	h, err := New(cfg, Options{Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	want := `
# HELP corral_hub_publish_ceiling Admission ceiling of each priority: in-flight at which the limiter refuses it (the limit for p0; below it by the reserves of higher priorities). Labels: priority (p0, p1, p2).
# TYPE corral_hub_publish_ceiling gauge
corral_hub_publish_ceiling{priority="p0"} 20
corral_hub_publish_ceiling{priority="p1"} 19
corral_hub_publish_ceiling{priority="p2"} 18
# HELP corral_hub_publish_inflight Admitted work not yet released.
# TYPE corral_hub_publish_inflight gauge
corral_hub_publish_inflight 1
# HELP corral_hub_publish_limit Current concurrency limit.
# TYPE corral_hub_publish_limit gauge
corral_hub_publish_limit 20
# HELP corral_hub_overload_stage Current shedding stage (0 normal, 1 reject-p2, 2 sever-p2, 3 reject-p1, 4 sever-p1, 5 lifeboat).
# TYPE corral_hub_overload_stage gauge
corral_hub_overload_stage 0
`
	tok, ok := h.limiter.TryAcquirePriority(2)
	if !ok {
		t.Fatal("an idle publish limiter refused P2")
	}
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want),
		"corral_hub_publish_ceiling", "corral_hub_publish_inflight", "corral_hub_publish_limit", "corral_hub_overload_stage"); err != nil {
		t.Error(err)
	}
	tok.Success()
	for name, n := range map[string]int{
		"corral_hub_handshake_duration_seconds":      1,
		"corral_hub_publish_duration_seconds":        3,
		"corral_hub_publish_priority_rejected_total": 3,
		"corral_hub_overload_admitted_total":         3,
		"corral_hub_overload_severed_total":          3,
	} {
		if got, err := testutil.GatherAndCount(reg, name); err != nil || got != n {
			t.Errorf("%s: %d series (err %v), want %d before anything happened", name, got, err, n)
		}
	}
	h.observeHandshake(40 * time.Millisecond)
	h.observePublish(1, h.now().Add(-3*time.Millisecond))
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	counts := map[string]uint64{}
	for _, f := range fams {
		mine := strings.HasPrefix(f.GetName(), "corral_hub_publish_") || strings.HasPrefix(f.GetName(), "corral_hub_overload_") ||
			f.GetName() == "corral_hub_handshake_duration_seconds"
		if !mine {
			continue // the hub's own series: TestMetricsCreatedAtZeroWithNamedLabels
		}
		for _, m := range f.GetMetric() {
			for _, lp := range m.GetLabel() {
				if lp.GetName() == "priority" && !strings.Contains(f.GetHelp(), "priority (p0, p1, p2)") {
					t.Errorf("%s: help %q does not name the priority label's values", f.GetName(), f.GetHelp())
				}
			}
			if h := m.GetHistogram(); h != nil {
				key := f.GetName()
				for _, lp := range m.GetLabel() {
					key += "," + lp.GetValue()
				}
				counts[key] = h.GetSampleCount()
			}
		}
	}
	if counts["corral_hub_handshake_duration_seconds"] != 1 || counts["corral_hub_publish_duration_seconds,p1"] != 1 || counts["corral_hub_publish_duration_seconds,p0"] != 0 {
		t.Errorf("histogram counts %v, want one handshake and one p1 publish", counts)
	}
}
