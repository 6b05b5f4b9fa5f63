package sim_test

import (
	"fmt"
	"time"

	"github.com/corralhq/corral/backoff"
	"github.com/corralhq/corral/scenario"
	"github.com/corralhq/corral/sim"
)

// A million connected devices lose their connection at 10 s and reconnect
// with full jitter to four hubs that each complete 5,000 handshakes a
// second and refuse past a 2 s backlog.
func Example() {
	sc := &scenario.Scenario{
		Name:       "storm",
		Duration:   5 * time.Minute,
		Population: scenario.Population{Devices: 1_000_000, Initial: 1_000_000},
		DNS:        scenario.DNS{Policy: "multivalue"},
		Edge:       scenario.Edge{Pick: "random"},
		Origins:    []scenario.Origin{{Name: "hub", Count: 4, Headroom: 1.5, MaxNewPerSecond: 5_000, Backlog: 10_000}},
		Client:     scenario.Client{Backoff: backoff.Config{Policy: "full"}},
		Traffic:    scenario.Traffic{Disconnects: []scenario.Disconnect{{At: 10 * time.Second, Share: 1}}},
	}
	s, err := sim.New(sc, "")
	if err != nil {
		fmt.Println(err)
		return
	}
	r := s.Run(nil)
	fmt.Println("connected at the end:", r.Summary.FinalConnected)
	fmt.Println("settled within 60 s of the drop:", r.Summary.TimeToSettle <= 60)
	fmt.Println("every failure was a refusal at the backlog:", r.Summary.Errors["backlog"] > 0 && r.Summary.Errors["timeout"] == 0)
	// Output:
	// connected at the end: 1000000
	// settled within 60 s of the drop: true
	// every failure was a refusal at the backlog: true
}
