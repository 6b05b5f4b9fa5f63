package kraken

import (
	"context"
	"io"
	"net"
	"sync"
	"testing"

	"github.com/corralhq/corral/hub"
)

const grpcScenario = `
name: grpc
duration: 20s
population:
  devices: 40
  initial: 40
  protocol: grpc
  tenants: 2
  priorities: [{name: P0, share: 0.5}, {name: P2, share: 0.5}]
dns: {policy: multivalue}
origins: [{name: hub, headroom: 2, max_new_per_second: 1000}]
client:
  backoff: {policy: full, base: 50ms, cap: 500ms}
traffic:
  publish:
    - {at: 0s, for: 1s, priority: P0, per_second: 10}
  disconnects:
    - {at: 2s, share: 0.5}
  kill:
    - {at: 4s, origins: 1}
stop: {on_recovery: true}
`

// breaker is a TCP relay to one address whose connections can all be
// broken at once (a crash of the path: no status, no GOAWAY).
type breaker struct {
	ln net.Listener
	mu sync.Mutex
	cs []net.Conn
}

func newBreaker(t *testing.T, to string) *breaker {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	b := &breaker{ln: ln}
	t.Cleanup(func() { ln.Close(); b.breakAll() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			u, err := net.Dial("tcp", to)
			if err != nil {
				c.Close()
				continue
			}
			b.mu.Lock()
			b.cs = append(b.cs, c, u)
			b.mu.Unlock()
			go func() { _, _ = io.Copy(u, c); u.Close() }()
			go func() { _, _ = io.Copy(c, u); c.Close() }()
		}
	}()
	return b
}

// breakAll closes every connection relayed so far.
func (b *breaker) breakAll() {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, c := range b.cs {
		c.Close()
	}
	b.cs = nil
}

// grpcHub runs a hub with its gRPC listener on (port 0).
func grpcHub(t *testing.T) *testHub {
	t.Helper()
	return startHubWith(t, "hub-g", hub.Options{}, func(c *hub.Config) { c.GRPCListen = "127.0.0.1:0" })
}

// TestGRPCDevicesMatchTheHub: 40 gRPC devices (population.protocol:
// grpc, a grpc:// target) on one hub through a relay, P0 published for a
// second, half of the sessions cut by kraken at 2 s, then every
// connection broken in the relay at 4 s (traffic.kill: the path
// crashes): what kraken counts matches the hub's own metrics (its gRPC
// sessions at the end, its handshakes, the messages it delivered), no
// session went over WebSocket, all 60 ends counted "cut" (no status:
// a transport that broke, as a WebSocket closed without a frame), every
// device back with its resumes recovered, no P0 lost or duplicated.
func TestGRPCDevicesMatchTheHub(t *testing.T) {
	h := grpcHub(t)
	relay := newBreaker(t, h.GRPCAddr().String())
	var sessions, wsSessions, handshakes, delivered float64
	cfg := Config{
		Targets: []string{"grpc://" + relay.ln.Addr().String()}, Token: testToken(testSecret),
		Kill: func(context.Context, KillRequest) (func() error, error) {
			relay.breakAll()
			return nil, nil
		},
		PublishURL: "http://" + h.Addr().String(), APIKey: testAPIKey, Progress: testWriter{t},
		AtEnd: func() {
			sessions = metricWith(t, h.reg, "corral_hub_sessions", "transport", "grpc")
			wsSessions = metricWith(t, h.reg, "corral_hub_sessions", "transport", "ws")
			handshakes = metric(t, h.reg, "corral_hub_handshake_duration_seconds")
			delivered = metric(t, h.reg, "corral_hub_messages_delivered_total")
		},
	}
	res := runScenario(t, loadScenario(t, "grpc.yaml", grpcScenario), cfg)
	if res.Stopped != "on_recovery" || res.Held != 40 || float64(res.Held) != sessions || wsSessions != 0 {
		t.Errorf("stopped by %s; kraken holds %d, the hub %v gRPC sessions and %v WebSocket ones; want on_recovery, 40, 40, 0",
			res.Stopped, res.Held, sessions, wsSessions)
	}
	if got := res.Welcomes["hub-g"].Total(); float64(got) != handshakes || got != 100 {
		t.Errorf("kraken's Welcomes %d, the hub's handshakes %v; want 100 (40, the 20 cut, the 40 broken) both", got, handshakes)
	}
	if got := res.Messages.Received.Total(); float64(got) != delivered || got == 0 {
		t.Errorf("kraken received %d messages, the hub delivered %v", got, delivered)
	}
	drop, broken := res.Storms[0], res.Storms[1]
	if drop.Dropped != 20 || drop.Back != 20 || broken.Dropped != 40 || broken.Back != 40 || res.Disconnects["cut"].Total() != 60 || len(res.Disconnects) != 1 {
		t.Errorf("dropped %d (back %d), broken %d (back %d), disconnects %v; want 20 and 40, all back, 60 cut",
			drop.Dropped, drop.Back, broken.Dropped, broken.Back, res.Disconnects)
	}
	if m := res.Messages; m.P0Expected == 0 || m.P0Lost != 0 || m.P0Duplicated != 0 || res.Resumes.Recovered == 0 || res.Resumes.Gaps != 0 {
		t.Errorf("P0 expected %d lost %d duplicated %d, resumes %+v; want some expected, none lost, recovered, no gap",
			m.P0Expected, m.P0Lost, m.P0Duplicated, res.Resumes)
	}
	if res.Latency.Connect.Count() != res.Attempts {
		t.Errorf("%d connects timed for %d attempts", res.Latency.Connect.Count(), res.Attempts)
	}
}
