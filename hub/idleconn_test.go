package hub

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// closedWithin reads from c until the hub closes it (EOF or a reset), and
// fails if that takes longer than bound; answer, when set, answers what is
// read (an HTTP/2 peer acknowledging settings and pings).
func closedWithin(t *testing.T, c net.Conn, bound time.Duration, answer func(r *bufio.Reader) error) {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(bound))
	r := bufio.NewReader(c)
	for {
		var err error
		if answer != nil {
			err = answer(r)
		} else {
			_, err = r.ReadByte()
		}
		if err == nil {
			continue
		}
		if ne, ok := err.(net.Error); ok && ne.Timeout() {
			t.Fatalf("the connection is still open after %v", bound)
		}
		return // closed by the hub
	}
}

// h2Peer answers one HTTP/2 frame as a client that never opens a stream:
// it acknowledges the server's SETTINGS and PINGs.
func h2Peer(c net.Conn) func(r *bufio.Reader) error {
	return func(r *bufio.Reader) error {
		var h [9]byte
		if _, err := io.ReadFull(r, h[:]); err != nil {
			return err
		}
		n := int(h[0])<<16 | int(h[1])<<8 | int(h[2])
		payload := make([]byte, n)
		if _, err := io.ReadFull(r, payload); err != nil {
			return err
		}
		typ, flags := h[3], h[4]
		switch {
		case typ == 4 && flags&1 == 0: // SETTINGS: ack
			_, _ = c.Write([]byte{0, 0, 0, 4, 1, 0, 0, 0, 0})
		case typ == 6 && flags&1 == 0: // PING: ack with the same data
			_, _ = c.Write(append([]byte{0, 0, 8, 6, 1, 0, 0, 0, 0}, payload...))
		}
		return nil
	}
}

const h2Preface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"

// emptySettings is a SETTINGS frame with no parameter.
var emptySettings = []byte{0, 0, 0, 4, 0, 0, 0, 0, 0}

// TestIdleConnectionsAreClosed opens each kind of idle or half-open
// connection on the hub's listeners, with short configured bounds, and
// waits (bounded) until the hub closes it. Before the connections section
// every one of them stayed open: net/http had no idle timeout, gRPC the
// default 120 s handshake timeout and no idle bound.
func TestIdleConnectionsAreClosed(t *testing.T) {
	const bound = 300 * time.Millisecond
	th := startHub(t, func(c *Config, _ *Options) {
		c.Connections = ConnectionConfig{
			HTTPReadHeaderTimeout: bound, HTTPIdleTimeout: bound,
			GRPCHandshakeTimeout: bound, GRPCMaxConnectionIdle: bound,
			GRPCKeepaliveTime: bound, GRPCKeepaliveTimeout: bound,
		}
		c.Session.HandshakeTimeout = 10 * time.Second // the session bound is not what closes these
	})
	// Far above the bounds, far below the defaults this test guards.
	const wait = 8 * time.Second
	publish := func(t *testing.T) net.Conn {
		c, err := net.Dial("tcp", th.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		body := `{"tenant":"acme","channel":"news","data":"hi"}`
		fmt.Fprintf(c, "POST /v1/publish HTTP/1.1\r\nHost: hub\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", testAPIKey, len(body), body)
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK || resp.Close {
			t.Fatalf("publish: %s, close %v; want 200 on a kept-alive connection", resp.Status, resp.Close)
		}
		return c
	}
	dial := func(t *testing.T, addr string) net.Conn {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		return c
	}
	t.Run("HTTP keep-alive after a publish", func(t *testing.T) {
		closedWithin(t, publish(t), wait, nil)
	})
	t.Run("HTTP keep-alive with 3 bytes of a next request", func(t *testing.T) {
		c := publish(t)
		_, _ = io.WriteString(c, "POS")
		closedWithin(t, c, wait, nil)
	})
	t.Run("HTTP header never finished", func(t *testing.T) {
		c := dial(t, th.Addr().String())
		_, _ = io.WriteString(c, "GET /v1/ws HTTP/1.1\r\nHost: hub\r\n")
		closedWithin(t, c, wait, nil)
	})
	t.Run("gRPC port: silent TCP", func(t *testing.T) {
		closedWithin(t, dial(t, th.GRPCAddr().String()), wait, nil)
	})
	t.Run("gRPC port: HTTP/2 preface, no stream", func(t *testing.T) {
		c := dial(t, th.GRPCAddr().String())
		_, _ = io.WriteString(c, h2Preface)
		_, _ = c.Write(emptySettings)
		closedWithin(t, c, wait, h2Peer(c))
	})
	t.Run("gRPC port: HTTP/2 preface, no stream, pings unanswered", func(t *testing.T) {
		c := dial(t, th.GRPCAddr().String())
		_, _ = io.WriteString(c, h2Preface)
		_, _ = c.Write(emptySettings)
		// grpc-go waits up to a minute for the ack of its GOAWAY ping;
		// the keepalive ping that goes unanswered closes it sooner.
		closedWithin(t, c, 30*time.Second, nil)
	})
}

// TestConnectionConfigValidate names the key of a negative bound.
func TestConnectionConfigValidate(t *testing.T) {
	err := ConnectionConfig{GRPCMaxConnectionIdle: -time.Second}.Validate()
	if err == nil || !strings.Contains(err.Error(), "connections.grpc_max_connection_idle") {
		t.Fatalf("Validate = %v, want an error naming connections.grpc_max_connection_idle", err)
	}
}
