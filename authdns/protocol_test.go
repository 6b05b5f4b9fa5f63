package authdns

import (
	"encoding/binary"
	"slices"
	"testing"

	"github.com/miekg/dns"
)

// handleMsg packs m, runs it through a worker of s and unpacks the answer
// (nil when the server stays silent).
func handleRaw(t *testing.T, s *Server, req []byte, tcp bool) (*dns.Msg, outcome) {
	t.Helper()
	w := newWorker(s, &stats{}, 1)
	resp, o := w.handle(req, loopback, tcp, make([]byte, 0, 70000))
	if o != outAnswer {
		return nil, o
	}
	r := new(dns.Msg)
	if err := r.Unpack(resp); err != nil {
		t.Fatalf("server sent an unparseable response: %v", err)
	}
	return r, o
}

func mkQuery(name string, qtype uint16, edit func(*dns.Msg)) []byte {
	m := new(dns.Msg)
	m.SetQuestion(dns.Fqdn(name), qtype)
	if edit != nil {
		edit(m)
	}
	b, err := m.Pack()
	if err != nil {
		panic(err)
	}
	return b
}

func newTestServer(t *testing.T) *Server {
	t.Helper()
	s, err := New(decodeConfig(t, testZone), Options{})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestProtocolCases(t *testing.T) {
	s := newTestServer(t)
	edns := func(size uint16) func(*dns.Msg) { return func(m *dns.Msg) { m.SetEdns0(size, false) } }
	tests := []struct {
		name    string
		req     []byte
		tcp     bool
		rcode   int
		answers int
		ns      int // authority records
		tc      bool
		aa      bool
		check   func(t *testing.T, r *dns.Msg)
	}{
		{name: "A with 2 values", req: mkQuery("static.corral.test", dns.TypeA, nil), answers: 2, aa: true},
		{name: "case is preserved in the question", req: mkQuery("StAtIc.CoRrAl.TeSt", dns.TypeA, nil), answers: 2, aa: true, check: func(t *testing.T, r *dns.Msg) {
			if r.Question[0].Name != "StAtIc.CoRrAl.TeSt." {
				t.Errorf("question %q", r.Question[0].Name)
			}
		}},
		{name: "multivalue caps at 8", req: mkQuery("multi.corral.test", dns.TypeA, nil), answers: 8, aa: true},
		{name: "NXDOMAIN carries the SOA", req: mkQuery("nope.corral.test", dns.TypeA, nil), rcode: dns.RcodeNameError, ns: 1, aa: true, check: func(t *testing.T, r *dns.Msg) {
			soa, ok := r.Ns[0].(*dns.SOA)
			if !ok || soa.Hdr.Name != "corral.test." || soa.Hdr.Ttl != 30 || soa.Serial != 7 {
				t.Errorf("authority %v, want the zone SOA with the negative TTL 30", r.Ns)
			}
		}},
		{name: "NODATA carries the SOA", req: mkQuery("static.corral.test", dns.TypeAAAA, nil), ns: 1, aa: true},
		{name: "empty non-terminal is NODATA", req: mkQuery("tenants.corral.test", dns.TypeA, nil), ns: 1, aa: true},
		{name: "outside the zones is REFUSED", req: mkQuery("example.com", dns.TypeA, nil), rcode: dns.RcodeRefused},
		{name: "class CH is REFUSED", req: mkQuery("static.corral.test", dns.TypeA, func(m *dns.Msg) { m.Question[0].Qclass = dns.ClassCHAOS }), rcode: dns.RcodeRefused},
		{name: "unknown opcode is NOTIMP", req: mkQuery("static.corral.test", dns.TypeA, func(m *dns.Msg) { m.Opcode = dns.OpcodeUpdate }), rcode: dns.RcodeNotImplemented},
		{name: "notify is NOTIMP", req: mkQuery("corral.test", dns.TypeSOA, func(m *dns.Msg) { m.Opcode = dns.OpcodeNotify }), rcode: dns.RcodeNotImplemented},
		{name: "NOTIMP echoes EDNS", req: mkQuery("corral.test", dns.TypeSOA, func(m *dns.Msg) { m.Opcode = dns.OpcodeNotify; m.SetEdns0(1232, false) }), rcode: dns.RcodeNotImplemented, check: func(t *testing.T, r *dns.Msg) {
			if r.IsEdns0() == nil {
				t.Error("NOTIMP to an EDNS query without OPT")
			}
		}},
		{name: "EDNS version 1 is BADVERS", req: mkQuery("static.corral.test", dns.TypeA, func(m *dns.Msg) { m.SetEdns0(1232, false); m.IsEdns0().SetVersion(1) }), rcode: dns.RcodeBadVers, check: func(t *testing.T, r *dns.Msg) {
			if r.IsEdns0() == nil {
				t.Error("BADVERS without OPT")
			}
		}},
		{name: "EDNS buffer advertised is 1232", req: mkQuery("static.corral.test", dns.TypeA, edns(4096)), answers: 2, aa: true, check: func(t *testing.T, r *dns.Msg) {
			if o := r.IsEdns0(); o == nil || o.UDPSize() != 1232 {
				t.Errorf("OPT %v, want udp 1232", o)
			}
		}},
		{name: "without EDNS a big answer is truncated", req: mkQuery("big.corral.test", dns.TypeTXT, nil), tc: true, aa: true},
		{name: "with EDNS the big answer fits", req: mkQuery("big.corral.test", dns.TypeTXT, edns(1232)), answers: 2, aa: true},
		{name: "EDNS 512 still truncates", req: mkQuery("big.corral.test", dns.TypeTXT, edns(512)), tc: true, aa: true},
		{name: "TCP carries the big answer without EDNS", req: mkQuery("big.corral.test", dns.TypeTXT, nil), tcp: true, answers: 2, aa: true},
		{name: "ANY gets one RRset (RFC 8482)", req: mkQuery("corral.test", dns.TypeANY, nil), answers: 1, aa: true},
		{name: "CNAME is followed inside the zone", req: mkQuery("www.corral.test", dns.TypeA, nil), answers: 3, aa: true, check: func(t *testing.T, r *dns.Msg) {
			if _, ok := r.Answer[0].(*dns.CNAME); !ok || r.Answer[1].Header().Name != "static.corral.test." {
				t.Errorf("answers %v", r.Answer)
			}
		}},
		{name: "CNAME out of zone is answered alone", req: mkQuery("away.corral.test", dns.TypeA, nil), answers: 1, aa: true},
		{name: "wildcard answers a tenant's hand", req: mkQuery("acme.tenants.corral.test", dns.TypeA, nil), answers: 4, aa: true, check: func(t *testing.T, r *dns.Msg) {
			if r.Answer[0].Header().Name != "acme.tenants.corral.test." {
				t.Errorf("owner %q", r.Answer[0].Header().Name)
			}
		}},
		{name: "MX", req: mkQuery("corral.test", dns.TypeMX, nil), answers: 1, aa: true, check: func(t *testing.T, r *dns.Msg) {
			if mx := r.Answer[0].(*dns.MX); mx.Mx != "mail.corral.test." || mx.Preference != 10 {
				t.Errorf("MX %v", mx)
			}
		}},
		{name: "SRV", req: mkQuery("_x._tcp.corral.test", dns.TypeSRV, nil), answers: 1, aa: true, check: func(t *testing.T, r *dns.Msg) {
			if srv := r.Answer[0].(*dns.SRV); srv.Target != "static.corral.test." || srv.Port != 443 || srv.Weight != 2 {
				t.Errorf("SRV %v", srv)
			}
		}},
		{name: "CAA", req: mkQuery("corral.test", dns.TypeCAA, nil), answers: 1, aa: true, check: func(t *testing.T, r *dns.Msg) {
			if caa := r.Answer[0].(*dns.CAA); caa.Tag != "issue" || caa.Value != "ca.example" {
				t.Errorf("CAA %v", caa)
			}
		}},
		{name: "AAAA", req: mkQuery("six.corral.test", dns.TypeAAAA, nil), answers: 1, aa: true},
		{name: "NS at the apex", req: mkQuery("corral.test", dns.TypeNS, nil), answers: 1, aa: true},
		{name: "AXFR over UDP is refused", req: mkQuery("corral.test", dns.TypeAXFR, nil), rcode: dns.RcodeRefused},
		{name: "no question is FORMERR", req: func() []byte {
			b := mkQuery("static.corral.test", dns.TypeA, nil)
			binary.BigEndian.PutUint16(b[4:], 0)
			return b[:12]
		}(), rcode: dns.RcodeFormatError},
		{name: "two questions is FORMERR", req: func() []byte {
			b := mkQuery("static.corral.test", dns.TypeA, nil)
			binary.BigEndian.PutUint16(b[4:], 2)
			return b
		}(), rcode: dns.RcodeFormatError},
		{name: "truncated question is FORMERR", req: mkQuery("static.corral.test", dns.TypeA, nil)[:20], rcode: dns.RcodeFormatError},
		{name: "bad client subnet is FORMERR", req: mkQuery("geo.corral.test", dns.TypeA, func(m *dns.Msg) {
			m.SetEdns0(1232, false)
			m.IsEdns0().Option = append(m.IsEdns0().Option, &dns.EDNS0_LOCAL{Code: dns.EDNS0SUBNET, Data: []byte{0, 3, 8, 0, 10}})
		}), rcode: dns.RcodeFormatError},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r, o := handleRaw(t, s, tc.req, tc.tcp)
			if o != outAnswer {
				t.Fatalf("no answer (outcome %d)", o)
			}
			if r.Rcode != tc.rcode || len(r.Answer) != tc.answers || len(r.Ns) != tc.ns || r.Truncated != tc.tc || r.Authoritative != tc.aa {
				t.Fatalf("rcode %s answers %d authority %d tc %v aa %v; want %s %d %d %v %v\n%v",
					dns.RcodeToString[r.Rcode], len(r.Answer), len(r.Ns), r.Truncated, r.Authoritative,
					dns.RcodeToString[tc.rcode], tc.answers, tc.ns, tc.tc, tc.aa, r)
			}
			if !r.Response {
				t.Error("QR not set")
			}
			if tc.check != nil {
				tc.check(t, r)
			}
		})
	}
}

func TestSilenceOnGarbageHeaders(t *testing.T) {
	s := newTestServer(t)
	resp := mkQuery("static.corral.test", dns.TypeA, nil)
	resp[2] |= 0x80 // QR: a response
	for _, req := range [][]byte{nil, {0}, []byte("hello world"), make([]byte, 11), resp} {
		if r, o := handleRaw(t, s, req, false); o != outDrop || r != nil {
			t.Errorf("%q: answered %v", req, r)
		}
	}
}

func TestClientSubnetPicksLocationAndScope(t *testing.T) {
	s := newTestServer(t)
	tests := []struct {
		name   string
		subnet string
		bits   uint8
		want   string
		scope  uint8
	}{
		{"eu subnet", "10.9.8.0", 24, "10.4.0.1", 16},
		{"us subnet", "172.20.0.0", 16, "10.4.0.2", 12},
		// 192.0.0.0/2 holds neither 10.9.0.0/16 nor 172.16.0.0/12.
		{"elsewhere", "192.0.2.0", 24, "10.4.0.3", 2},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r, _ := handleRaw(t, s, mkQuery("geo.corral.test", dns.TypeA, func(m *dns.Msg) {
				m.SetEdns0(1232, false)
				m.IsEdns0().Option = append(m.IsEdns0().Option, &dns.EDNS0_SUBNET{
					Code: dns.EDNS0SUBNET, Family: 1, SourceNetmask: tc.bits, Address: netParse(tc.subnet),
				})
			}), false)
			if got := answerData(r); !slices.Equal(got, []string{tc.want}) {
				t.Fatalf("answer %v, want %s", got, tc.want)
			}
			var ecs *dns.EDNS0_SUBNET
			for _, o := range r.IsEdns0().Option {
				if e, ok := o.(*dns.EDNS0_SUBNET); ok {
					ecs = e
				}
			}
			if ecs == nil || ecs.SourceScope != tc.scope || ecs.SourceNetmask != tc.bits {
				t.Errorf("ECS in answer %v, want scope %d", ecs, tc.scope)
			}
		})
	}
	// Without the option, the client's own address decides (127.0.0.1: default).
	r, _ := handleRaw(t, s, mkQuery("geo.corral.test", dns.TypeA, nil), false)
	if got := answerData(r); !slices.Equal(got, []string{"10.4.0.3"}) {
		t.Errorf("answer %v for the loopback client", got)
	}
}

func TestConfigErrorsNameTheKey(t *testing.T) {
	base := "listen: 127.0.0.1:0\nzones:\n  - origin: corral.test\n    ns: [ns1]\n    records:\n"
	tests := []struct {
		name, records, want string
	}{
		{"bad address", "      - {name: a, type: A, values: [300.1.1.1]}\n", "zones[0].records[0].values[0]"},
		{"unknown type", "      - {name: a, type: LOC, values: [x]}\n", "unsupported type"},
		{"unknown policy", "      - {name: a, type: A, policy: roundrobin, values: [1.2.3.4]}\n", "unknown policy"},
		{"unknown check", "      - {name: a, type: A, values: [{value: 1.2.3.4, check: nope}]}\n", "unknown health check"},
		{"weight on simple", "      - {name: a, type: A, values: [{value: 1.2.3.4, weight: 3}]}\n", "weight applies"},
		{"subset without n", "      - {name: a, type: A, policy: weighted-subset, values: [1.2.3.4]}\n", "needs n"},
		{"cname beside A", "      - {name: a, type: A, values: [1.2.3.4]}\n      - {name: a, type: CNAME, values: [b]}\n", "CNAME cannot share"},
		{"outside zone", "      - {name: a.example.com., type: A, values: [1.2.3.4]}\n", "outside the zone"},
		{"delegation", "      - {name: sub, type: NS, values: [ns.other.test.]}\n", "delegations are not supported"},
		{"shuffle secret", "      - {name: '*.t', type: A, policy: shuffle, shuffle: {secret: xx, hand_size: 1}, values: [1.2.3.4]}\n", "secret"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			wantConfigError(t, base+tc.records, tc.want, "dns.yaml:")
		})
	}
}
