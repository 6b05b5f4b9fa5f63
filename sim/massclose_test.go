package sim

import (
	"strings"
	"testing"

	"github.com/corralhq/corral/scenario"
)

// TestMassCloseRefused: the simulator does not model a server-side mass
// close yet, so a file holding one is refused with its line, never run
// as if the key were not there.
func TestMassCloseRefused(t *testing.T) {
	src := `name: t
duration: 1m
population: {devices: 100, initial: 100}
dns: {policy: multivalue}
origins: [{name: hub, count: 2, headroom: 2, max_new_per_second: 100}]
traffic:
  mass_close:
    - {at: 10s}
`
	sc, err := scenario.Decode("t.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	_, err = New(sc, "")
	if err == nil || !strings.Contains(err.Error(), "t.yaml:7:") || !strings.Contains(err.Error(), "traffic.mass_close") {
		t.Fatalf("New = %v, want a refusal naming traffic.mass_close at t.yaml:7", err)
	}
}
