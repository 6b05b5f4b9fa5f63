package hub

import (
	"bufio"
	"encoding/binary"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/corralhq/corral/internal/testkit"
	"github.com/corralhq/corral/wire"
	"github.com/corralhq/corral/wire/corralv1"
)

// clientFrame builds one client frame: opcode, FIN, the mask bit, payload
// (testkit.WSClientFrame).
func clientFrame(op byte, fin, masked bool, payload []byte) []byte {
	return testkit.WSClientFrame(op, fin, masked, payload)
}

func cat(frames ...[]byte) []byte { return testkit.Cat(frames...) }

// rawTCPWS is a WebSocket client on a bare TCP connection: it writes the
// bytes it is given, masked or not.
type rawTCPWS struct {
	c net.Conn
	r *bufio.Reader
}

func dialTCPWS(t *testing.T, th *testHub) *rawTCPWS {
	t.Helper()
	return dialTCPWSProto(t, th, wire.SubprotocolProto)
}

func dialTCPWSProto(t *testing.T, th *testHub, subprotocol string) *rawTCPWS {
	t.Helper()
	c, r := testkit.DialWS(t, th.Addr().String(), "/v1/ws", subprotocol)
	return &rawTCPWS{c: c, r: r}
}

// next reads one server frame (servers do not mask): opcode and payload.
func (w *rawTCPWS) next(t *testing.T) (byte, []byte) {
	t.Helper()
	op, p, err := testkit.ReadWSFrame(w.r)
	if err != nil {
		t.Fatalf("reading a frame: %v", err)
	}
	return op, p
}

// closeCode reads frames until a close frame and returns its code.
func (w *rawTCPWS) closeCode(t *testing.T) (wire.CloseCode, string) {
	t.Helper()
	for {
		op, p := w.next(t)
		if op != 8 {
			continue
		}
		if len(p) < 2 {
			t.Fatalf("close frame without a code: %x", p)
		}
		return wire.CloseCode(binary.BigEndian.Uint16(p)), string(p[2:])
	}
}

func TestWSFramingEndToEnd(t *testing.T) {
	th := startHub(t, nil)
	tok := token(t, tokenOpts{})
	t.Run("a normal session works", func(t *testing.T) {
		w := dialTCPWS(t, th)
		hello := helloFrame(t, tok)
		// The header arrives in two reads, the payload in a third.
		f := clientFrame(2, true, true, hello)
		for _, part := range [][]byte{f[:1], f[1:4], f[4:]} {
			if _, err := w.c.Write(part); err != nil {
				t.Fatal(err)
			}
			time.Sleep(5 * time.Millisecond) // separate reads, likely (not relied on)
		}
		op, p := w.next(t)
		if op != 2 {
			t.Fatalf("answer opcode %d", op)
		}
		codec, err := wire.NewCodec(wire.FormatProto, wire.Config{})
		if err != nil {
			t.Fatal(err)
		}
		var sf corralv1.ServerFrame
		if err := codec.DecodeServerFrame(p, &sf); err != nil {
			t.Fatal(err)
		}
		if sf.GetWelcome() == nil {
			t.Fatalf("answer %v, want a welcome", &sf)
		}
		// An empty ping is fine; its pong comes back.
		if _, err := w.c.Write(clientFrame(9, true, true, nil)); err != nil {
			t.Fatal(err)
		}
		for {
			op, _ := w.next(t)
			if op == 10 {
				break
			}
			if op == 8 {
				t.Fatal("closed after an empty ping")
			}
		}
	})
	for _, tc := range []struct {
		name string
		send func(t *testing.T) []byte
		why  string
	}{
		{"unmasked hello", func(t *testing.T) []byte { return clientFrame(2, true, false, helloFrame(t, tok)) }, "unmasked"},
		{"empty binary message", func(*testing.T) []byte { return clientFrame(2, true, true, nil) }, "empty"},
		{"empty fragmented message", func(*testing.T) []byte {
			return cat(clientFrame(2, false, true, nil), clientFrame(0, true, true, nil))
		}, "empty"},
		{"unmasked after hello", func(t *testing.T) []byte {
			return cat(clientFrame(2, true, true, helloFrame(t, tok)), clientFrame(9, true, false, nil))
		}, "unmasked"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := dialTCPWS(t, th)
			if _, err := w.c.Write(tc.send(t)); err != nil {
				t.Fatal(err)
			}
			code, reason := w.closeCode(t)
			if code != wire.CloseProtocolError || !strings.Contains(reason, tc.why) {
				t.Fatalf("closed with %v %q, want 1002 (%s)", code, reason, tc.why)
			}
		})
	}
}
