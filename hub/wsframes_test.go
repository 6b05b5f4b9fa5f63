package hub

import (
	"bufio"
	"encoding/binary"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	nbws "github.com/lesismal/nbio/nbhttp/websocket"

	"github.com/corralhq/corral/wire"
	"github.com/corralhq/corral/wire/corralv1"
)

// clientFrame builds one client frame: opcode, FIN, the mask bit, payload.
// The masking key is zero, so the payload goes out as given.
func clientFrame(op byte, fin, masked bool, payload []byte) []byte {
	b0 := op
	if fin {
		b0 |= 0x80
	}
	var m byte
	if masked {
		m = 0x80
	}
	out := []byte{b0}
	switch n := len(payload); {
	case n < 126:
		out = append(out, m|byte(n))
	case n <= 0xffff:
		out = append(out, m|126)
		out = binary.BigEndian.AppendUint16(out, uint16(n))
	default:
		out = append(out, m|127)
		out = binary.BigEndian.AppendUint64(out, uint64(n))
	}
	if masked {
		out = append(out, 0, 0, 0, 0)
	}
	return append(out, payload...)
}

func cat(frames ...[]byte) []byte {
	var out []byte
	for _, f := range frames {
		out = append(out, f...)
	}
	return out
}

// firstVerdict feeds p in chunks of the given sizes (the rest in one) and
// returns the first verdict that is not frameOK.
func firstVerdict(f *frameTrack, p []byte, splits ...int) frameVerdict {
	for _, n := range splits {
		n = min(n, len(p))
		if v := f.feed(p[:n]); v != frameOK {
			return v
		}
		p = p[n:]
	}
	return f.feed(p)
}

func TestFrameTrack(t *testing.T) {
	pay := func(n int) []byte { return make([]byte, n) }
	tests := []struct {
		name   string
		stream []byte
		want   frameVerdict
	}{
		{"masked binary", clientFrame(2, true, true, pay(5)), frameOK},
		{"unmasked binary", clientFrame(2, true, false, pay(5)), frameUnmasked},
		{"unmasked after a good frame", cat(clientFrame(2, true, true, pay(3)), clientFrame(1, true, false, pay(3))), frameUnmasked},
		{"unmasked ping", clientFrame(9, true, false, nil), frameUnmasked},
		{"16-bit length", cat(clientFrame(2, true, true, pay(300)), clientFrame(2, true, true, pay(1))), frameOK},
		{"16-bit length then unmasked", cat(clientFrame(2, true, true, pay(300)), clientFrame(2, true, false, pay(1))), frameUnmasked},
		{"64-bit length", cat(clientFrame(2, true, true, pay(70000)), clientFrame(1, true, true, pay(2))), frameOK},
		{"64-bit length then empty", cat(clientFrame(2, true, true, pay(70000)), clientFrame(2, true, true, nil)), frameEmpty},
		{"empty binary", clientFrame(2, true, true, nil), frameEmpty},
		{"empty text", clientFrame(1, true, true, nil), frameEmpty},
		{"empty ping, pong and close", cat(clientFrame(9, true, true, nil), clientFrame(10, true, true, nil), clientFrame(8, true, true, nil)), frameOK},
		{"fragments", cat(clientFrame(2, false, true, pay(2)), clientFrame(0, false, true, nil), clientFrame(0, true, true, pay(1))), frameOK},
		{"empty first fragment, data later", cat(clientFrame(1, false, true, nil), clientFrame(9, true, true, nil), clientFrame(0, true, true, pay(4))), frameOK},
		{"all fragments empty", cat(clientFrame(2, false, true, nil), clientFrame(0, false, true, nil), clientFrame(0, true, true, nil)), frameEmpty},
		{"empty final fragment of a message with data", cat(clientFrame(2, false, true, pay(9)), clientFrame(0, true, true, nil)), frameOK},
		{"continuation without a start", clientFrame(0, true, true, []byte("x")), frameSequence},
		{"message inside a fragmented one", cat(clientFrame(1, false, true, pay(1)), clientFrame(2, true, true, pay(1))), frameSequence},
		{"control frames inside a fragmented message", cat(clientFrame(1, false, true, pay(1)), clientFrame(9, true, true, pay(125)), clientFrame(10, true, true, nil), clientFrame(0, true, true, pay(1))), frameOK},
		{"ping of 126 bytes", clientFrame(9, true, true, pay(126)), frameControl},
		{"fragmented ping", clientFrame(9, false, true, pay(1)), frameControl},
		{"reserved opcodes", clientFrame(3, true, true, pay(1)), frameOpcode},
		{"reserved control opcode", clientFrame(11, true, true, nil), frameOpcode},
		{"RSV1", append([]byte{0xc1}, clientFrame(1, true, true, pay(1))[1:]...), frameRSV},
		{"RSV3 after a good frame", cat(clientFrame(2, true, true, pay(1)), append([]byte{0x92}, clientFrame(2, true, true, pay(1))[1:]...)), frameRSV},
		{"unmasked continuation", cat(clientFrame(2, false, true, pay(1)), clientFrame(0, true, false, pay(1))), frameUnmasked},
		{"length of 4 GiB stops the tracking", cat([]byte{0x82, 0xff, 0, 0, 0, 1, 0, 0, 0, 0}, clientFrame(2, true, false, nil)), frameOK},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var whole frameTrack
			if got := firstVerdict(&whole, tc.stream); got != tc.want {
				t.Fatalf("in one read: %v, want %v", got, tc.want)
			}
			for i := range len(tc.stream) + 1 {
				var f frameTrack
				if got := firstVerdict(&f, tc.stream, i); got != tc.want {
					t.Fatalf("split at %d: %v, want %v", i, got, tc.want)
				}
			}
			var bytewise frameTrack
			splits := make([]int, len(tc.stream))
			for i := range splits {
				splits[i] = 1
			}
			if got := firstVerdict(&bytewise, tc.stream, splits...); got != tc.want {
				t.Fatalf("a byte per read: %v, want %v", got, tc.want)
			}
			if tc.want != frameOK {
				if v := whole.feed(clientFrame(2, true, true, pay(1))); v != frameDead {
					t.Fatalf("after a violation: %v, want frameDead", v)
				}
			}
		})
	}
}

// refVerdict is the straightforward parser frameTrack must agree with: it
// walks whole frames in p and returns the first violation.
func refVerdict(p []byte) frameVerdict {
	open, empty := false, false
	for len(p) >= 2 {
		b0, b1 := p[0], p[1]
		if b1&0x80 == 0 {
			return frameUnmasked
		}
		n, h := uint64(b1&0x7f), 2
		switch n {
		case 126:
			if len(p) < 4 {
				return frameOK
			}
			n, h = uint64(binary.BigEndian.Uint16(p[2:])), 4
		case 127:
			if len(p) < 10 {
				return frameOK
			}
			n, h = binary.BigEndian.Uint64(p[2:]), 10
			if n >= 1<<32 {
				return frameOK
			}
		}
		h += 4
		if len(p) < h {
			return frameOK
		}
		fin := b0&0x80 != 0
		if b0&0x70 != 0 {
			return frameRSV
		}
		switch b0 & 0x0f {
		case 1, 2:
			if open {
				return frameSequence
			}
			if fin && n == 0 {
				return frameEmpty
			}
			open, empty = !fin, n == 0
		case 0:
			if !open {
				return frameSequence
			}
			empty = empty && n == 0
			if fin {
				if empty {
					return frameEmpty
				}
				open = false
			}
		case 8, 9, 10:
			if !fin || n > 125 {
				return frameControl
			}
		default:
			return frameOpcode
		}
		p = p[h:]
		if uint64(len(p)) < n {
			return frameOK
		}
		p = p[n:]
	}
	return frameOK
}

func FuzzFrameTrack(f *testing.F) {
	f.Add(cat(clientFrame(2, true, true, make([]byte, 300)), clientFrame(2, true, true, nil)), []byte{3, 1, 7})
	f.Add(cat(clientFrame(1, false, true, nil), clientFrame(0, true, true, nil)), []byte{1})
	f.Add(clientFrame(2, true, false, []byte("x")), []byte{})
	f.Add([]byte{0x82, 0xff, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0}, []byte{2, 2})
	f.Fuzz(func(t *testing.T, stream, cuts []byte) {
		splits := make([]int, len(cuts))
		for i, c := range cuts {
			splits[i] = int(c)
		}
		var tr frameTrack
		if got, want := firstVerdict(&tr, stream, splits...), refVerdict(stream); got != want {
			t.Fatalf("tracker %v, reference %v (cuts %v)", got, want, cuts)
		}
	})
}

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
	c, err := net.Dial("tcp", th.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	_ = c.SetDeadline(time.Now().Add(20 * time.Second))
	req := "GET /v1/ws HTTP/1.1\r\nHost: corral\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n" +
		"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n" +
		"Sec-WebSocket-Protocol: " + subprotocol + "\r\n\r\n"
	if _, err := io.WriteString(c, req); err != nil {
		t.Fatal(err)
	}
	r := bufio.NewReader(c)
	resp, err := http.ReadResponse(r, nil)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusSwitchingProtocols {
		t.Fatalf("handshake answered %s", resp.Status)
	}
	return &rawTCPWS{c: c, r: r}
}

// next reads one server frame (servers do not mask): opcode and payload.
func (w *rawTCPWS) next(t *testing.T) (byte, []byte) {
	t.Helper()
	var h [2]byte
	if _, err := io.ReadFull(w.r, h[:]); err != nil {
		t.Fatalf("reading a frame: %v", err)
	}
	n := uint64(h[1] & 0x7f)
	switch n {
	case 126:
		var b [2]byte
		_, _ = io.ReadFull(w.r, b[:])
		n = uint64(binary.BigEndian.Uint16(b[:]))
	case 127:
		var b [8]byte
		_, _ = io.ReadFull(w.r, b[:])
		n = binary.BigEndian.Uint64(b[:])
	}
	p := make([]byte, n)
	if _, err := io.ReadFull(w.r, p); err != nil {
		t.Fatalf("reading a payload: %v", err)
	}
	return h[0] & 0x0f, p
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

// TestWSEarlyBytes checks the bytes nbio reads before OnOpen: they are
// tracked, and the tracker moves to the session, split header and all.
func TestWSEarlyBytes(t *testing.T) {
	early := &wsEarly{m: make(map[*nbws.Conn]*earlyConn)}
	stream := cat(clientFrame(2, true, true, make([]byte, 300)), clientFrame(2, true, true, nil))
	c := new(nbws.Conn)
	if s, v := early.feed(c, stream[:3]); s != nil || v != frameOK {
		t.Fatalf("early feed: %v %v", s, v)
	}
	tr := &wsTransport{}
	s := &session{tr: tr}
	if held, v := early.open(c, s, tr); len(held) != 0 || v != frameOK {
		t.Fatalf("open: %d held, %v", len(held), v)
	}
	if len(early.m) != 0 {
		t.Fatal("early tracker kept after open")
	}
	got, v := early.feed(c, stream[3:])
	if got != s || v != frameEmpty {
		t.Fatalf("after open: %p %v, want the session and frameEmpty", got, v)
	}

	bad := new(nbws.Conn)
	if _, v := early.feed(bad, clientFrame(1, true, false, []byte("x"))); v != frameDead {
		t.Fatalf("early violation: %v, want frameDead (reported by open)", v)
	}
	tr2 := &wsTransport{}
	if _, v := early.open(bad, &session{tr: tr2}, tr2); v != frameUnmasked {
		t.Fatalf("open after an early violation: %v, want frameUnmasked", v)
	}

	gone := new(nbws.Conn)
	_, _ = early.feed(gone, stream[:1])
	early.forget(gone)
	if len(early.m) != 0 {
		t.Fatal("forget kept the tracker")
	}
}
