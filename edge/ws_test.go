package edge

import (
	"bufio"
	"encoding/binary"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/corralhq/corral/wire"
	"github.com/corralhq/corral/wire/corralv1"
)

// tcpWS is a WebSocket client on a bare TCP connection that writes frames
// as it is told (masked or not) and reads the server's frames.
type tcpWS struct {
	c  net.Conn
	br *bufio.Reader
}

// dialTCPWS upgrades a TCP connection to the edge's /v1/ws with
// subprotocol; it returns the HTTP status line's code and, on 101, the
// connection.
func dialTCPWS(t *testing.T, te *testEdge, subprotocol string) (*tcpWS, *http.Response) {
	t.Helper()
	c, err := net.Dial("tcp", te.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	_ = c.SetDeadline(time.Now().Add(20 * time.Second))
	req := "GET /v1/ws HTTP/1.1\r\nHost: edge\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n" +
		"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Protocol: " + subprotocol + "\r\n\r\n"
	if _, err := io.WriteString(c, req); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	return &tcpWS{c: c, br: br}, resp
}

// frame writes one frame with opcode op.
func (w *tcpWS) frame(t *testing.T, op byte, payload []byte, masked bool) {
	t.Helper()
	b := []byte{0x80 | op}
	mbit := byte(0)
	if masked {
		mbit = 0x80
	}
	switch n := len(payload); {
	case n < 126:
		b = append(b, mbit|byte(n))
	case n < 1<<16:
		b = append(b, mbit|126, byte(n>>8), byte(n))
	default:
		b = append(b, mbit|127)
		b = binary.BigEndian.AppendUint64(b, uint64(n))
	}
	p := append([]byte(nil), payload...)
	if masked {
		key := [4]byte{1, 2, 3, 4}
		b = append(b, key[:]...)
		for i := range p {
			p[i] ^= key[i%4]
		}
	}
	if _, err := w.c.Write(append(b, p...)); err != nil {
		t.Fatalf("write: %v", err)
	}
}

// read returns the next frame's opcode and payload.
func (w *tcpWS) read() (byte, []byte, error) {
	var h [2]byte
	if _, err := io.ReadFull(w.br, h[:]); err != nil {
		return 0, nil, err
	}
	n := uint64(h[1] & 0x7f)
	switch n {
	case 126:
		var e [2]byte
		if _, err := io.ReadFull(w.br, e[:]); err != nil {
			return 0, nil, err
		}
		n = uint64(binary.BigEndian.Uint16(e[:]))
	case 127:
		var e [8]byte
		if _, err := io.ReadFull(w.br, e[:]); err != nil {
			return 0, nil, err
		}
		n = binary.BigEndian.Uint64(e[:])
	}
	p := make([]byte, n)
	_, err := io.ReadFull(w.br, p)
	return h[0] & 0x0f, p, err
}

// closeCode reads frames until the close frame and returns its code and
// reason, and the data frames before it.
func (w *tcpWS) closeCode(t *testing.T) (wire.CloseCode, string, [][]byte) {
	t.Helper()
	var data [][]byte
	for {
		op, p, err := w.read()
		if err != nil {
			t.Fatalf("connection ended without a close frame: %v", err)
		}
		if op == 8 {
			if len(p) < 2 {
				return 1005, "", data
			}
			return wire.CloseCode(binary.BigEndian.Uint16(p)), string(p[2:]), data
		}
		data = append(data, p)
	}
}

// TestWSBoundsBeforeUpstream: the WebSocket transport's own bounds
// (framing, subprotocol, size, payload) close with the hub's codes before
// anything reaches an origin.
func TestWSBoundsBeforeUpstream(t *testing.T) {
	th := startHub(t, nil)
	te := startEdge(t, func(c *Config) { c.Wire.MaxFrameBytes = 4096 }, th)
	tests := []struct {
		name  string
		proto string
		send  func(t *testing.T, w *tcpWS)
		want  wire.CloseCode
	}{
		{"unmasked frame", wire.SubprotocolProto, func(t *testing.T, w *tcpWS) { w.frame(t, 2, []byte{1}, false) }, wire.CloseProtocolError},
		{"binary garbage", wire.SubprotocolProto, func(t *testing.T, w *tcpWS) { w.frame(t, 2, []byte{0xff, 0xff, 0xff}, true) }, wire.CloseProtocolError},
		{"text on the binary subprotocol", wire.SubprotocolProto, func(t *testing.T, w *tcpWS) { w.frame(t, 1, []byte("{}"), true) }, wire.CloseProtocolError},
		{"text that is not UTF-8", wire.SubprotocolJSON, func(t *testing.T, w *tcpWS) { w.frame(t, 1, []byte{'{', 0xff, '}'}, true) }, wire.CloseInvalidPayload},
		{"JSON that is not JSON", wire.SubprotocolJSON, func(t *testing.T, w *tcpWS) { w.frame(t, 1, []byte("{nope"), true) }, wire.CloseInvalidPayload},
		{"frame above max_frame_bytes", wire.SubprotocolProto, func(t *testing.T, w *tcpWS) { w.frame(t, 2, make([]byte, 5000), true) }, wire.CloseTooBig},
		{"empty data message", wire.SubprotocolProto, func(t *testing.T, w *tcpWS) { w.frame(t, 2, nil, true) }, wire.CloseProtocolError},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			opened := th.metric("corral_hub_sessions_opened_total")
			w, resp := dialTCPWS(t, te, tc.proto)
			if resp.StatusCode != http.StatusSwitchingProtocols {
				t.Fatalf("upgrade: %s", resp.Status)
			}
			tc.send(t, w)
			if code, reason, _ := w.closeCode(t); code != tc.want {
				t.Fatalf("closed with %v %q, want %v", code, reason, tc.want)
			}
			if d := th.metric("corral_hub_sessions_opened_total") - opened; d != 0 {
				t.Errorf("the hub opened %v sessions, want none", d)
			}
		})
	}
	t.Run("no subprotocol", func(t *testing.T) {
		w, resp := dialTCPWS(t, te, "chat")
		if resp.StatusCode == http.StatusSwitchingProtocols {
			if code, _, _ := w.closeCode(t); code != wire.CloseProtocolError {
				t.Fatalf("closed with %v, want 1002", code)
			}
		}
	})
	t.Run("hello, subscribe and a message over JSON", func(t *testing.T) {
		w, _ := dialTCPWS(t, te, wire.SubprotocolJSON)
		w.frame(t, 1, []byte(`{"id":"1","hello":{"token":"`+token(t, tokenOpts{})+`"}}`), true)
		_, p, err := w.read()
		if err != nil || !strings.Contains(string(p), `"welcome"`) {
			t.Fatalf("first frame %q %v, want a welcome", p, err)
		}
		w.frame(t, 1, []byte(`{"id":"2","ping":{}}`), true)
		_, p, err = w.read()
		if err != nil || !strings.Contains(string(p), `"pong"`) {
			t.Fatalf("answer to ping %q %v, want a pong", p, err)
		}
		var f corralv1.ServerFrame
		if err := te.codecs[wire.FormatJSON].DecodeServerFrame(p, &f); err != nil || f.GetId() != 2 {
			t.Fatalf("pong %q: %v", p, err)
		}
	})
}
