package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/corralhq/corral/internal/browser"
)

// TestMain runs the test binary as corral itself when a test's command
// started it as such (corral kraken run starting its local agents with
// os.Executable), and stops the headless Chromium of TestUp after the
// tests.
func TestMain(m *testing.M) {
	if os.Getenv("CORRAL_TEST_AS_CORRAL") == "1" {
		os.Exit(run(context.Background(), os.Args[1:], os.Stdout, os.Stderr))
	}
	code := m.Run()
	browser.Stop()
	os.Exit(code)
}

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
	report := filepath.Join(t.TempDir(), "report.html")
	code, out, errOut := corral(t, "kraken", "run", writeScenario(t, sc), "--secret-env", "CORRAL_DEV_SECRET", "--kid", "dev", "--report", report)
	if code != 0 {
		t.Fatalf("kraken run: exit %d, stderr %s", code, errOut)
	}
	if page, err := os.ReadFile(report); err != nil || !strings.Contains(string(page), "Devices connected") || !strings.Contains(string(page), "Latency percentiles") {
		t.Errorf("--report wrote no report (%v)", err)
	}
	if strings.Contains(errOut, "\x1b[") {
		t.Errorf("the live table went to a stderr that is not a terminal:\n%q", errOut)
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
	code, _, errOut := corral(t, "kraken", "run", p, "--target", "ws://127.0.0.1:9/v1/ws", "--secret-env", "CORRAL_DEV_SECRET", "--agents", "1")
	if code == 0 {
		t.Fatal("kraken run accepted a scenario it cannot run")
	}
	for _, want := range []string{"s.yaml:3:1: population.protocol", "s.yaml:16:1: sweep", "s.yaml:4:3: population.devices: 100000 devices at scale 1 need a socket each"} {
		if !strings.Contains(errOut, want) {
			t.Errorf("stderr lacks %q:\n%s", want, errOut)
		}
	}
}

// TestKrakenRunSplit: corral kraken run --agents 2 starts two local
// agent processes (corral kraken agent), and its result is theirs merged:
// the 20 sessions held, the 10 dropped back.
func TestKrakenRunSplit(t *testing.T) {
	h := startExampleHub(t, "", t.TempDir())
	defer h.stop(t)
	t.Setenv("CORRAL_DEV_SECRET", exampleSecret)
	t.Setenv("CORRAL_TEST_AS_CORRAL", "1") // the agents this test binary starts run as corral
	code, out, errOut := corral(t, "kraken", "run", writeScenario(t, krakenScenario), "--agents", "2",
		"--target", "ws://"+h.addr+"/v1/ws", "--secret-env", "CORRAL_DEV_SECRET", "--kid", "dev")
	if code != 0 {
		t.Fatalf("kraken run --agents 2: exit %d, stderr %s", code, errOut)
	}
	var res struct {
		Agents  int    `json:"agents"`
		Devices int64  `json:"devices"`
		Held    int64  `json:"held"`
		Stopped string `json:"stopped"`
		Storms  []struct {
			Dropped, Back int64
		} `json:"storms"`
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("result is not JSON: %v\n%s", err, out)
	}
	if res.Agents != 2 || res.Devices != 20 || res.Held != 20 || res.Stopped != "on_recovery" || len(res.Storms) != 1 || res.Storms[0].Dropped != 10 || res.Storms[0].Back != 10 {
		t.Errorf("result %+v, want 2 agents, 20 devices held, stopped on_recovery, 10 dropped and back", res)
	}
	if !strings.Contains(errOut, "over 2 agents (2 started here)") {
		t.Errorf("no line announcing the split on stderr:\n%s", errOut)
	}
}
