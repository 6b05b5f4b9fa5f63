package testkit

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// Metrics returns the series of the metric family name that reg gathers
// (none when reg has no such family), failing the test when reg cannot
// gather: the one loop over Gather that the packages' tests read their
// counters, gauges and histograms through.
func Metrics(t testing.TB, reg prometheus.Gatherer, name string) []*dto.Metric {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatalf("gather %s: %v", name, err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			return mf.GetMetric()
		}
	}
	return nil
}
