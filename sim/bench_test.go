package sim

import (
	"testing"

	"github.com/corralhq/corral/scenario"
)

// benchVariant runs variant i of a shipped scenario once per iteration and
// reports the steps of one run (steps/op).
func benchVariant(b *testing.B, file string, i int) {
	sc, err := scenario.Load("../scenarios/" + file)
	if err != nil {
		b.Fatal(err)
	}
	vs, err := sc.Variants()
	if err != nil {
		b.Fatal(err)
	}
	v := vs[i]
	b.ReportAllocs()
	var steps int
	for b.Loop() {
		s, err := New(v.Scenario, v.Name)
		if err != nil {
			b.Fatal(err)
		}
		r := s.Run(nil)
		steps = len(r.Steps)
		if r.Summary.FinalConnected == 0 {
			b.Fatal("nobody connected")
		}
	}
	b.ReportMetric(float64(steps), "steps/op")
}

// BenchmarkCDN121M is the speed target: 121 M devices surging through a
// CDN onto 6 load balancers with multi-value DNS (cdn.yaml's third
// variant), one hour of event time at 1 s steps.
func BenchmarkCDN121M(b *testing.B) { benchVariant(b, "cdn.yaml", 2) }

// BenchmarkCDN121MWeighted is the same with weighted DNS (the first
// variant).
func BenchmarkCDN121MWeighted(b *testing.B) { benchVariant(b, "cdn.yaml", 0) }

// BenchmarkStorm100M is 100 M WebSockets reconnecting with decorrelated
// jitter under adaptive admission (reconnect-storm.yaml), 15 minutes.
func BenchmarkStorm100M(b *testing.B) { benchVariant(b, "reconnect-storm.yaml", 9) }

// BenchmarkStorm100MExponential is the slowest storm variant: synchronised
// retries without jitter that never settle.
func BenchmarkStorm100MExponential(b *testing.B) { benchVariant(b, "reconnect-storm.yaml", 2) }
