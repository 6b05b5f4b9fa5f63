package kraken

import (
	"encoding/json"
	"testing"

	"github.com/corralhq/corral/hub"
	"github.com/corralhq/corral/scenario"
)

const smokeScenario = `
name: smoke
duration: 6s
population:
  devices: 50
  initial: 50
  protocol: websocket
  tenants: 2
  priorities: [{name: P0, share: 0.4}, {name: P2, share: 0.6}]
dns: {policy: multivalue}
origins: [{name: hub, headroom: 2, max_new_per_second: 1000}]
client:
  backoff: {policy: full, base: 50ms, cap: 500ms}
traffic:
  publish:
    - {at: 0s, for: 1s, priority: P0, per_second: 10}
  disconnects:
    - {at: 1500ms, share: 0.5}
stop: {on_recovery: true}
`

// TestSmoke: 50 devices on one hub, P0 published for a second, half of
// them dropped at 1.5 s: every one held at the end, the 25 dropped all
// back, every P0 message delivered. The whole result is logged.
func TestSmoke(t *testing.T) {
	h := startHub(t, hub.Options{})
	sc := loadScenario(t, "smoke.yaml", smokeScenario)
	res := runScenario(t, sc, Config{Targets: []string{h.url()}, Token: testToken(testSecret), PublishURL: "http://" + h.Addr().String(), APIKey: testAPIKey, Progress: testWriter{t}})
	b, _ := json.MarshalIndent(res, "", " ")
	t.Logf("%s", b)
	s := res.Storms[0]
	if res.Held != 50 || s.Dropped != 25 || s.Back != 25 || res.Messages.P0Expected == 0 || res.Messages.P0Lost != 0 {
		t.Errorf("held %d, dropped %d, back %d, P0 expected %d lost %d; want 50, 25, 25, some, 0",
			res.Held, s.Dropped, s.Back, res.Messages.P0Expected, res.Messages.P0Lost)
	}
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) { w.t.Logf("%s", p); return len(p), nil }

// TestShippedScenarioRuns: scenarios/kraken-drop.yaml, the shipped file
// both tools run, runs at its own scale against one hub: every dropped
// device back, no P0 lost.
func TestShippedScenarioRuns(t *testing.T) {
	if testing.Short() {
		t.Skip("a run of the shipped file against a hub")
	}
	sc, err := scenario.Load("../scenarios/kraken-drop.yaml")
	if err != nil {
		t.Fatal(err)
	}
	h := startHub(t, hub.Options{})
	res := runScenario(t, sc, Config{Targets: []string{h.url()}, Token: testToken(testSecret), PublishURL: "http://" + h.Addr().String(), APIKey: testAPIKey})
	s := res.Storms[0]
	if res.Devices != 200 || s.Dropped != 66 || s.Back != 66 || res.Stopped != "on_recovery" || res.Messages.P0Lost != 0 || res.Messages.P0Expected == 0 {
		t.Errorf("devices %d, dropped %d, back %d, stopped by %s, P0 expected %d lost %d; want 200, 66, 66, on_recovery, some, 0",
			res.Devices, s.Dropped, s.Back, res.Stopped, res.Messages.P0Expected, res.Messages.P0Lost)
	}
}
