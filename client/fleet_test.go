package client_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/corralhq/corral/client"
	"github.com/corralhq/corral/hub"
	"github.com/corralhq/corral/hub/auth"
	"github.com/corralhq/corral/internal/testkit"
	"github.com/corralhq/corral/wire"
)

const testSecret = "client-test-secret-0123456789"

// startHub runs a hub whose WebSocket listener is on listen; mod adjusts
// its config first.
func startHub(t *testing.T, listen string, mod func(*hub.Config)) *hub.Hub {
	t.Helper()
	return startHubWith(t, listen, mod, hub.Options{})
}

// startHubWith is startHub with options (an overload policy).
func startHubWith(t *testing.T, listen string, mod func(*hub.Config), opts hub.Options) *hub.Hub {
	t.Helper()
	cfg := hub.DefaultConfig()
	cfg.Listen, cfg.GRPCListen, cfg.Admin.Addr = listen, "127.0.0.1:0", ""
	cfg.Auth = auth.Config{Keys: []auth.KeyConfig{{Algorithm: "HS256", Secret: testSecret}}}
	cfg.History.Store = "memory"
	cfg.Session.PublishRate, cfg.Session.PublishBurst = 10000, 10000
	if mod != nil {
		mod(&cfg)
	}
	h, err := hub.New(cfg, opts)
	if err != nil {
		t.Fatal(err)
	}
	errc := make(chan error, 1)
	go func() { errc <- h.Run(context.Background()) }()
	<-h.Started()
	if err := h.Ready(); err != nil {
		t.Fatalf("hub on %s: %v (%v)", listen, err, <-errc)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = h.Shutdown(ctx)
	})
	return h
}

func newToken(t *testing.T, channels []string, exp time.Time) string {
	t.Helper()
	s, err := jwt.NewWithClaims(jwt.SigningMethodHS256, auth.Claims{
		Tenant: "acme", Channels: channels, Publish: []string{">"},
		RegisteredClaims: jwt.RegisteredClaims{ExpiresAt: jwt.NewNumericDate(exp)},
	}).SignedString([]byte(testSecret))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestSpreadOverEveryAddressOfAName: three hubs on 127.0.0.1, .2 and .3
// (one port) behind the name hubs.corral.test; 3,000 clients dialing the
// name land within 10 % of 1,000 on each, and each resolves the name for
// its attempt.
func TestSpreadOverEveryAddressOfAName(t *testing.T) {
	var port string
	for try := 0; ; try++ {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		_, port, _ = net.SplitHostPort(ln.Addr().String())
		ok := true
		for _, ip := range []string{"127.0.0.2", "127.0.0.3"} {
			l2, err := net.Listen("tcp", ip+":"+port)
			if err != nil {
				ok = false
				break
			}
			l2.Close()
		}
		ln.Close()
		if ok || try == 20 {
			break
		}
	}
	ips := []netip.Addr{netip.MustParseAddr("127.0.0.1"), netip.MustParseAddr("127.0.0.2"), netip.MustParseAddr("127.0.0.3")}
	for _, ip := range ips {
		startHub(t, ip.String()+":"+port, nil)
	}
	var lookups atomic.Int64
	cfg := client.Config{
		Addrs: []string{"ws://hubs.corral.test:" + port},
		Token: newToken(t, []string{">"}, time.Now().Add(time.Hour)),
		Resolve: func(_ context.Context, host string) ([]netip.Addr, error) {
			if host != "hubs.corral.test" {
				return nil, fmt.Errorf("unknown host %s", host)
			}
			lookups.Add(1)
			return ips, nil
		},
	}
	const clients, workers = 3000, 16
	var mu sync.Mutex
	landed := map[string]int{}
	var wg sync.WaitGroup
	var failed atomic.Value
	var retried atomic.Int64
	next := make(chan struct{}, clients)
	for range clients {
		next <- struct{}{}
	}
	close(next)
	for range workers {
		wg.Go(func() {
			for range next {
				var c *client.Client
				var err error
				// A dial is one round over the three addresses; on this
				// loaded machine a round can fail (the test retries it,
				// as an application would, and counts it).
				for try := 0; try < 3; try++ {
					ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
					c, err = client.Dial(ctx, cfg)
					cancel()
					if err == nil {
						break
					}
					retried.Add(1)
				}
				if err != nil {
					failed.Store(err)
					return
				}
				host, _, _ := strings.Cut(strings.TrimPrefix(c.Addr(), "ws://"), ":")
				_ = c.Close()
				mu.Lock()
				landed[host]++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if err := failed.Load(); err != nil {
		t.Fatalf("dial: %v", err)
	}
	t.Logf("landed: %v; %d dials retried", landed, retried.Load())
	for _, ip := range ips {
		if n := landed[ip.String()]; n < 900 || n > 1100 {
			t.Errorf("%d of %d clients on %s, want 1,000 +- 10 %% (all: %v)", n, clients, ip, landed)
		}
	}
	if n := lookups.Load(); n != clients+retried.Load() {
		t.Errorf("%d lookups for %d dials, want one per dial", n, clients+retried.Load())
	}
}

// proxy forwards TCP connections to a hub; a test cuts them or refuses
// new ones, and counts them.
type proxy struct {
	ln      net.Listener
	to      string
	accepts atomic.Int64
	refuse  atomic.Bool
	// answer, when set, is the HTTP response the proxy gives every new
	// connection after reading its request (a refused upgrade).
	answer atomic.Pointer[string]
	mu     sync.Mutex
	conns  []net.Conn
}

func startProxy(t *testing.T, to string) *proxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{ln: ln, to: to}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			p.accepts.Add(1)
			if p.refuse.Load() {
				c.Close()
				continue
			}
			if a := p.answer.Load(); a != nil {
				go func() {
					defer c.Close()
					if _, err := http.ReadRequest(bufio.NewReader(c)); err == nil {
						_, _ = io.WriteString(c, *a)
					}
				}()
				continue
			}
			up, err := net.Dial("tcp", to)
			if err != nil {
				c.Close()
				continue
			}
			p.mu.Lock()
			p.conns = append(p.conns, c, up)
			p.mu.Unlock()
			go func() { _, _ = io.Copy(up, c); up.Close() }()
			go func() { _, _ = io.Copy(c, up); c.Close() }()
		}
	}()
	t.Cleanup(func() { ln.Close(); p.cut() })
	return p
}

// cut closes every connection without a word (a TCP cut).
func (p *proxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
}

func (p *proxy) url() string { return "ws://" + p.ln.Addr().String() }

// next returns the next event of kind, failing if the client stops.
func next(t *testing.T, c *client.Client, kind client.EventKind, seen func(client.Event)) client.Event {
	t.Helper()
	timeout := time.After(20 * time.Second)
	for {
		select {
		case e, ok := <-c.Events():
			if !ok {
				t.Fatalf("the client stopped (%v) while waiting for %v", c.Err(), kind)
			}
			if seen != nil {
				seen(e)
			}
			if e.Kind == kind {
				return e
			}
		case <-timeout:
			t.Fatalf("no %v event", kind)
		}
	}
}

// TestRevokedTokenStopsAfterOneAttempt: a session whose token then
// expires is cut; the reconnect is refused with 1008 and the client stops
// after that one attempt with ErrUnauthorized.
func TestRevokedTokenStopsAfterOneAttempt(t *testing.T) {
	h := startHub(t, "127.0.0.1:0", nil)
	p := startProxy(t, h.Addr().String())
	exp := time.Now().Add(2 * time.Second).Truncate(time.Second)
	c, err := client.Dial(context.Background(), client.Config{Addrs: []string{p.url()}, Token: newToken(t, []string{">"}, exp), ReconnectMin: time.Millisecond, ReconnectMax: 5 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	next(t, c, client.EventConnected, nil) // the session Dial opened
	testkit.WaitFor(t, 10*time.Second, "the token to expire", func() bool { return time.Now().After(exp.Add(time.Second)) })
	p.cut()
	var disconnects []client.Event
	timeout := time.After(20 * time.Second)
	for stopped := false; !stopped; {
		select {
		case e, ok := <-c.Events():
			stopped = !ok
			if e.Kind == client.EventDisconnected {
				disconnects = append(disconnects, e)
			}
			if e.Kind == client.EventConnected {
				t.Fatalf("reconnected with an expired token: %v", e)
			}
		case <-timeout:
			t.Fatalf("the client did not stop after 1008 (%d connections, %d disconnects)", p.accepts.Load(), len(disconnects))
		}
	}
	if err := c.Err(); !errors.Is(err, client.ErrUnauthorized) {
		t.Fatalf("Err() = %v, want ErrUnauthorized", err)
	}
	var te *client.TerminalError
	if !errors.As(c.Err(), &te) || te.Close.Code != wire.ClosePolicyViolation {
		t.Fatalf("Err() = %v, want a TerminalError with 1008", c.Err())
	}
	if n := p.accepts.Load(); n != 2 {
		t.Fatalf("%d connections, want 2: the session and one attempt", n)
	}
	last := disconnects[len(disconnects)-1]
	if !last.RetryAt.IsZero() || last.Close.Code != wire.ClosePolicyViolation {
		t.Fatalf("last disconnect %v: want 1008 and no next attempt", last)
	}
	if !disconnects[0].RetryAt.After(time.Time{}) {
		t.Fatalf("the cut %v has no next attempt time", disconnects[0])
	}
	if _, err := client.Dial(context.Background(), client.Config{Addrs: []string{p.url()}, Token: newToken(t, []string{">"}, exp)}); !errors.Is(err, client.ErrUnauthorized) {
		t.Fatalf("Dial with the expired token: %v, want ErrUnauthorized", err)
	}
}

// TestCutAfterNonFatalErrorReconnects: a refused subscription (4005, an
// answer, not a close) and then a TCP cut: the client reconnects.
func TestCutAfterNonFatalErrorReconnects(t *testing.T) {
	h := startHub(t, "127.0.0.1:0", nil)
	p := startProxy(t, h.Addr().String())
	ctx := context.Background()
	_, port, _ := net.SplitHostPort(p.ln.Addr().String())
	var lookups atomic.Int64
	resolve := func(context.Context, string) ([]netip.Addr, error) {
		lookups.Add(1)
		return []netip.Addr{netip.MustParseAddr("127.0.0.1")}, nil
	}
	c, err := client.Dial(ctx, client.Config{
		Addrs: []string{"ws://hub.corral.test:" + port}, Resolve: resolve,
		Token: newToken(t, []string{"news.>"}, time.Now().Add(time.Hour)), ReconnectMin: time.Millisecond, ReconnectMax: 5 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Subscribe(ctx, "billing"); !errors.Is(err, client.ErrForbidden) && !isCode(err, wire.CloseForbidden) {
		t.Fatalf("subscribe to a channel the token does not allow: %v, want 4005", err)
	}
	next(t, c, client.EventConnected, nil)
	p.cut()
	d := next(t, c, client.EventDisconnected, nil)
	if d.RetryAt.IsZero() {
		t.Fatalf("a TCP cut after a refused subscription: %v, want a next attempt", d)
	}
	next(t, c, client.EventConnected, nil)
	if _, err := c.Subscribe(ctx, "news.eu"); err != nil {
		t.Fatalf("after the reconnect: %v", err)
	}
	if n := lookups.Load(); n != 2 {
		t.Fatalf("%d lookups of the name, want 2: the dial and the reconnect", n)
	}
}

// TestTriesAnotherAddressWhenOneFails: one address refuses connections,
// the other serves; every Dial succeeds, on the serving one, whichever
// the random order tried first.
func TestTriesAnotherAddressWhenOneFails(t *testing.T) {
	h := startHub(t, "127.0.0.1:0", nil)
	// The down address accepts and closes at once: it counts the tries.
	dead, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer dead.Close()
	var tries atomic.Int64
	go func() {
		for {
			c, err := dead.Accept()
			if err != nil {
				return
			}
			tries.Add(1)
			c.Close()
		}
	}()
	cfg := client.Config{Addrs: []string{"ws://" + dead.Addr().String(), "ws://" + h.Addr().String()}, Token: newToken(t, []string{">"}, time.Now().Add(time.Hour))}
	for range 40 {
		c, err := client.Dial(context.Background(), cfg)
		if err != nil {
			t.Fatalf("dial with one address down: %v", err)
		}
		if !strings.Contains(c.Addr(), h.Addr().String()) {
			t.Fatalf("session on %s", c.Addr())
		}
		_ = c.Close()
	}
	triedDead := int(tries.Load())
	if triedDead == 0 || triedDead == 40 {
		t.Fatalf("the down address was tried first %d times of 40: the order is not random", triedDead)
	}
}

func isCode(err error, code wire.CloseCode) bool {
	var cl wire.Close
	return errors.As(err, &cl) && cl.Code == code
}

// TestGapSurfacesOncePerChannel: a client away while more messages were
// published than the hub keeps resumes across the gap: one EventGap per
// channel naming the lost offsets, then later reconnects add none.
func TestGapSurfacesOncePerChannel(t *testing.T) {
	h := startHub(t, "127.0.0.1:0", func(c *hub.Config) { c.History.MaxMessages = 2 })
	p := startProxy(t, h.Addr().String())
	ctx := context.Background()
	tok := newToken(t, []string{">"}, time.Now().Add(time.Hour))
	c, err := client.Dial(ctx, client.Config{Addrs: []string{p.url()}, Token: tok, ReconnectMin: time.Millisecond, ReconnectMax: 5 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	pub, err := client.Dial(ctx, client.Config{Addrs: []string{"ws://" + h.Addr().String()}, Token: tok})
	if err != nil {
		t.Fatal(err)
	}
	defer pub.Close()
	go func() {
		for range pub.Events() {
		}
	}()
	gaps := map[string][]client.Event{}
	seen := func(e client.Event) {
		if e.Kind == client.EventGap {
			gaps[e.Channel] = append(gaps[e.Channel], e)
		}
	}
	for _, ch := range []string{"a", "b"} {
		if _, err := c.Subscribe(ctx, ch); err != nil {
			t.Fatal(err)
		}
		if _, err := pub.Publish(ctx, ch, client.PriorityP2, []byte("1"), ""); err != nil {
			t.Fatal(err)
		}
		if m := next(t, c, client.EventMessage, seen); m.Message.GetOffset() != 1 {
			t.Fatalf("first message %v", m)
		}
	}
	p.refuse.Store(true)
	p.cut()
	for _, ch := range []string{"a", "b"} {
		for i := 2; i <= 6; i++ {
			if _, err := pub.Publish(ctx, ch, client.PriorityP2, fmt.Append(nil, i), ""); err != nil {
				t.Fatal(err)
			}
		}
	}
	p.refuse.Store(false)
	next(t, c, client.EventConnected, seen)
	for range 2 {
		r := next(t, c, client.EventResumed, seen)
		if r.Subscribed.GetRecovered() {
			t.Fatalf("%v recovered across 5 messages with 2 kept", r)
		}
	}
	// Reconnect twice more: nothing was lost since, so no more gaps.
	for range 2 {
		p.cut()
		next(t, c, client.EventConnected, seen)
		for range 2 {
			if r := next(t, c, client.EventResumed, seen); !r.Subscribed.GetRecovered() {
				t.Fatalf("%v: not recovered with nothing missed", r)
			}
		}
	}
	for _, ch := range []string{"a", "b"} {
		if _, err := pub.Publish(ctx, ch, client.PriorityP2, []byte("7"), ""); err != nil {
			t.Fatal(err)
		}
		if m := next(t, c, client.EventMessage, seen); m.Message.GetOffset() != 7 || m.Channel != ch {
			t.Fatalf("after the gap: %v, want %s #7", m, ch)
		}
	}
	for _, ch := range []string{"a", "b"} {
		g := gaps[ch]
		if len(g) != 1 {
			t.Fatalf("channel %s: %d gap events %v, want exactly one", ch, len(g), g)
		}
		if g[0].Gap.GetFromOffset() != 2 || g[0].Gap.GetToOffset() != 6 {
			t.Fatalf("channel %s: gap %v, want offsets 2 to 6", ch, g[0])
		}
	}
}

func TestEventKindNames(t *testing.T) {
	want := map[client.EventKind]string{
		client.EventConnecting: "connecting", client.EventConnected: "connected", client.EventDisconnected: "disconnected",
		client.EventMessage: "message", client.EventGap: "gap", client.EventResumed: "resumed", client.EventRefused: "refused",
	}
	for k, name := range want {
		if k.String() != name {
			t.Errorf("kind %d prints %q, want %q", uint8(k), k.String(), name)
		}
	}
	if s := client.EventKind(99).String(); s != "event(99)" {
		t.Errorf("an unknown kind prints %q", s)
	}
}
