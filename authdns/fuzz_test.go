package authdns

import (
	"encoding/binary"
	"testing"

	"github.com/miekg/dns"

	"github.com/corralhq/corral/internal/testkit"
)

// FuzzHandle feeds arbitrary packets to the query path over UDP and TCP
// rules, on a server with the default edns_buffer (1232) and one with 700.
// It must never panic (a panic the query path recovers fails the target
// too), never answer a packet shorter than a header or one with QR set, and
// every answer must parse with header counts that match its records, echo
// the ID, be a response, carry no record when TC is set, and fit the
// negotiated UDP size: the client's EDNS size (at least 512) capped by
// edns_buffer, 512 without EDNS. The client's size is read by readMiekg
// (miekg/dns), not by the parser under test. The seeds are in
// testdata/fuzz/FuzzHandle (see seedPackets).
func FuzzHandle(f *testing.F) {
	var logs testkit.SyncBuffer
	type target struct {
		w   *worker
		st  *stats
		buf int
	}
	var targets []target
	for _, buf := range []int{DefaultEDNSBuffer, 700} {
		cfg := decodeConfig(f, rulesZone())
		cfg.EDNSBuffer = buf
		s, err := New(cfg, Options{Logger: testLogger(&logs)})
		if err != nil {
			f.Fatal(err)
		}
		st := &stats{}
		targets = append(targets, target{newWorker(s, st, 1), st, buf})
	}
	out := make([]byte, 0, 70000)
	f.Fuzz(func(t *testing.T, req []byte) {
		rd := readMiekg(req)
		for _, tg := range targets {
			for _, tcp := range []bool{false, true} {
				panics := tg.st.panics.Load()
				resp, o := tg.w.handle(req, loopback, tcp, out)
				if tg.st.panics.Load() != panics {
					t.Fatalf("the query path panicked on %x:\n%s", req, logs.String())
				}
				garbage := len(req) < 12 || req[2]&0x80 != 0
				if garbage && o != outDrop {
					t.Fatalf("answered a packet without a valid query header: %x", req)
				}
				if o != outAnswer {
					continue
				}
				limit := 65535
				if !tcp {
					limit = 512
					if rd.edns && rd.v != vFormErr {
						limit = min(max(int(rd.udpSize), 512), tg.buf)
					}
				}
				if len(resp) > limit {
					t.Fatalf("answer of %d bytes over the negotiated %d (tcp %v, edns_buffer %d) to %x", len(resp), limit, tcp, tg.buf, req)
				}
				if binary.BigEndian.Uint16(resp) != binary.BigEndian.Uint16(req) || resp[2]&0x80 == 0 {
					t.Fatalf("answer does not echo the ID or lacks QR")
				}
				var m dns.Msg
				if err := m.Unpack(resp); err != nil {
					t.Fatalf("unparseable answer %x to %x: %v", resp, req, err)
				}
				an, ns, ar := binary.BigEndian.Uint16(resp[6:]), binary.BigEndian.Uint16(resp[8:]), binary.BigEndian.Uint16(resp[10:])
				if int(an) != len(m.Answer) || int(ns) != len(m.Ns) || int(ar) != len(m.Extra) {
					t.Fatalf("header counts %d/%d/%d, records %d/%d/%d in %x", an, ns, ar, len(m.Answer), len(m.Ns), len(m.Extra), resp)
				}
				if m.Truncated && len(m.Answer)+len(m.Ns) > 0 {
					t.Fatalf("TC with %d records", len(m.Answer)+len(m.Ns))
				}
			}
		}
	})
}
