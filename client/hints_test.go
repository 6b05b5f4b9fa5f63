package client

import (
	"context"
	"errors"
	"math/rand/v2"
	"net"
	"net/netip"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lxzan/gws"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/corralhq/corral/backoff"
	"github.com/corralhq/corral/wire"
	"github.com/corralhq/corral/wire/corralv1"
)

// deadAddr returns a 127.0.0.1 address where nothing listens.
func deadAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	a := ln.Addr().String()
	ln.Close()
	return a
}

// TestDialEmitsConnecting: Dial's own round emits a connecting event per
// address it tries, as a reconnection round does, then connected; with a
// buffer of one event Dial still returns (its events come on top of the
// buffer).
func TestDialEmitsConnecting(t *testing.T) {
	h := startFakeHub(t, func(id uint64) uint64 { return id })
	dead := deadAddr(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c, err := Dial(ctx, Config{Addrs: []string{"grpc://" + dead, "grpc://" + h.addr}, InOrder: true, Token: "t", EventBuffer: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	want := []struct {
		kind EventKind
		addr string
	}{{EventConnecting, "grpc://" + dead}, {EventConnecting, "grpc://" + h.addr}, {EventConnected, "grpc://" + h.addr}}
	for i, w := range want {
		select {
		case e := <-c.Events():
			if e.Kind != w.kind || e.Addr != w.addr {
				t.Fatalf("event %d: %v, want %v to %s", i, e, w.kind, w.addr)
			}
		case <-ctx.Done():
			t.Fatalf("event %d: none, want %v to %s", i, w.kind, w.addr)
		}
	}
}

// TestOrderTriesLastAddressLast: a round tries the endpoint of the
// previous attempt last, every time, and the others first in a random
// order.
func TestOrderTriesLastAddressLast(t *testing.T) {
	var eps []endpoint
	for _, ip := range []string{"127.0.0.1", "127.0.0.2", "127.0.0.3", "127.0.0.4"} {
		eps = append(eps, endpoint{target: target{transport: "ws", host: "hubs.test", port: "7400", path: "/v1/ws"}, ip: netip.MustParseAddr(ip)})
	}
	last := eps[2].String()
	firsts := map[string]int{}
	for range 300 {
		got := order(eps, false, 0, last)
		if len(got) != len(eps) {
			t.Fatalf("order returned %d endpoints, want %d", len(got), len(eps))
		}
		if got[len(got)-1].String() != last {
			t.Fatalf("order %v: the previous endpoint %s is not last", got, last)
		}
		firsts[got[0].String()]++
	}
	if len(firsts) != len(eps)-1 {
		t.Fatalf("first endpoints %v: want each of the %d others first at times", firsts, len(eps)-1)
	}
}

// TestReconnectGoesElsewhereFirst: two hubs, random order; each time the
// session is cut the client reconnects to the other hub, since the
// address of the last attempt is tried last.
func TestReconnectGoesElsewhereFirst(t *testing.T) {
	a, b := startFakeHub(t, func(id uint64) uint64 { return id }), startFakeHub(t, func(id uint64) uint64 { return id })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := Dial(ctx, Config{Addrs: []string{"grpc://" + a.addr, "grpc://" + b.addr}, Token: "t", ReconnectMin: time.Millisecond, ReconnectMax: 5 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	prev := waitEvent(t, c, EventConnected).Addr
	hubs := map[string]*fakeHub{"grpc://" + a.addr: a, "grpc://" + b.addr: b}
	for i := range 8 {
		hubs[prev].next(t).cut()
		e := waitEvent(t, c, EventConnected)
		if e.Addr == prev {
			t.Fatalf("cut %d: reconnected to %s again, want the other address first", i, prev)
		}
		prev = e.Addr
	}
}

// TestGRPCRetryHints: a gRPC server that refuses a Hello says when to come
// back with a google.rpc.RetryInfo detail or a grpc-retry-pushback-ms
// trailer; either is the retry hint of the refusal, for Dial and for a
// reconnect, whose next attempt waits at least that long.
func TestGRPCRetryHints(t *testing.T) {
	const hint = 1500 * time.Millisecond
	for _, tc := range []struct {
		name    string
		err     error
		trailer metadata.MD
		within  time.Duration
	}{
		{"RetryInfo detail", wire.Close{Code: wire.CloseTryAgainLater, Text: "overloaded", RetryAfter: hint}.Status().Err(), nil, 0},
		{"pushback trailer", status.Error(codes.Unavailable, "shedding"), metadata.Pairs("grpc-retry-pushback-ms", "1500"), 0},
		// With a window the next attempt is drawn within [hint, hint +
		// window], not within full jitter's [hint, 2 x hint] (which
		// passes the bound below 1 time in 100).
		{"RetryInfo with a window", wire.Close{Code: wire.CloseTryAgainLater, Text: "overloaded", RetryAfter: hint, RetryWithin: 15 * time.Millisecond}.Status().Err(), nil, 15 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := startFakeHub(t, func(id uint64) uint64 { return id })
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()

			h.refuseHellos(tc.err, tc.trailer)
			_, err := Dial(ctx, Config{Addrs: []string{"grpc://" + h.addr}, Token: "t"})
			var cl wire.Close
			if !errors.As(err, &cl) || cl.Code != wire.CloseTryAgainLater || cl.RetryAfter != hint {
				t.Fatalf("Dial: %v, want 1013 with a %v hint", err, hint)
			}

			h.refuseHellos(nil, nil)
			c, err := Dial(ctx, Config{Addrs: []string{"grpc://" + h.addr}, Token: "t", ReconnectMin: time.Millisecond, ReconnectMax: 5 * time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			s := h.next(t)
			h.refuseHellos(tc.err, tc.trailer)
			cut := time.Now()
			s.cut()
			waitEvent(t, c, EventDisconnected) // the cut
			e := waitEvent(t, c, EventDisconnected)
			seen := time.Now()
			if e.Close.Code != wire.CloseTryAgainLater || e.Close.RetryAfter != hint || e.Close.RetryWithin != tc.within {
				t.Fatalf("refused reconnect: %v (window %v), want 1013 with a %v hint and a %v window", e.Close, e.Close.RetryWithin, hint, tc.within)
			}
			if e.RetryAt.Before(cut.Add(hint)) {
				t.Fatalf("next attempt %v after the cut, below the hint %v", e.RetryAt.Sub(cut), hint)
			}
			// The event was emitted before it was seen, so the delay it
			// announced is at least RetryAt - seen.
			if d := e.RetryAt.Sub(seen); tc.within > 0 && d > hint+tc.within {
				t.Fatalf("next attempt in %v, beyond the window [%v, %v]", d, hint, hint+tc.within)
			}
		})
	}
}

// TestRetryAfterHeader: delta-seconds and HTTP dates; no hint for the
// rest.
func TestRetryAfterHeader(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		v    string
		want time.Duration
	}{
		{"2", 2 * time.Second},
		{" 120 ", 2 * time.Minute},
		{"0", 0},
		{"Tue, 01 Dec 2026 12:00:30 GMT", 30 * time.Second},
		{"Tue, 01 Dec 2026 11:59:00 GMT", 0}, // past
		{"-1", 0},
		{"soon", 0},
		{"", 0},
	} {
		if got := retryAfterHeader(tc.v, now); got != tc.want {
			t.Errorf("Retry-After %q: %v, want %v", tc.v, got, tc.want)
		}
	}
}

// TestWelcomeHintsSetTheEnvelope: the base and cap a Welcome advertises
// replace the client's. Policy none waits its base: the server's 700 ms,
// not the client's 1 ms; full jitter stays under the server's cap; a cap
// below the base is raised to it.
func TestWelcomeHintsSetTheEnvelope(t *testing.T) {
	rnd := rand.New(rand.NewPCG(3, 4))
	cfg := Config{Addrs: []string{"127.0.0.1:1"}, Backoff: backoff.Config{Policy: "none", Base: time.Millisecond}}.withDefaults()
	b, err := newRetry(cfg, &corralv1.ServerHints{ReconnectBaseMs: 700}, rnd)
	if err != nil {
		t.Fatal(err)
	}
	if d := b.Next(); d != 700*time.Millisecond {
		t.Fatalf("policy none with the server's base 700 ms waits %v", d)
	}
	cfg = Config{Addrs: []string{"127.0.0.1:1"}, ReconnectMin: time.Millisecond}.withDefaults() // full jitter, 1 ms to 5 s
	b, err = newRetry(cfg, &corralv1.ServerHints{ReconnectCapMs: 20}, rnd)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 20 {
		if d := b.Next(); d > 20*time.Millisecond {
			t.Fatalf("attempt %d waits %v, above the server's cap of 20 ms", i, d)
		}
	}
	b, err = newRetry(cfg, &corralv1.ServerHints{ReconnectBaseMs: 9000}, rnd)
	if err != nil {
		t.Fatalf("a server base above the client's cap: %v", err)
	}
	if _, hi := backoff.Bounds(b.Policy(), 0, 0); hi != 9*time.Second {
		t.Fatalf("a server base of 9 s above the client's 5 s cap: first delay up to %v, want up to 9 s (cap raised to the base)", hi)
	}

	// End to end: a fake hub advertises a 700 ms base; the client, set to
	// wait a constant 1 ms, waits 700 ms after a cut.
	h := startFakeHub(t, func(id uint64) uint64 { return id })
	h.mu.Lock()
	h.hints = &corralv1.ServerHints{ReconnectBaseMs: 700, ReconnectCapMs: 700}
	h.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c, err := Dial(ctx, Config{Addrs: []string{"grpc://" + h.addr}, Token: "t", Backoff: backoff.Config{Policy: "none", Base: time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	s := h.next(t)
	cut := time.Now()
	s.cut()
	e := waitEvent(t, c, EventDisconnected)
	if e.RetryAt.Before(cut.Add(700 * time.Millisecond)) {
		t.Fatalf("next attempt %v after the cut, want the server's 700 ms", e.RetryAt.Sub(cut))
	}
	waitEvent(t, c, EventConnected)
}

// TestCloseWhileAWelcomeArrives: Close called after a reconnection
// attempt got its Welcome but before the session took its place (when
// Close finds no session to close) still ends the client: the attempt
// closes its connection instead of leaving run reading it for ever.
func TestCloseWhileAWelcomeArrives(t *testing.T) {
	h := startFakeHub(t, func(id uint64) uint64 { return id })
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var welcomes atomic.Int32
	closed := make(chan struct{})
	cfg := Config{Addrs: []string{"grpc://" + h.addr}, Token: "t", ReconnectMin: time.Millisecond, ReconnectMax: 5 * time.Millisecond}
	cfg.afterWelcome = func(c *Client) {
		if welcomes.Add(1) != 2 {
			return // Dial's
		}
		go func() { _ = c.Close(); close(closed) }()
		for stopping := false; !stopping; time.Sleep(time.Millisecond) {
			c.mu.Lock()
			stopping = c.final != nil
			c.mu.Unlock()
		}
	}
	c, err := Dial(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		for range c.Events() {
		}
	}()
	h.next(t).cut()
	select {
	case <-closed:
	case <-ctx.Done():
		t.Fatal("Close did not return: the session that came up during it was left open")
	}
}

// TestWebSocketCloseWindow: a WebSocket close reason's hint and window
// reach the reconnect schedule (closeOfWS), and a reason of another peer
// is all text.
func TestWebSocketCloseWindow(t *testing.T) {
	err := closeOfWS(&gws.CloseError{Code: 1013, Reason: []byte("retry_after_ms=1500 retry_within_ms=120 too many handshakes in flight")})
	want := wire.Close{Code: wire.CloseTryAgainLater, RetryAfter: 1500 * time.Millisecond, RetryWithin: 120 * time.Millisecond, Text: "too many handshakes in flight"}
	if cl, ok := err.(wire.Close); !ok || cl != want {
		t.Errorf("closeOfWS = %#v, want %#v", err, want)
	}
	err = closeOfWS(&gws.CloseError{Code: 1001, Reason: []byte("bye")})
	if cl, ok := err.(wire.Close); !ok || cl.RetryAfter != 0 || cl.RetryWithin != 0 || cl.Text != "bye" {
		t.Errorf("closeOfWS(bye) = %#v", err)
	}
}
