package authdns

import (
	"encoding/binary"
	"testing"

	"github.com/miekg/dns"
)

// FuzzHandle feeds arbitrary packets to the query path over UDP and TCP
// rules: it must never panic, never answer a packet shorter than a header
// or one with QR set, and every answer must parse, echo the ID and be a
// response within the size limit.
func FuzzHandle(f *testing.F) {
	for _, q := range []struct {
		name string
		t    uint16
		edit func(*dns.Msg)
	}{
		{"static.corral.test", dns.TypeA, nil},
		{"multi.corral.test", dns.TypeA, func(m *dns.Msg) { m.SetEdns0(1232, true) }},
		{"acme.tenants.corral.test", dns.TypeA, nil},
		{"geo.corral.test", dns.TypeA, func(m *dns.Msg) {
			m.SetEdns0(1232, false)
			m.IsEdns0().Option = append(m.IsEdns0().Option, &dns.EDNS0_SUBNET{Code: dns.EDNS0SUBNET, Family: 1, SourceNetmask: 24, Address: netParse("10.9.1.0")})
		}},
		{"www.corral.test", dns.TypeANY, nil},
		{"corral.test", dns.TypeAXFR, nil},
		{"big.corral.test", dns.TypeTXT, nil},
	} {
		f.Add(mkQuery(q.name, q.t, q.edit))
	}
	f.Add([]byte{})
	f.Add(make([]byte, 12))
	s, err := New(decodeConfig(f, testZone), Options{})
	if err != nil {
		f.Fatal(err)
	}
	w := newWorker(s, &stats{}, 1)
	out := make([]byte, 0, 70000)
	f.Fuzz(func(t *testing.T, req []byte) {
		for _, tcp := range []bool{false, true} {
			resp, o := w.handle(req, loopback, tcp, out)
			garbage := len(req) < 12 || req[2]&0x80 != 0
			if garbage && o != outDrop {
				t.Fatalf("answered a packet without a valid query header: %x", req)
			}
			if o != outAnswer {
				continue
			}
			if !tcp && len(resp) > 4096 {
				t.Fatalf("UDP answer of %d bytes", len(resp))
			}
			if binary.BigEndian.Uint16(resp) != binary.BigEndian.Uint16(req) || resp[2]&0x80 == 0 {
				t.Fatalf("answer does not echo the ID or lacks QR")
			}
			var m dns.Msg
			if err := m.Unpack(resp); err != nil {
				t.Fatalf("unparseable answer %x to %x: %v", resp, req, err)
			}
		}
	})
}
