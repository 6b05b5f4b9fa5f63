package authdns

import (
	"testing"

	"github.com/miekg/dns"
)

// nestedZones serves corral.test and, inside it, sub.corral.test. The
// parent also has records at and below the child's apex, which the child
// occludes: a query for them is answered from the child zone.
const nestedZones = `
listen: 127.0.0.1:0
rrl: {enabled: false}
zones:
  - origin: corral.test
    ns: [ns1.corral.test]
    records:
      - {name: ns1, type: A, values: [192.0.2.53]}
      - {name: www, type: A, values: [192.0.2.1]}
      - {name: x.sub, type: A, values: [192.0.2.9]}
      - {name: sub, type: TXT, values: [parent]}
  - origin: sub.corral.test
    ns: [ns1.corral.test]
    records:
      - {name: y, type: A, values: [192.0.2.10]}
`

// TestExactNamesFollowTheDeepestZone checks that the one-lookup path of
// exact names answers as the zone lookup does: from the deepest zone that
// holds the name, so records of a parent zone below a child's apex are
// not answered (NXDOMAIN, NODATA from the child), while the parent's own
// names and the child's are.
func TestExactNamesFollowTheDeepestZone(t *testing.T) {
	s, err := New(decodeConfig(t, nestedZones), Options{})
	if err != nil {
		t.Fatal(err)
	}
	w := newWorker(s, &stats{}, 1)
	for _, tc := range []struct {
		name    string
		qtype   uint16
		rcode   int
		answers int
		soa     string // owner of the SOA in the authority section, "" for none
	}{
		{name: "www.corral.test.", qtype: dns.TypeA, rcode: dns.RcodeSuccess, answers: 1},
		{name: "y.sub.corral.test.", qtype: dns.TypeA, rcode: dns.RcodeSuccess, answers: 1},
		{name: "x.sub.corral.test.", qtype: dns.TypeA, rcode: dns.RcodeNameError, soa: "sub.corral.test."},
		{name: "sub.corral.test.", qtype: dns.TypeTXT, rcode: dns.RcodeSuccess, soa: "sub.corral.test."},
		{name: "nope.corral.test.", qtype: dns.TypeA, rcode: dns.RcodeNameError, soa: "corral.test."},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, o := w.handle(mkQuery(tc.name, tc.qtype, nil), loopback, false, make([]byte, 0, 512))
			if o != outAnswer {
				t.Fatal("no answer")
			}
			var m dns.Msg
			if err := m.Unpack(resp); err != nil {
				t.Fatal(err)
			}
			soa := ""
			if len(m.Ns) == 1 {
				soa = m.Ns[0].Header().Name
			}
			if m.Rcode != tc.rcode || len(m.Answer) != tc.answers || soa != tc.soa {
				t.Errorf("got %s, %d answers, SOA of %q; want %s, %d answers, SOA of %q",
					dns.RcodeToString[m.Rcode], len(m.Answer), soa, dns.RcodeToString[tc.rcode], tc.answers, tc.soa)
			}
		})
	}
}
