package main

import (
	"encoding/json"
	"strings"
	"testing"
)

const krakenScenario = `name: cli-small
duration: 20s
population: {devices: 20, initial: 20, protocol: websocket}
dns: {policy: multivalue}
origins: [{name: hub, headroom: 2, max_new_per_second: 100}]
client:
  backoff: {policy: full, base: 50ms, cap: 500ms}
traffic:
  disconnects: [{at: 500ms, share: 0.5}]
stop: {on_recovery: true}
`

// TestKrakenRun: corral kraken run holds 20 sessions on a corral hub
// named by the scenario's target, drops half of them and prints a JSON
// result in which all 10 are back.
func TestKrakenRun(t *testing.T) {
	h := startExampleHub(t, "", t.TempDir())
	defer h.stop(t)
	t.Setenv("CORRAL_DEV_SECRET", exampleSecret)
	// The target is the scenario's own (target.urls): no --target.
	sc := krakenScenario + "target: {urls: [\"ws://" + h.addr + "/v1/ws\"]}\n"
	code, out, errOut := corral(t, "kraken", "run", writeScenario(t, sc), "--secret-env", "CORRAL_DEV_SECRET", "--kid", "dev")
	if code != 0 {
		t.Fatalf("kraken run: exit %d, stderr %s", code, errOut)
	}
	var res struct {
		Held    int64  `json:"held"`
		Stopped string `json:"stopped"`
		Storms  []struct {
			Dropped, Back int64
		} `json:"storms"`
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("result is not JSON: %v\n%s", err, out)
	}
	if res.Held != 20 || res.Stopped != "on_recovery" || len(res.Storms) != 1 || res.Storms[0].Dropped != 10 || res.Storms[0].Back != 10 {
		t.Errorf("result %+v, want 20 held, stopped on_recovery, 10 dropped and back", res)
	}
	if !json.Valid([]byte(out)) {
		t.Errorf("stdout is not only the JSON result:\n%s", out)
	}
	if !strings.Contains(errOut, "kraken: end held 20/20") {
		t.Errorf("no end progress line on stderr:\n%s", errOut)
	}
}

// TestKrakenRefusesBeforeStart: a scenario with keys kraken cannot run
// fails with their lines, before any connection.
func TestKrakenRefusesBeforeStart(t *testing.T) {
	p := writeScenario(t, smallScenario)
	t.Setenv("CORRAL_DEV_SECRET", exampleSecret)
	code, _, errOut := corral(t, "kraken", "run", p, "--target", "ws://127.0.0.1:9/v1/ws", "--secret-env", "CORRAL_DEV_SECRET")
	if code == 0 {
		t.Fatal("kraken run accepted a scenario it cannot run")
	}
	for _, want := range []string{"s.yaml:3:1: population.protocol", "s.yaml:16:1: sweep", "s.yaml:4:3: population.devices: 100000 devices at scale 1 need a socket each"} {
		if !strings.Contains(errOut, want) {
			t.Errorf("stderr lacks %q:\n%s", want, errOut)
		}
	}
}
