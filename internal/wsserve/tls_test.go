package wsserve

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/corralhq/corral/internal/testkit"
)

// testTLS returns a server configuration with a self-signed ECDSA P-256
// certificate for "ws.corral.test" and a client configuration trusting it.
func testTLS(t testing.TB) (server, client *tls.Config) {
	t.Helper()
	crt, pool := testkit.SelfSignedCert(t, "ws.corral.test")
	server = &tls.Config{Certificates: []tls.Certificate{crt}, NextProtos: []string{"http/1.1"}}
	client = &tls.Config{RootCAs: pool, ServerName: "ws.corral.test", NextProtos: []string{"http/1.1"}}
	return server, client
}

// TestTLS: with Config.TLS, upgrades on the listener's path and through
// net/http are served over TLS with the same frame checks as plain TCP
// (nbio serves a TLS connection in its blocking mode, where the engine's
// data handler never runs); the peer's close reaches Closed; the other
// paths are HTTPS; a connection that never starts its TLS handshake is
// closed at the head's read deadline.
func TestTLS(t *testing.T) {
	srvTLS, cliTLS := testTLS(t)
	h := new(testHandler)
	addr := startServer(t, Config{TLS: srvTLS, HTTPReadHeaderTimeout: 300 * time.Millisecond}, h, nil)
	dial := func(t *testing.T) *tls.Conn {
		c, err := tls.DialWithDialer(&net.Dialer{Timeout: 20 * time.Second}, "tcp", addr, cliTLS)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		_ = c.SetDeadline(time.Now().Add(20 * time.Second))
		return c
	}
	upgrade := func(t *testing.T, head string) (net.Conn, *bufio.Reader) {
		c := dial(t)
		if _, err := io.WriteString(c, head); err != nil {
			t.Fatal(err)
		}
		r := bufio.NewReader(c)
		if resp, err := http.ReadResponse(r, nil); err != nil || resp.StatusCode != http.StatusSwitchingProtocols {
			t.Fatalf("upgrade: %v %+v", err, resp)
		}
		return c, r
	}
	slowHead := strings.Replace(wsHead, "Host: corral\r\n", "Host: corral\r\nX-Pad: "+strings.Repeat("x", headMax)+"\r\n", 1)
	for _, tc := range []struct{ name, head string }{
		{"on the listener's path", wsHead},
		{"through net/http", slowHead},
	} {
		t.Run(tc.name+": echo, then an unmasked frame closes with 1002", func(t *testing.T) {
			c, r := upgrade(t, tc.head)
			if _, err := c.Write(cat(clientFrame(2, true, true, []byte("hello")), clientFrame(1, true, true, []byte("again")))); err != nil {
				t.Fatal(err)
			}
			for _, want := range []string{"1:hello", "2:again"} {
				if _, p, err := testkit.ReadWSFrame(r); err != nil || string(p) != want {
					t.Fatalf("answer %q %v, want %q", p, err, want)
				}
			}
			if _, err := c.Write(clientFrame(2, true, false, []byte("x"))); err != nil {
				t.Fatal(err)
			}
			if code, reason := closeCode(t, r); code != 1002 || reason != "unmasked client frame" {
				t.Fatalf("closed with %d %q, want 1002 unmasked client frame", code, reason)
			}
		})
	}
	t.Run("the peer's close frame is echoed and reaches Closed", func(t *testing.T) {
		c, r := upgrade(t, wsHead)
		if _, err := c.Write(clientFrame(8, true, true, []byte{0x0f, 0xa0})); err != nil { // 4000
			t.Fatal(err)
		}
		if code, _ := closeCode(t, r); code != 4000 {
			t.Fatalf("echoed %d, want 4000", code)
		}
		testkit.WaitFor(t, 10*time.Second, "Closed(4000)", func() bool {
			for _, code := range h.closedCodes() {
				if code == 4000 {
					return true
				}
			}
			return false
		})
	})
	t.Run("another path is HTTPS", func(t *testing.T) {
		c := &http.Client{Transport: &http.Transport{TLSClientConfig: cliTLS}, Timeout: 20 * time.Second}
		resp, err := c.Get("https://" + addr + "/other")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		if string(b) != "other" {
			t.Fatalf("answer %q", b)
		}
	})
	t.Run("a connection that never starts TLS is closed", func(t *testing.T) {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		_ = c.SetReadDeadline(time.Now().Add(20 * time.Second))
		if _, err := c.Read(make([]byte, 1)); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("read from a silent connection: %v, want it closed by the server", err)
		}
	})
}

// stackHandler is a Handler whose sessions echo like testHandler's and
// note whether a message ran on the connection's reading goroutine.
type stackHandler struct {
	testHandler
	onReader atomic.Int64 // messages handled on readTLS's goroutine
}

func (h *stackHandler) Open(conn Conn) Session {
	return &stackSession{testSession: testSession{h: &h.testHandler, conn: conn}, h: h}
}

type stackSession struct {
	testSession
	h *stackHandler
}

func (s *stackSession) Message(binary bool, data []byte) {
	buf := make([]byte, 64<<10)
	if st := string(buf[:runtime.Stack(buf, false)]); strings.Contains(st, "readTLS") || strings.Contains(st, "HandleRead") {
		s.h.onReader.Add(1)
	}
	s.testSession.Message(binary, data)
}

// TestTLSReading: a wss connection's reader hands nbio whatever the TLS
// records carry, split anyhow (a message a byte per record, one over
// several records and read buffers, several in one record), in order;
// the message handlers run on the Workers, not on the reader (whose stack
// an idle connection keeps); and an idle connection holds no read buffer.
func TestTLSReading(t *testing.T) {
	srvTLS, cliTLS := testTLS(t)
	h := new(stackHandler)
	var srv *Server
	addr := startServer(t, Config{TLS: srvTLS}, h, func(s *Server) { srv = s })
	const conns = 8
	type client struct {
		c *tls.Conn
		r *bufio.Reader
	}
	var cs []client
	for range conns {
		c, err := tls.DialWithDialer(&net.Dialer{Timeout: 20 * time.Second}, "tcp", addr, cliTLS)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		_ = c.SetDeadline(time.Now().Add(30 * time.Second))
		if _, err := io.WriteString(c, wsHead); err != nil {
			t.Fatal(err)
		}
		r := bufio.NewReader(c)
		if resp, err := http.ReadResponse(r, nil); err != nil || resp.StatusCode != http.StatusSwitchingProtocols {
			t.Fatalf("upgrade: %v %+v", err, resp)
		}
		cs = append(cs, client{c, r})
	}
	big := bytes.Repeat([]byte("0123456789abcdef"), 3000) // 48,000 bytes: three records, twelve read buffers
	for i, cl := range cs {
		// A byte per TLS record: each Write is a record.
		for _, b := range clientFrame(2, true, true, []byte("bytewise")) {
			if _, err := cl.c.Write([]byte{b}); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := cl.c.Write(clientFrame(2, true, true, big)); err != nil {
			t.Fatal(err)
		}
		if _, err := cl.c.Write(cat(clientFrame(1, true, true, []byte("three")), clientFrame(1, true, true, []byte("four")))); err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{"1:bytewise", "2:" + string(big), "3:three", "4:four"} {
			if _, p, err := testkit.ReadWSFrame(cl.r); err != nil || string(p) != want {
				t.Fatalf("connection %d: answer of %d bytes %v, want %d bytes %.20q", i, len(p), err, len(want), want)
			}
		}
	}
	if n := h.onReader.Load(); n != 0 {
		t.Errorf("%d of %d messages were handled on the connection's reading goroutine", n, 4*conns)
	}
	testkit.WaitFor(t, 10*time.Second, "no read buffer held by idle connections", func() bool {
		return srv.tlsReadHeld.Load() == 0
	})
	// Still served after the idle wait.
	if _, err := cs[0].c.Write(clientFrame(2, true, true, []byte("again"))); err != nil {
		t.Fatal(err)
	}
	if _, p, err := testkit.ReadWSFrame(cs[0].r); err != nil || string(p) != "5:again" {
		t.Fatalf("answer %q %v, want 5:again", p, err)
	}
}

// TestSyncOnWorkers: nbio's SyncCall as New sets it runs each call on a
// worker, not the caller's goroutine, returns once it is done (so calls
// are in order), and raises its panic in the caller, where nbio's Parse
// recovers it.
func TestSyncOnWorkers(t *testing.T) {
	call := syncOnWorkers(NewWorkers(time.Second))
	me := goid()
	var order []int
	for i := range 3 {
		call(func() {
			if goid() == me {
				t.Error("ran on the caller's goroutine")
			}
			order = append(order, i)
		})
	}
	if fmt.Sprint(order) != "[0 1 2]" {
		t.Errorf("order %v", order)
	}
	func() {
		defer func() {
			if p := recover(); p != "boom" {
				t.Errorf("recovered %v, want the call's panic", p)
			}
		}()
		call(func() { panic("boom") })
	}()
}

// BenchmarkTLSMessage: one wss connection, a small message and its echo
// in turn, with the message handlers run as New sets nbio's SyncCall (on
// the Workers, the reader waiting) and, for comparison, inline on the
// reader (nbio's default when it is given a ServerExecutor): what the
// hand-off to a worker costs a message, beside a round trip over TLS.
//
//	go test -run '^$' -bench TLSMessage -benchtime 20000x -count 5 ./internal/wsserve
func BenchmarkTLSMessage(b *testing.B) {
	for _, v := range []struct {
		name   string
		inline bool
	}{{"workers", false}, {"inline", true}} {
		b.Run(v.name, func(b *testing.B) {
			srvTLS, cliTLS := testTLS(b)
			addr := startServer(b, Config{TLS: srvTLS}, new(testHandler), func(s *Server) {
				if v.inline {
					s.engine.SyncCall = func(f func()) { f() }
				}
			})
			c, err := tls.Dial("tcp", addr, cliTLS)
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			if _, err := io.WriteString(c, wsHead); err != nil {
				b.Fatal(err)
			}
			r := bufio.NewReader(c)
			if resp, err := http.ReadResponse(r, nil); err != nil || resp.StatusCode != http.StatusSwitchingProtocols {
				b.Fatalf("upgrade: %v %+v", err, resp)
			}
			frame := clientFrame(2, true, true, []byte("ping"))
			for b.Loop() {
				if _, err := c.Write(frame); err != nil {
					b.Fatal(err)
				}
				if _, _, err := testkit.ReadWSFrame(r); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
