package hub

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/corralhq/corral/wire"
)

// conformResult runs one case of bench/wslib's conformance list against
// the hub: it sends the frames, then reads the expected frames (opcode and
// payload) and, when closeCode is set, a close frame. It returns "OK",
// "NON-STRICT: ..." (refused, but without the close code the RFC asks for)
// or "FAIL: ...", as the harness grades.
func conformResult(w *rawTCPWS, send []byte, frames [][2]any, closeCode wire.CloseCode) string {
	_ = w.c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := w.c.Write(send); err != nil {
		return "FAIL: write: " + err.Error()
	}
	read := func() (byte, []byte, error) {
		var h [2]byte
		if _, err := io.ReadFull(w.r, h[:]); err != nil {
			return 0, nil, err
		}
		n := int(h[1] & 0x7f)
		if n == 126 {
			var b [2]byte
			if _, err := io.ReadFull(w.r, b[:]); err != nil {
				return 0, nil, err
			}
			n = int(binary.BigEndian.Uint16(b[:]))
		}
		p := make([]byte, n)
		_, err := io.ReadFull(w.r, p)
		return h[0] & 0x0f, p, err
	}
	for i, f := range frames {
		op, p, err := read()
		if err != nil {
			return fmt.Sprintf("FAIL: frame %d: %v", i+1, err)
		}
		if op != f[0].(byte) || !bytes.Equal(p, f[1].([]byte)) {
			return fmt.Sprintf("FAIL: frame %d: op %#x %q", i+1, op, p)
		}
	}
	if closeCode == 0 {
		return "OK"
	}
	op, p, err := read()
	var ne net.Error
	switch {
	case errors.As(err, &ne) && ne.Timeout():
		return fmt.Sprintf("FAIL: no close (want %d)", closeCode)
	case err != nil:
		return fmt.Sprintf("NON-STRICT: dropped without a close frame (want %d)", closeCode)
	case op != 8:
		return fmt.Sprintf("FAIL: op %#x, want close %d", op, closeCode)
	case len(p) < 2:
		return fmt.Sprintf("NON-STRICT: close without a code (want %d)", closeCode)
	}
	if got := wire.CloseCode(binary.BigEndian.Uint16(p)); got != closeCode {
		return fmt.Sprintf("NON-STRICT: close %d, want %d", got, closeCode)
	}
	return "OK"
}

// TestWSConformance runs the cases of bench/wslib conform that apply to a
// hub (not the echo cases: the hub answers corral frames, not echoes)
// against a running hub. Every case must pass strictly: nbio alone fails
// 3 and 14 and drops the connection without a close frame on 15-20 (17
// with 1009); the hub's frame tracker (wsframes.go) closes those with 1002
// (docs/benchmarks.md, section Conformance; run with -v to see them).
func TestWSConformance(t *testing.T) {
	const limit = 4096
	th := startHub(t, func(c *Config, _ *Options) { c.Wire.MaxFrameBytes = limit })
	m := func(op byte, fin bool, p string) []byte { return clientFrame(op, fin, true, []byte(p)) }
	closeP := func(code uint16) string { return string(binary.BigEndian.AppendUint16(nil, code)) }
	rsv1 := m(1, true, "x")
	rsv1[0] |= 0x40
	half := strings.Repeat("c", limit/2+500)
	tests := []struct {
		name   string
		proto  string
		send   []byte
		frames [][2]any
		close  wire.CloseCode
	}{
		{"3 empty text message -> 1002 (corral)", wire.SubprotocolJSON, m(1, true, ""), nil, 1002},
		{"3b empty binary message -> 1002 (corral)", wire.SubprotocolProto, m(2, true, ""), nil, 1002},
		{"6 ping payload echoed in pong", wire.SubprotocolProto, m(9, true, "xyz"), [][2]any{{byte(10), []byte("xyz")}}, 0},
		{"8 close handshake echoes 1000", wire.SubprotocolProto, m(8, true, closeP(1000)+"bye"), nil, 1000},
		{"9 message over the limit -> 1009", wire.SubprotocolProto, m(2, true, strings.Repeat("b", limit+1000)), nil, 1009},
		{"10 fragmented message over the limit -> 1009", wire.SubprotocolProto, cat(m(2, false, half), m(0, true, half)), nil, 1009},
		{"11 invalid UTF-8 text -> 1007", wire.SubprotocolJSON, m(1, true, "\xff\xfe"), nil, 1007},
		{"12 invalid UTF-8 across fragments -> 1007", wire.SubprotocolJSON, cat(m(1, false, "ok"), m(0, true, "\xc3\x28")), nil, 1007},
		{"14 unmasked client frame -> 1002", wire.SubprotocolJSON, clientFrame(1, true, false, []byte("x")), nil, 1002},
		{"15 RSV1 without extension -> 1002", wire.SubprotocolJSON, rsv1, nil, 1002},
		{"16 reserved opcode 3 -> 1002", wire.SubprotocolJSON, m(3, true, "x"), nil, 1002},
		{"17 ping with 126-byte payload -> 1002", wire.SubprotocolProto, m(9, true, strings.Repeat("p", 126)), nil, 1002},
		{"18 fragmented ping -> 1002", wire.SubprotocolProto, m(9, false, "p"), nil, 1002},
		{"19 continuation without a start -> 1002", wire.SubprotocolJSON, m(0, true, "x"), nil, 1002},
		{"20 new message inside a fragmented one -> 1002", wire.SubprotocolJSON, cat(m(1, false, "a"), m(1, true, "b")), nil, 1002},
		{"21 close with reserved code 1005 -> 1002", wire.SubprotocolProto, m(8, true, closeP(1005)), nil, 1002},
		{"22 close with a 1-byte payload -> 1002", wire.SubprotocolProto, m(8, true, "\x03"), nil, 1002},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			w := dialTCPWSProto(t, th, tc.proto)
			r := conformResult(w, tc.send, tc.frames, tc.close)
			t.Logf("%-48s %s", tc.name, r)
			if r != "OK" {
				t.Fatal(r)
			}
		})
	}
}
