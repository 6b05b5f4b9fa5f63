package authdns

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/miekg/dns"
)

// extraZone has NS, MX and SRV records whose targets are, or are not, in
// the served zones.
var extraZone = `
listen: 127.0.0.1:0
rrl: {enabled: false}
zones:
  - origin: corral.test
    ns: [ns1.corral.test, ns2.corral.test, ns.example.net.]
    records:
      - {name: ns1, type: A, values: [192.0.2.53]}
      - {name: ns1, type: AAAA, values: ["2001:db8::53"]}
      - {name: ns2, type: A, values: [192.0.2.54]}
      - {name: "@", type: MX, values: ["10 mail", "20 Mail", "30 mx.example.net."]}
      - {name: mail, type: A, values: [192.0.2.25]}
      - {name: _s._tcp, type: SRV, values: ["1 1 443 svc", "1 1 443 gone"]}
      - {name: svc, type: AAAA, values: ["2001:db8::443"]}
      - {name: "*.w", type: A, values: [192.0.2.80]}
      - {name: _w._tcp, type: SRV, values: ["1 1 80 x.w"]}
      - {name: many, type: MX, values: [` + manyMX() + `]}
` + manyHosts()

// manyMX is 12 MX values whose hosts have 3 addresses each: the answer
// fits in 512 bytes, its additional addresses do not.
func manyMX() string {
	var v []string
	for i := range 12 {
		v = append(v, fmt.Sprintf(`"%d h%d"`, i, i))
	}
	return strings.Join(v, ", ")
}

func manyHosts() string {
	var b strings.Builder
	for i := range 12 {
		fmt.Fprintf(&b, "      - {name: h%d, type: A, values: [10.0.%d.1, 10.0.%d.2, 10.0.%d.3]}\n", i, i, i, i)
	}
	return b.String()
}

// extraData renders the additional section of r without OPT.
func extraData(r *dns.Msg) []string {
	var out []string
	for _, rr := range r.Extra {
		if rr.Header().Rrtype == dns.TypeOPT {
			continue
		}
		f := strings.Fields(rr.String())
		out = append(out, f[0]+" "+f[3]+" "+f[4])
	}
	return out
}

// TestAdditionalAddresses checks RFC 1034 4.3.2 step 6: NS, MX and SRV
// answers carry the addresses of their targets that the server has, A
// before AAAA, each name once, none for names elsewhere.
func TestAdditionalAddresses(t *testing.T) {
	s := newServerText(t, extraZone)
	tests := []struct {
		name  string
		qname string
		qtype uint16
		want  []string
	}{
		{"NS glue of in-zone name servers", "corral.test", dns.TypeNS, []string{
			"ns1.corral.test. A 192.0.2.53", "ns1.corral.test. AAAA 2001:db8::53", "ns2.corral.test. A 192.0.2.54"}},
		{"MX: one exchange named twice, once", "corral.test", dns.TypeMX, []string{"mail.corral.test. A 192.0.2.25"}},
		{"SRV: the target there, not the one missing", "_s._tcp.corral.test", dns.TypeSRV, []string{"svc.corral.test. AAAA 2001:db8::443"}},
		{"SRV target under a wildcard", "_w._tcp.corral.test", dns.TypeSRV, []string{"x.w.corral.test. A 192.0.2.80"}},
		{"A: nothing", "mail.corral.test", dns.TypeA, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			for _, tcp := range []bool{false, true} {
				r, _ := handleRaw(t, s, mkQuery(tc.qname, tc.qtype, func(m *dns.Msg) { m.SetEdns0(1232, false) }), tcp)
				got := extraData(r)
				if tc.qtype == dns.TypeNS {
					// The order of the answer decides the order of the glue.
					slices.Sort(got)
				}
				if !slices.Equal(got, tc.want) || r.Truncated || r.Rcode != dns.RcodeSuccess {
					t.Errorf("tcp %v: additional %q (tc %v), want %q", tcp, got, r.Truncated, tc.want)
				}
			}
		})
	}
}

// TestAdditionalLeftOutBeforeTruncating fills a 512-byte response: the
// whole answer goes in, as many addresses as fit, and no TC.
func TestAdditionalLeftOutBeforeTruncating(t *testing.T) {
	s := newServerText(t, extraZone)
	req := mkQuery("many.corral.test", dns.TypeMX, nil)
	w := newWorker(s, &stats{}, 1)
	resp, _ := w.handle(req, loopback, false, make([]byte, 0, 4096))
	r := new(dns.Msg)
	if err := r.Unpack(resp); err != nil {
		t.Fatal(err)
	}
	if len(resp) > 512 || r.Truncated || len(r.Answer) != 12 {
		t.Fatalf("%d bytes, tc %v, %d answers; want at most 512 bytes, no TC, the 12 MX", len(resp), r.Truncated, len(r.Answer))
	}
	if len(r.Extra) == 0 || len(r.Extra) >= 36 {
		t.Errorf("%d additional records, want some of the 36 addresses, as many as fit", len(r.Extra))
	}
	// Over TCP all of them fit.
	r, _ = handleRaw(t, s, req, true)
	if len(r.Extra) != 36 {
		t.Errorf("TCP: %d additional records, want 36", len(r.Extra))
	}
}

// newServerText builds (does not run) a server for the YAML text.
func newServerText(t *testing.T, text string) *Server {
	t.Helper()
	s, err := New(decodeConfig(t, text), Options{})
	if err != nil {
		t.Fatal(err)
	}
	return s
}
