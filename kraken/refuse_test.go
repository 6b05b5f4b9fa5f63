package kraken

import (
	"context"
	"net"
	"os/exec"
	"strings"
	"sync/atomic"
	"testing"
)

const refusedScenario = `
name: refused
duration: 10s
population:
  devices: 10
  protocol: grpc
dns: {policy: multivalue}
origins: [{name: hub, region: eu, headroom: 2, max_new_per_second: 100}]
client:
  requests_per_second: 1
traffic:
  region_loss:
    - {at: 1s, region: eu}
  poison:
    - {at: 1s, tenant: 0}
  disconnects:
    - {at: 2s, share: 0.5, region: eu}
  mass_close:
    - {at: 3s}
  publish:
    - {at: 0s, for: 1s, priority: P0, per_second: 1}
sweep:
  backoff: [none, full]
`

// TestBadScenarioRefusedBeforeAnything: every key kraken cannot run (or
// cannot run against this target) is named with its file and line, all at
// once, by New; nothing has started: no token minted, no connection made.
func TestBadScenarioRefusedBeforeAnything(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var accepted atomic.Int64
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			c.Close()
		}
	}()
	var minted atomic.Int64
	cfg := Config{
		Targets: []string{"ws://" + ln.Addr().String() + "/v1/ws"},
		Token:   func(string, int) (string, error) { minted.Add(1); return "x", nil },
	}
	_, err = New(loadScenario(t, "refused.yaml", refusedScenario), cfg)
	if err == nil {
		t.Fatal("New accepted a scenario kraken cannot run")
	}
	msg := err.Error()
	for _, want := range []string{
		"refused.yaml:5:3: population.protocol: target \"ws://" + ln.Addr().String() + "/v1/ws\" takes websocket devices, and population.protocol is grpc",
		"refused.yaml:9:3: client.requests_per_second:",
		"refused.yaml:11:3: traffic.region_loss:",
		"refused.yaml:14:7: traffic.poison[0]: the target has no way to kill the origins",
		"refused.yaml:16:28: traffic.disconnects[0].region:",
		"refused.yaml:17:3: traffic.mass_close: the target has no way",
		"refused.yaml:19:3: traffic.publish: no publish URL",
		"refused.yaml:21:1: sweep:",
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("error lacks %q:\n%s", want, msg)
		}
	}
	if !strings.HasPrefix(msg, "kraken: ") {
		t.Errorf("error does not start with the package name: %q", msg)
	}
	if minted.Load() != 0 || accepted.Load() != 0 {
		t.Errorf("New minted %d tokens and made %d connections; want none", minted.Load(), accepted.Load())
	}
}

// TestScenarioTargetRefusedWithItsLine: a target of the scenario file
// kraken cannot drive (a gRPC one for WebSocket devices) is named with
// its line; --target overrides the file's.
func TestScenarioTargetRefusedWithItsLine(t *testing.T) {
	sc := loadScenario(t, "target.yaml", `
name: target
duration: 1s
population: {devices: 1, protocol: websocket}
dns: {policy: multivalue}
origins: [{name: hub, headroom: 2, max_new_per_second: 100}]
target:
  urls:
    - ws://127.0.0.1:1/v1/ws
    - grpcs://127.0.0.1:2
`)
	_, err := New(sc, Config{Token: testToken(testSecret)})
	if err == nil || !strings.Contains(err.Error(), "target.yaml:9:7: target.urls[1]: target \"grpcs://127.0.0.1:2\" takes grpc devices, and population.protocol is websocket") {
		t.Errorf("New = %v, want the grpcs URL refused with its line", err)
	}
	k, err := New(sc, Config{Token: testToken(testSecret), Targets: []string{"ws://127.0.0.1:3/v1/ws"}})
	if err != nil {
		t.Fatalf("--target did not override the file's target: %v", err)
	}
	if got := k.cfg.Targets; len(got) != 1 || got[0] != "ws://127.0.0.1:3/v1/ws" {
		t.Errorf("targets %v, want the one given", got)
	}
}

// TestConfigRefused: a bad target, no token source, a bad publish URL or
// source range are refused by New.
func TestConfigRefused(t *testing.T) {
	sc := loadScenario(t, "ok.yaml", `
name: ok
duration: 1s
population: {devices: 1, protocol: websocket}
dns: {policy: multivalue}
origins: [{name: hub, headroom: 2, max_new_per_second: 100}]
`)
	tok := testToken(testSecret)
	for _, tc := range []struct {
		name string
		cfg  Config
		want string
	}{
		{"no target", Config{Token: tok}, "no target"},
		{"scheme", Config{Targets: []string{"http://127.0.0.1:1"}, Token: tok}, "want ws://host:port[/path] (wss:// for TLS) or grpc://host:port (grpcs://)"},
		{"no port", Config{Targets: []string{"ws://127.0.0.1"}, Token: tok}, "want ws://host:port"},
		{"no token", Config{Targets: []string{"ws://127.0.0.1:1"}}, "no token source"},
		{"publish URL", Config{Targets: []string{"ws://127.0.0.1:1"}, Token: tok, PublishURL: "ftp://x"}, "publish URL"},
		{"resolver", Config{Targets: []string{"ws://127.0.0.1:1"}, Token: tok, Resolver: "localhost"}, "want ip:port"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := New(sc, tc.cfg); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("New = %v, want an error with %q", err, tc.want)
			}
		})
	}
}

// TestPoisonRefusedInASplitRun: a poison tenant's kills follow its
// sessions' Welcomes, which one process sees: NewCoordinator refuses it
// with its line, New runs it with Config.Kill.
func TestPoisonRefusedInASplitRun(t *testing.T) {
	sc := loadScenario(t, "poison.yaml", `
name: poison
duration: 1s
population: {devices: 4, protocol: websocket, tenants: 2}
dns: {policy: multivalue}
origins: [{name: hub, headroom: 2, max_new_per_second: 100}]
traffic:
  poison:
    - {at: 0s, tenant: 1}
`)
	cfg := Config{Targets: []string{"ws://127.0.0.1:1/v1/ws"}, Token: testToken(testSecret),
		Kill: func(context.Context, KillRequest) (func() error, error) { return nil, nil }}
	_, err := NewCoordinator(sc, cfg, Split{Agents: 2, Command: func(string, string) *exec.Cmd { return nil }})
	if err == nil || !strings.Contains(err.Error(), "poison.yaml:7:3: traffic.poison: a poison tenant runs in one process only") {
		t.Errorf("NewCoordinator = %v, want the poison refused with its line", err)
	}
	if _, err := New(sc, cfg); err != nil {
		t.Errorf("New refused a poison with Config.Kill: %v", err)
	}
}

// TestProtocolAndTargetMustAgree: gRPC devices take grpc:// targets and
// WebSocket devices ws:// ones. A target of the file that does not fit
// the population's protocol is refused on its own line, one given to
// the run (Config.Targets, --target) on the protocol's line.
func TestProtocolAndTargetMustAgree(t *testing.T) {
	sc := loadScenario(t, "mix.yaml", `
name: mix
duration: 1s
population:
  devices: 1
  protocol: grpc
dns: {policy: multivalue}
origins: [{name: hub, headroom: 2, max_new_per_second: 100}]
target:
  urls:
    - grpc://127.0.0.1:1
    - ws://127.0.0.1:2/v1/ws
`)
	tok := testToken(testSecret)
	for _, tc := range []struct {
		name    string
		targets []string
		want    string
	}{
		{"a ws URL of the file", nil, `mix.yaml:11:7: target.urls[1]: target "ws://127.0.0.1:2/v1/ws" takes websocket devices, and population.protocol is grpc: give grpc:// or grpcs:// targets, or set protocol: websocket`},
		{"a ws URL given", []string{"ws://127.0.0.1:3"}, `mix.yaml:5:3: population.protocol: target "ws://127.0.0.1:3" takes websocket devices`},
		{"a gRPC URL with a path", []string{"grpc://127.0.0.1:3/v1/ws"}, `kraken: target "grpc://127.0.0.1:3/v1/ws": a gRPC target has no path`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := New(sc, Config{Targets: tc.targets, Token: tok}); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("New = %v, want an error with %q", err, tc.want)
			}
		})
	}
	if _, err := New(sc, Config{Targets: []string{"grpc://127.0.0.1:3"}, Token: tok}); err != nil {
		t.Errorf("a grpc:// target for gRPC devices refused: %v", err)
	}
}
