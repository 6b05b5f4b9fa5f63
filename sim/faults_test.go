package sim

import (
	"strings"
	"testing"

	"github.com/corralhq/corral/scenario"
)

// TestOriginFaultsRefused: the storm primitives kraken runs and the
// simulator does not model yet (a process killed or frozen, an origin
// unhealthy, a region moved) are refused with their line, never run as if
// the key were not there.
func TestOriginFaultsRefused(t *testing.T) {
	for _, tc := range []struct{ key, storm string }{
		{"traffic.kill", "kill:\n    - {at: 10s, signal: stop}"},
		{"traffic.unhealthy", "unhealthy:\n    - {at: 10s}"},
		{"traffic.move", "move:\n    - {at: 10s, from: east, to: west}"},
	} {
		t.Run(tc.key, func(t *testing.T) {
			src := `name: t
duration: 1m
population: {devices: 100, initial: 100}
dns: {policy: multivalue}
origins: [{name: a, region: east, headroom: 2, max_new_per_second: 100}, {name: b, region: west, headroom: 2, max_new_per_second: 100}]
traffic:
  ` + tc.storm + "\n"
			sc, err := scenario.Decode("t.yaml", []byte(src))
			if err != nil {
				t.Fatal(err)
			}
			_, err = New(sc, "")
			if err == nil || !strings.Contains(err.Error(), "t.yaml:7:") || !strings.Contains(err.Error(), tc.key) {
				t.Fatalf("New = %v, want a refusal naming %s at t.yaml:7", err, tc.key)
			}
		})
	}
}
