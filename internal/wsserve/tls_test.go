package wsserve

import (
	"bufio"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/corralhq/corral/internal/testkit"
)

// testTLS returns a server configuration with a self-signed ECDSA P-256
// certificate for "ws.corral.test" and a client configuration trusting it.
func testTLS(t *testing.T) (server, client *tls.Config) {
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
