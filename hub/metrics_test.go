package hub

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/corralhq/corral/wire"
)

// TestMetricsCreatedAtZeroWithNamedLabels checks the hub's series on a
// fresh registry: every labelled series that can be emitted exists at zero
// before anything happened, priorities are spelled p0, p1, p2, and each
// help text names every label value its series carry.
func TestMetricsCreatedAtZeroWithNamedLabels(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := newMetrics(reg)
	series := gatherSeries(t, reg, true)
	for _, want := range []string{
		"corral_hub_sessions,transport=grpc",
		"corral_hub_sessions_opened_total,transport=ws",
		"corral_hub_session_closes_total,code=1001",
		"corral_hub_session_closes_total,code=other",
		"corral_hub_auth_rejected_total,reason=no_expiry",
		"corral_hub_auth_rejected_total,reason=tenant",
		"corral_hub_frames_received_total,type=publish",
		"corral_hub_messages_dropped_total,priority=p2",
		"corral_hub_published_total,api=nats",
		"corral_hub_resumes_total,result=gap",
		"corral_hub_subscribe_sources_total,source=store",
		"corral_hub_shed_total,action=drain,priority=p0",
		"corral_hub_shed_total,action=reject_publish,priority=p2",
		"corral_hub_shed_total,action=sever,priority=p1",
	} {
		if !series[want] {
			t.Errorf("series %s not created at zero", want)
		}
	}
	// Emitting through the hub's label helpers creates no series that was
	// not there at zero.
	for rank := range 3 {
		for _, a := range labelShedActions {
			m.shedInc(a, rank)
		}
		if rank > 0 {
			m.dropped.WithLabelValues(priorityLabel(rank)).Inc()
		}
	}
	for _, c := range []uint16{1000, 1001, 1006, 3000, 4000, 4999} {
		m.closes.WithLabelValues(closeCodeLabel(wire.CloseCode(c))).Inc()
	}
	after := gatherSeries(t, reg, false)
	for k := range after {
		if !series[k] {
			t.Errorf("series %s appeared after emitting, was not created at zero", k)
		}
	}
}

// gatherSeries returns the series of reg as "name,label=value,...", and
// with fresh checks that each is zero, that priorities are spelled p0, p1,
// p2 and that the help text names every label value.
func gatherSeries(t *testing.T, reg *prometheus.Registry, fresh bool) map[string]bool {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	series := map[string]bool{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			key := mf.GetName()
			for _, lp := range m.GetLabel() {
				key += "," + lp.GetName() + "=" + lp.GetValue()
				if lp.GetName() == "priority" && !strings.HasPrefix(lp.GetValue(), "p") {
					t.Errorf("%s: priority label %q, want p0, p1 or p2", mf.GetName(), lp.GetValue())
				}
				if lp.GetName() != "code" && !strings.Contains(mf.GetHelp(), lp.GetValue()) {
					t.Errorf("%s: help %q does not name the label value %q", mf.GetName(), mf.GetHelp(), lp.GetValue())
				}
			}
			if v := m.GetCounter().GetValue() + m.GetGauge().GetValue(); fresh && v != 0 {
				t.Errorf("%s = %v on a fresh registry", key, v)
			}
			series[key] = true
		}
	}
	return series
}

func TestCloseCodeLabelBounded(t *testing.T) {
	for _, tc := range []struct {
		name string
		code uint16
		want string
	}{
		{"a code of the table", 1001, "1001"},
		{"a private code a peer chose", 4999, "other"},
		{"a reserved code", 1005, "other"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := closeCodeLabel(wire.CloseCode(tc.code)); got != tc.want {
				t.Fatalf("closeCodeLabel(%d) = %q, want %q", tc.code, got, tc.want)
			}
		})
	}
}

// TestResolvedSeriesCountTheirLabel: a count through the resolved series
// of the session path lands on the series of its own label value, as
// WithLabelValues would, and a value outside the hub's list still counts.
func TestResolvedSeriesCountTheirLabel(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := newMetrics(reg)
	for i, typ := range labelFrameTypes {
		for range i + 1 {
			m.framesInOf.with(typ).Inc()
		}
	}
	for i, tr := range labelTransports {
		for range i + 1 {
			m.sessionsOf.with(tr).Inc()
			m.sessionsOpenedOf.with(tr).Inc()
		}
	}
	m.resumeSourceOf.with("store").Inc()
	m.droppedOf.with("p2").Inc()
	m.framesInOf.with("unheard-of").Inc()
	for _, c := range []uint16{1001, 1001, 4999} {
		m.closesFor(wire.CloseCode(c)).Inc()
	}
	want := map[string]float64{
		"corral_hub_frames_received_total,type=unheard-of": 1,
		"corral_hub_subscribe_sources_total,source=store":  1,
		"corral_hub_subscribe_sources_total,source=recent": 0,
		"corral_hub_messages_dropped_total,priority=p2":    1,
		"corral_hub_messages_dropped_total,priority=p1":    0,
		"corral_hub_session_closes_total,code=1001":        2,
		"corral_hub_session_closes_total,code=other":       1,
		"corral_hub_session_closes_total,code=1000":        0,
	}
	for i, typ := range labelFrameTypes {
		want["corral_hub_frames_received_total,type="+typ] = float64(i + 1)
	}
	for i, tr := range labelTransports {
		want["corral_hub_sessions,transport="+tr] = float64(i + 1)
		want["corral_hub_sessions_opened_total,transport="+tr] = float64(i + 1)
	}
	got := seriesValues(t, reg)
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %v, want %v", k, got[k], v)
		}
	}
}

// seriesValues returns the value of every series of reg by
// "name,label=value,...".
func seriesValues(t *testing.T, reg *prometheus.Registry) map[string]float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			key := mf.GetName()
			for _, lp := range m.GetLabel() {
				key += "," + lp.GetName() + "=" + lp.GetValue()
			}
			out[key] = m.GetCounter().GetValue() + m.GetGauge().GetValue()
		}
	}
	return out
}
