package kraken

import (
	"encoding/json"
	"testing"

	"github.com/corralhq/corral/hub"
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

func TestSmoke(t *testing.T) {
	h := startHub(t, hub.Options{})
	sc := loadScenario(t, "smoke.yaml", smokeScenario)
	res := runScenario(t, sc, Config{Targets: []string{h.url()}, Token: testToken(testSecret), PublishURL: "http://" + h.Addr().String(), APIKey: testAPIKey, Progress: testWriter{t}})
	b, _ := json.MarshalIndent(res, "", " ")
	t.Logf("%s", b)
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) { w.t.Logf("%s", p); return len(p), nil }
