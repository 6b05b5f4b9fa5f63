package hub

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/corralhq/corral/wire"
	"github.com/corralhq/corral/wire/corralv1"
)

const wsHead = "GET /v1/ws HTTP/1.1\r\nHost: corral\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n" +
	"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n" +
	"Sec-WebSocket-Protocol: " + wire.SubprotocolProto + "\r\n\r\n"

// TestWSListenerPaths drives the listener in front of net/http: upgrades
// whose head arrives a byte at a time, an upgrade net/http answers (no
// subprotocol of the hub: 1002 as before), the HTTP API behind it, and a
// connection that never finishes its head (closed at the handshake
// timeout).
func TestWSListenerPaths(t *testing.T) {
	th := startHub(t, func(cfg *Config, _ *Options) { cfg.Session.HandshakeTimeout = time.Second })
	tok := token(t, tokenOpts{})
	dial := func(t *testing.T) net.Conn {
		c, err := net.Dial("tcp", th.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		_ = c.SetDeadline(time.Now().Add(20 * time.Second))
		return c
	}
	t.Run("a head written a byte at a time upgrades and the session works", func(t *testing.T) {
		c := dial(t)
		for i := range len(wsHead) {
			if _, err := c.Write([]byte{wsHead[i]}); err != nil {
				t.Fatal(err)
			}
		}
		r := bufio.NewReader(c)
		resp, err := http.ReadResponse(r, nil)
		if err != nil || resp.StatusCode != http.StatusSwitchingProtocols || resp.Header.Get("Sec-WebSocket-Protocol") != wire.SubprotocolProto {
			t.Fatalf("handshake: %v %+v", err, resp)
		}
		w := &rawTCPWS{c: c, r: r}
		if _, err := c.Write(clientFrame(2, true, true, helloFrame(t, tok))); err != nil {
			t.Fatal(err)
		}
		op, p := w.next(t)
		codec, _ := wire.NewCodec(wire.FormatProto, wire.Config{})
		var f corralv1.ServerFrame
		if op != 2 || codec.DecodeServerFrame(p, &f) != nil || f.GetWelcome() == nil {
			t.Fatalf("after hello: opcode %d %q", op, p)
		}
	})
	t.Run("an upgrade without the hub's subprotocol is answered by net/http and nbio as before", func(t *testing.T) {
		w := dialTCPWSProto(t, th, "mqtt")
		if code, _ := w.closeCode(t); code != wire.CloseProtocolError {
			t.Fatalf("closed with %v, want 1002", code)
		}
	})
	t.Run("the HTTP API is served behind it", func(t *testing.T) {
		httpPublish(t, th, "acme", "news", "p1", "x")
	})
	t.Run("a head never finished is cut at the handshake timeout", func(t *testing.T) {
		c := dial(t)
		if _, err := io.WriteString(c, "GET /v1/ws HTTP/1.1\r\nHost: "); err != nil {
			t.Fatal(err)
		}
		if _, err := io.ReadAll(c); err != nil { // EOF: closed by the hub
			t.Fatalf("read: %v", err)
		}
	})
}

// TestWSUpgradeAllocations bounds the bytes the hub allocates per session
// set-up (upgrade, Hello, Welcome). Through net/http every upgrade left
// two 4 KiB bufio buffers behind (a hijack never returns them to their
// pools): about 16 KiB a session with the test client, against about
// 8 KiB on the listener's own path.
func TestWSUpgradeAllocations(t *testing.T) {
	th := startHub(t, nil)
	tok := token(t, tokenOpts{})
	hello := clientFrame(2, true, true, helloFrame(t, tok))
	const n = 300
	conns := make([]net.Conn, 0, n)
	defer func() {
		for _, c := range conns {
			_ = c.Close()
		}
	}()
	buf := make([]byte, 4096)
	setup := func() {
		c, err := net.Dial("tcp", th.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
		_ = c.SetDeadline(time.Now().Add(20 * time.Second))
		if _, err := io.WriteString(c, wsHead); err != nil {
			t.Fatal(err)
		}
		// The 101 and, after the Hello, the Welcome: read until each ends.
		got := 0
		for !strings.Contains(string(buf[:got]), "\r\n\r\n") {
			m, err := c.Read(buf[got:])
			if err != nil {
				t.Fatal(err)
			}
			got += m
		}
		if _, err := c.Write(hello); err != nil {
			t.Fatal(err)
		}
		if _, err := io.ReadAtLeast(c, buf, 2); err != nil {
			t.Fatal(err)
		}
	}
	for range 20 { // warm the pools and the hub's first allocations
		setup()
	}
	var m0, m1 runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&m0)
	for range n {
		setup()
	}
	runtime.ReadMemStats(&m1)
	per := (m1.TotalAlloc - m0.TotalAlloc) / n
	t.Logf("%d bytes allocated per session set-up (hub and test client)", per)
	if per > 12<<10 {
		t.Fatalf("%d bytes allocated per session set-up, want at most 12 KiB", per)
	}
}

// TestWSUpgradeAfterHTTPRequest upgrades a keep-alive connection that
// served a publish first (net/http's path behind wsListener): the session
// is on nbio's poller with the hub's frame checks, so an unmasked frame is
// closed with 1002 (nbio's blocking mode, which a wrapped connection would
// get, lets it through).
func TestWSUpgradeAfterHTTPRequest(t *testing.T) {
	th := startHub(t, nil)
	c, err := net.Dial("tcp", th.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(20 * time.Second))
	body := `{"tenant":"acme","channel":"news","priority":"p1","data":"x"}`
	pub := "POST /v1/publish HTTP/1.1\r\nHost: corral\r\nAuthorization: Bearer " + testAPIKey +
		"\r\nContent-Type: application/json\r\nContent-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n" + body
	if _, err := io.WriteString(c, pub); err != nil {
		t.Fatal(err)
	}
	r := bufio.NewReader(c)
	resp, err := http.ReadResponse(r, nil)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("publish: %v %+v", err, resp)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if _, err := io.WriteString(c, wsHead); err != nil {
		t.Fatal(err)
	}
	if resp, err = http.ReadResponse(r, nil); err != nil || resp.StatusCode != http.StatusSwitchingProtocols {
		t.Fatalf("upgrade after a publish: %v %+v", err, resp)
	}
	w := &rawTCPWS{c: c, r: r}
	if _, err := c.Write(clientFrame(2, true, false, helloFrame(t, token(t, tokenOpts{})))); err != nil {
		t.Fatal(err)
	}
	if code, reason := w.closeCode(t); code != wire.CloseProtocolError || !strings.Contains(reason, "unmasked") {
		t.Fatalf("unmasked frame closed with %v %q, want 1002 unmasked", code, reason)
	}
}
