package scenario_test

import (
	"fmt"

	"github.com/corralhq/corral/scenario"
)

func ExampleDecode() {
	s, err := scenario.Decode("storm.yaml", []byte(`
name: storm
duration: 10m
population: {devices: 1000000, initial: 1000000}
dns: {policy: multivalue}
origins:
  - {name: hub, count: 4, headroom: 1.5, max_new_per_second: 20000}
traffic:
  disconnects: [{at: 30s, share: 1}]
sweep:
  backoff: [exponential, full]
`))
	if err != nil {
		fmt.Println(err)
		return
	}
	vs, _ := s.Variants()
	for _, v := range vs {
		fmt.Println(v.Name, v.Scenario.Client.Backoff.Policy)
	}
	// Output:
	// backoff=exponential exponential
	// backoff=full full
}

func ExampleDecode_outcome() {
	_, err := scenario.Decode("cheat.yaml", []byte(`
name: cheat
duration: 1m
population: {devices: 10}
dns: {policy: weighted}
origins: [{max_connections: 10, max_new_per_second: 1}]
error_rate: 0.01
`))
	fmt.Println(err)
	// Output:
	// scenario: cheat.yaml:7:1: "error_rate" would set an outcome; outcomes come from capacities and policies, never from the scenario
}
