package testkit

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"net/http"
	"testing"
	"time"
)

// A bare WebSocket client for tests of the servers' framing: it writes the
// bytes it is given, masked or not, which no WebSocket library would.

// WSClientFrame builds one client frame: opcode, FIN, the mask bit,
// payload. The masking key is zero, so the payload goes out as given.
func WSClientFrame(op byte, fin, masked bool, payload []byte) []byte {
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

// Cat joins byte slices (frames into one write).
func Cat(parts ...[]byte) []byte {
	var out []byte
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

// ReadWSFrame reads one unmasked server frame: its opcode and payload.
func ReadWSFrame(r *bufio.Reader) (byte, []byte, error) {
	var h [2]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		return 0, nil, err
	}
	n := uint64(h[1] & 0x7f)
	switch n {
	case 126:
		var b [2]byte
		if _, err := io.ReadFull(r, b[:]); err != nil {
			return 0, nil, err
		}
		n = uint64(binary.BigEndian.Uint16(b[:]))
	case 127:
		var b [8]byte
		if _, err := io.ReadFull(r, b[:]); err != nil {
			return 0, nil, err
		}
		n = binary.BigEndian.Uint64(b[:])
	}
	if n > 1<<24 {
		return 0, nil, fmt.Errorf("testkit: a server frame of %d bytes", n)
	}
	p := make([]byte, n)
	if _, err := io.ReadFull(r, p); err != nil {
		return 0, nil, err
	}
	return h[0] & 0x0f, p, nil
}

// WSUpgradeRequest is the head of an upgrade of path offering subprotocol.
func WSUpgradeRequest(path, subprotocol string) string {
	return "GET " + path + " HTTP/1.1\r\nHost: corral\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n" +
		"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n" +
		"Sec-WebSocket-Protocol: " + subprotocol + "\r\n\r\n"
}

// UpgradeWS writes the upgrade of path offering subprotocol on c and
// reads the answer; anything but 101 is an error. Frames follow on the
// reader.
func UpgradeWS(c net.Conn, path, subprotocol string) (*bufio.Reader, error) {
	if _, err := io.WriteString(c, WSUpgradeRequest(path, subprotocol)); err != nil {
		return nil, err
	}
	r := bufio.NewReader(c)
	resp, err := http.ReadResponse(r, nil)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusSwitchingProtocols {
		return nil, fmt.Errorf("testkit: handshake answered %s", resp.Status)
	}
	return r, nil
}

// DialWS connects to addr and upgrades (UpgradeWS), failing the test
// otherwise; the connection has a 20 s deadline and is closed at the end
// of the test.
func DialWS(t testing.TB, addr, path, subprotocol string) (net.Conn, *bufio.Reader) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	_ = c.SetDeadline(time.Now().Add(20 * time.Second))
	r, err := UpgradeWS(c, path, subprotocol)
	if err != nil {
		t.Fatal(err)
	}
	return c, r
}
