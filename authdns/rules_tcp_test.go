package authdns

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/corralhq/corral/internal/testkit"
)

// tcpAsk sends one query on c and reads one answer; it returns an error
// when the server closes the connection instead.
func tcpAsk(c net.Conn, name string) (*dns.Msg, error) {
	q := mkQuery(name, dns.TypeA, nil)
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.Write(append(binary.BigEndian.AppendUint16(nil, uint16(len(q))), q...)); err != nil {
		return nil, err
	}
	var lb [2]byte
	if _, err := io.ReadFull(c, lb[:]); err != nil {
		return nil, err
	}
	b := make([]byte, binary.BigEndian.Uint16(lb[:]))
	if _, err := io.ReadFull(c, b); err != nil {
		return nil, err
	}
	m := new(dns.Msg)
	return m, m.Unpack(b)
}

// TestMaxTCPConns: with max_tcp_conns 2, a third connection is closed
// without an answer while two are open, and is served once one closes.
func TestMaxTCPConns(t *testing.T) {
	cfg := decodeConfig(t, testZone)
	cfg.MaxTCPConns = 2
	_, addr := startConfig(t, cfg, Options{})
	var open []net.Conn
	for i := range 2 {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if _, err := tcpAsk(c, "static.corral.test"); err != nil {
			t.Fatalf("connection %d of 2: %v", i+1, err)
		}
		open = append(open, c)
	}
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	if r, err := tcpAsk(c, "static.corral.test"); err == nil {
		t.Fatalf("a third connection over max_tcp_conns 2 was answered: %v", r)
	}
	_ = c.Close()
	_ = open[0].Close()
	testkit.WaitFor(t, 10*time.Second, "a new connection to be served after one of 2 closed", func() bool {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			return false
		}
		defer c.Close()
		_, err = tcpAsk(c, "static.corral.test")
		return err == nil
	})
}

// TestAXFRChunks: a zone larger than a TCP message (100 KB of TXT) is
// transferred in messages of at most 16 KiB, every record once, between
// the two SOAs.
func TestAXFRChunks(t *testing.T) {
	var b strings.Builder
	b.WriteString("listen: 127.0.0.1:0\nrrl: {enabled: false}\naxfr_allow: [127.0.0.1]\nzones:\n  - origin: corral.test\n    ns: [ns1.corral.test]\n    records:\n")
	const sets = 500
	for i := range sets {
		fmt.Fprintf(&b, "      - {name: t%d, type: TXT, values: [%q]}\n", i, strings.Repeat("x", 200))
	}
	s, err := New(decodeConfig(t, b.String()), Options{})
	if err != nil {
		t.Fatal(err)
	}
	w := newWorker(s, &stats{}, 1)
	if _, o := w.handle(mkQuery("corral.test", dns.TypeAXFR, nil), loopback, true, make([]byte, 0, 70000)); o != outTransfer {
		t.Fatalf("AXFR over TCP from 127.0.0.1: outcome %d, want a transfer", o)
	}
	server, client := net.Pipe()
	errc := make(chan error, 1)
	go func() {
		err := w.transfer(server, &w.q, nil, loopback) // no TSIG required: the request is not read again
		_ = server.Close()
		errc <- err
	}()
	_ = client.SetDeadline(time.Now().Add(30 * time.Second))
	var rrs []dns.RR
	msgs := 0
	for {
		var lb [2]byte
		if _, err := io.ReadFull(client, lb[:]); err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			t.Fatal(err)
		}
		msg := make([]byte, binary.BigEndian.Uint16(lb[:]))
		if _, err := io.ReadFull(client, msg); err != nil {
			t.Fatal(err)
		}
		if len(msg) > 16*1024 {
			t.Errorf("message %d is %d bytes, over 16 KiB", msgs, len(msg))
		}
		var m dns.Msg
		if err := m.Unpack(msg); err != nil {
			t.Fatalf("message %d: %v", msgs, err)
		}
		if m.Rcode != dns.RcodeSuccess || !m.Authoritative || m.IsEdns0() != nil {
			t.Errorf("message %d: rcode %s aa %v opt %v, want NOERROR, AA and no OPT", msgs, dns.RcodeToString[m.Rcode], m.Authoritative, m.IsEdns0())
		}
		msgs++
		rrs = append(rrs, m.Answer...)
	}
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	// SOA, NS, the 500 TXT, SOA.
	if msgs < 7 || len(rrs) != sets+3 || rrs[0].Header().Rrtype != dns.TypeSOA || rrs[len(rrs)-1].Header().Rrtype != dns.TypeSOA {
		t.Fatalf("%d records in %d messages, want %d from SOA to SOA in at least 7", len(rrs), msgs, sets+3)
	}
	seen := map[string]bool{}
	for _, rr := range rrs[1 : len(rrs)-1] {
		k := rr.Header().Name + dns.TypeToString[rr.Header().Rrtype]
		if seen[k] {
			t.Errorf("%s sent twice", k)
		}
		seen[k] = true
	}
}
