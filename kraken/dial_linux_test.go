package kraken

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/corralhq/corral/hub"
)

// synDropper returns the address of a TCP port that drops every SYN: a
// listen socket with a backlog of 0 (a queue of one connection), that
// connection made, and nothing ever accepted. A connect to it waits out
// TCP's SYN retransmissions (1 s, 3 s, 7 s ...) until its timeout, as
// one whose SYN the full listen queue of a hub in a herd dropped.
func synDropper(t *testing.T) string {
	t.Helper()
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = unix.Close(fd) })
	if err := unix.Bind(fd, &unix.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatal(err)
	}
	if err := unix.Listen(fd, 0); err != nil {
		t.Fatal(err)
	}
	sa, err := unix.Getsockname(fd)
	if err != nil {
		t.Fatal(err)
	}
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(sa.(*unix.SockaddrInet4).Port))
	// Fill the queue, then see a connect go unanswered (a set-up check:
	// half a second against TCP's first retransmission at 1 s).
	for range 4 {
		c, err := net.DialTimeout("tcp", addr, 500*time.Millisecond)
		if err == nil {
			t.Cleanup(func() { c.Close() })
			continue
		}
		if ne, ok := errors.AsType[net.Error](err); ok && ne.Timeout() {
			return addr
		}
		t.Fatalf("a connect to the full listen queue failed with %v, want it unanswered (net.ipv4.tcp_abort_on_overflow is %s)", err, sysctl("net/ipv4/tcp_abort_on_overflow"))
	}
	t.Fatalf("4 connects to a listener of backlog 0 that accepts nothing went through, want the queue full after 1")
	return ""
}

func sysctl(name string) string {
	b, err := os.ReadFile("/proc/sys/" + name)
	if err != nil {
		return "unknown"
	}
	return strings.TrimSpace(string(b))
}

const independentScenario = `
name: independent-dials
duration: 5s
population: {devices: 200, initial: 0, protocol: PROTOCOL}
dns: {policy: multivalue}
origins: [{name: a, region: blocked, headroom: 2, max_new_per_second: 1000}, {name: b, region: open, headroom: 2, max_new_per_second: 1000}]
client:
  backoff: {policy: full, base: 50ms, cap: 300ms}
  connect_timeout: 60s
traffic:
  arrivals: [{at: 0s, devices: 200}]
`

// TestBlockedConnectsHoldUpNoOtherDevice: 200 devices arrive at once,
// half of them (region "blocked") on a port that drops every SYN, the
// others ("open") on a hub; over WebSocket, wss and gRPC. A device's
// connect that waits out SYN retransmissions delays that device only, as
// on a real fleet: every open device is held within the run's 5 s (the
// blocked ones' connects wait up to their 60 s connect timeout: a stall
// of kraken's dials, as a pool of dialer goroutines all blocked on
// dropped SYNs made, holds the open devices past the run). Counts, not
// times: all 100 open devices held, welcomed once each, one attempt per
// device (no connect failed or timed out: the blocked ones are still in
// flight at the end), 100 connects made. The end of the run does not
// wait for the connects in flight either: the run returns well within
// its context's 50 s.
func TestBlockedConnectsHoldUpNoOtherDevice(t *testing.T) {
	certFile, keyFile := writeCert(t, t.TempDir())
	for _, tc := range []struct {
		name, protocol, scheme, path string
		tls                          bool
	}{
		{"ws", "websocket", "ws", "/v1/ws", false},
		{"wss", "websocket", "wss", "/v1/ws", true},
		{"grpc", "grpc", "grpc", "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := startHubWith(t, "hub-open", hub.Options{}, func(c *hub.Config) {
				c.GRPCListen = "127.0.0.1:0"
				if tc.tls {
					c.TLS = hub.TLSConfig{CertFile: certFile, KeyFile: keyFile}
				}
			})
			open := h.Addr().String()
			if tc.protocol == "grpc" {
				open = h.GRPCAddr().String()
			}
			var atEnd int
			cfg := Config{
				Regions: map[string][]string{
					"blocked": {tc.scheme + "://" + synDropper(t) + tc.path},
					"open":    {tc.scheme + "://" + open + tc.path},
				},
				Token: testToken(testSecret), Progress: testWriter{t},
				AtEnd: func() { atEnd = h.Sessions() },
			}
			if tc.tls {
				cfg.CAFile = certFile
			}
			k, err := New(loadScenario(t, "independent.yaml", strings.Replace(independentScenario, "PROTOCOL", tc.protocol, 1)), cfg)
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 50*time.Second)
			defer cancel()
			res, err := k.Run(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if ctx.Err() != nil {
				t.Errorf("the run returned after its context ended (%v): its end waited for the connects in flight", ctx.Err())
			}
			if res.Held != 100 || atEnd != 100 || res.Welcomes["hub-open"].Total() != 100 {
				t.Errorf("held %d (the hub %d), welcomes %v; want the 100 open devices held, each welcomed once", res.Held, atEnd, res.Welcomes)
			}
			if res.Attempts != 200 || len(res.Failures) != 0 || res.Latency.Connect.Count() != 100 {
				t.Errorf("%d attempts, failures %v, %d connects made; want 200, none, 100 (the blocked ones in flight)",
					res.Attempts, res.Failures, res.Latency.Connect.Count())
			}
		})
	}
}

const timeoutScenario = `
name: timed-out-connects
duration: 4s
population: {devices: 100, initial: 0, protocol: websocket}
dns: {policy: multivalue}
origins: [{name: a, headroom: 2, max_new_per_second: 1000}]
client:
  backoff: {policy: full, base: 50ms, cap: 100ms}
  connect_timeout: 1s
traffic:
  arrivals: [{at: 0s, devices: 100}]
`

// TestTimedOutConnectsCloseTheirSockets: 100 devices on a port that
// drops every SYN, a connect timeout of 1 s: each device tries again
// and again (some 3 times in the run's 4 s), and each attempt that
// timed out has closed its socket: at the end of the run no more
// sockets are connecting to the port (SYN_SENT in /proc/net/tcp) than
// devices, against one per attempt if they were left open.
func TestTimedOutConnectsCloseTheirSockets(t *testing.T) {
	addr := synDropper(t)
	_, port, _ := net.SplitHostPort(addr)
	connecting := -1
	cfg := Config{
		Targets: []string{"ws://" + addr + "/v1/ws"}, Token: testToken(testSecret), Progress: testWriter{t},
		AtEnd: func() { connecting = synSent(t, port) },
	}
	res := runScenario(t, loadScenario(t, "timeouts.yaml", timeoutScenario), cfg)
	var failed int64
	for _, c := range res.Failures {
		failed += c.Total()
	}
	if res.Attempts < 250 || failed < res.Attempts-100 {
		t.Fatalf("%d attempts, failures %v; want some 3 per device, each but the last failed", res.Attempts, res.Failures)
	}
	if connecting < 0 || connecting > 100 {
		t.Errorf("%d sockets connecting to the port at the end of %d attempts; want at most the 100 devices' last ones", connecting, res.Attempts)
	}
	if n := synSent(t, port); n != 0 {
		t.Errorf("%d sockets still connecting to the port after the run, want none", n)
	}
}

// synSent counts this network namespace's TCP sockets in SYN_SENT to
// port (decimal) on 127.0.0.1.
func synSent(t *testing.T, port string) int {
	t.Helper()
	b, err := os.ReadFile("/proc/net/tcp")
	if err != nil {
		t.Fatal(err)
	}
	p, _ := strconv.Atoi(port)
	want := fmt.Sprintf("0100007F:%04X", p)
	n := 0
	for _, l := range strings.Split(string(b), "\n")[1:] {
		f := strings.Fields(l)
		if len(f) > 3 && f[2] == want && f[3] == "02" {
			n++
		}
	}
	return n
}
