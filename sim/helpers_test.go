package sim

import (
	"testing"
	"time"

	"github.com/corralhq/corral/backoff"
	"github.com/corralhq/corral/scenario"
)

// storm is a small reconnect storm: every device is connected, all drop at
// 10 s and reconnect to a contended set of origins.
func storm(policy string, devices int64) *scenario.Scenario {
	sc := &scenario.Scenario{
		Name:     "storm",
		Duration: 5 * time.Minute,
		Population: scenario.Population{
			Devices: devices, Initial: devices,
			Priorities: []scenario.Priority{{Name: "P0", Share: 0.1}, {Name: "P1", Share: 0.3}, {Name: "P2", Share: 0.6}},
		},
		Geography: scenario.Geography{PoPs: 8, HostsPerPoP: 4, HostsPerResolver: 2},
		DNS:       scenario.DNS{Policy: "multivalue", TTL: 60 * time.Second},
		Edge:      scenario.Edge{Pick: "random"},
		Origins: []scenario.Origin{{
			Name: "lb", Count: 4, Headroom: 1.5,
			MaxNewPerSecond: float64(devices) / 4 / 60, // each takes a minute to refill alone
		}},
		Client:  scenario.Client{Backoff: backoff.Config{Policy: policy}},
		Traffic: scenario.Traffic{Disconnects: []scenario.Disconnect{{At: 10 * time.Second, Share: 1}}},
	}
	sc.WithDefaults()
	return sc
}

func mustNew(t testing.TB, sc *scenario.Scenario) *Sim {
	t.Helper()
	s, err := New(sc, "")
	if err != nil {
		t.Fatal(err)
	}
	return s
}
