package authdns

import (
	"encoding/binary"
	"io"
	"net"
	"testing"
	"time"

	"github.com/miekg/dns"
)

// TestTCPPipeliningAndIdleClose sends three queries back to back on one
// connection, reads three answers in order, then waits for the server to
// close the idle connection.
func TestTCPPipeliningAndIdleClose(t *testing.T) {
	cfg := decodeConfig(t, testZone)
	cfg.TCPIdle = 100 * time.Millisecond
	_, addr := startConfig(t, cfg, Options{})
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	names := []string{"static.corral.test", "multi.corral.test", "nope.corral.test"}
	var out []byte
	for i, n := range names {
		q := mkQuery(n, dns.TypeA, func(m *dns.Msg) { m.Id = uint16(100 + i) })
		out = binary.BigEndian.AppendUint16(out, uint16(len(q)))
		out = append(out, q...)
	}
	if _, err := c.Write(out); err != nil {
		t.Fatal(err)
	}
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	for i, want := range []int{2, 8, 0} {
		var lb [2]byte
		if _, err := io.ReadFull(c, lb[:]); err != nil {
			t.Fatal(err)
		}
		b := make([]byte, binary.BigEndian.Uint16(lb[:]))
		if _, err := io.ReadFull(c, b); err != nil {
			t.Fatal(err)
		}
		var m dns.Msg
		if err := m.Unpack(b); err != nil {
			t.Fatal(err)
		}
		if m.Id != uint16(100+i) || len(m.Answer) != want {
			t.Errorf("answer %d: id %d with %d records, want id %d with %d", i, m.Id, len(m.Answer), 100+i, want)
		}
	}
	// The server closes the connection once it has been idle for tcp_idle.
	if _, err := c.Read(make([]byte, 1)); err != io.EOF {
		t.Errorf("idle connection: read returned %v, want EOF from the server", err)
	}
}
