package sim

import (
	"strings"
	"testing"
	"time"

	"github.com/corralhq/corral/scenario"
)

// FuzzRun: any scenario the decoder accepts builds a Sim or an error that
// starts with the package name, and its first steps conserve devices.
func FuzzRun(f *testing.F) {
	f.Add([]byte(`
duration: 1m
population: {devices: 100000, initial: 50000, priorities: [{name: a, share: 0.5}, {name: b, share: 0.5}], tenants: 3}
geography: {pops: 3, hosts_per_pop: 4, hosts_per_resolver: 2}
dns: {policy: shuffle, hand_size: 2, spill: 1}
edge: {pick: p2c}
origins: [{count: 5, headroom: 1.1, max_new_per_second: 300, backlog: 100, max_requests_per_second: 10}]
overload: {mode: adaptive}
client: {backoff: {policy: decorrelated}, requests_per_second: 0.5}
traffic:
  arrivals: [{at: 2s, over: 5s, devices: 50000}]
  disconnects: [{at: 4s, share: 0.5}]
  poison: [{at: 6s, tenant: 1}]
`))
	f.Add([]byte(`
duration: 30s
step: 250ms
population: {devices: 7, initial: 3}
dns: {policy: weighted}
origins: [{count: 2, max_connections: 2, max_new_per_second: 0.5, region: r}, {count: 1, max_connections: 9, max_new_per_second: 9, secondary: true}]
client: {backoff: {policy: grpc}}
traffic:
  region_loss: [{at: 1s, region: r, for: 3s}]
  arrivals: [{at: 0s, devices: 4}]
`))
	f.Fuzz(func(t *testing.T, data []byte) {
		sc, err := scenario.Decode("f.yaml", data)
		if err != nil {
			return
		}
		vs, err := sc.Variants()
		if err != nil || len(vs) == 0 {
			return
		}
		v := vs[0].Scenario
		v.Duration = min(v.Duration, 40*v.Step)
		if v.Duration < v.Step || v.Population.Devices > 1e9 || v.Duration > time.Hour {
			return
		}
		s, err := New(v, vs[0].Name)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "sim: ") {
				t.Fatalf("error without the package name: %v", err)
			}
			return
		}
		for !s.Done() {
			s.Step()
			c, err := s.Census()
			if err != nil {
				t.Fatal(err)
			}
			if c.Total() != s.Devices() {
				t.Fatalf("step %d: %d devices, want %d", s.now, c.Total(), s.Devices())
			}
		}
	})
}
