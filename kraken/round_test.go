package kraken

import (
	"net"
	"testing"

	"github.com/corralhq/corral/hub"
)

const roundScenario = `
name: round
duration: 3s
population: {devices: 40, initial: 40, protocol: websocket}
dns: {policy: multivalue}
origins: [{name: hub, headroom: 2, max_new_per_second: 1000}]
client:
  backoff: {policy: equal, base: 30s, cap: 30s}
`

// TestRoundGoesOnAtOnce: two targets, one of them a port that refuses
// every connect, and a backoff whose first delay is 15 s or more. A
// device takes its attempts in the client SDK's rounds (backoff.Round,
// backoff.TryNext): a refused connect goes on to the round's other target
// at once, so all 40 devices are held within the run's 3 s, and the
// random order of the rounds sends some first attempts to the refusing
// port. A device that picked one target per attempt would leave about
// half of them waiting out the backoff.
func TestRoundGoesOnAtOnce(t *testing.T) {
	h := startHub(t, hub.Options{})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := "ws://" + ln.Addr().String() + "/v1/ws"
	ln.Close() // nothing listens there now: connects are refused
	sc := loadScenario(t, "round.yaml", roundScenario)
	res := runScenario(t, sc, Config{Targets: []string{dead, h.url()}, Token: testToken(testSecret)})
	var failed int64
	for _, c := range res.Failures {
		failed += c.Total()
	}
	t.Logf("held %d, attempts %d, failures %v", res.Held, res.Attempts, res.Failures)
	if res.Held != 40 {
		t.Errorf("held %d of 40 at the end; want every device, each refused connect followed at once by the other target", res.Held)
	}
	if failed == 0 || failed >= 40 {
		t.Errorf("%d failed attempts; want some first attempts to the refusing port and fewer than 40 (rounds in a random order)", failed)
	}
	if res.Attempts != 40+failed {
		t.Errorf("%d attempts for 40 devices and %d failures; want one success per device after its failures", res.Attempts, failed)
	}
}
