package authdns

import (
	"testing"

	"github.com/miekg/dns"
)

// TestQueryTypeZeroIsNotImplemented: type 0 is reserved; Knot answers
// NOTIMP without AA, in a zone or not, and so does corral (it answered
// NOERROR).
func TestQueryTypeZeroIsNotImplemented(t *testing.T) {
	s := newTestServer(t)
	for _, name := range []string{"static.corral.test", "corral.test", "nope.corral.test", "example.org"} {
		for _, edns := range []bool{false, true} {
			r, _ := handleRaw(t, s, mkQuery(name, 0, func(m *dns.Msg) {
				if edns {
					m.SetEdns0(1232, false)
				}
			}), false)
			if r.Rcode != dns.RcodeNotImplemented || r.Authoritative || len(r.Answer)+len(r.Ns) != 0 || (r.IsEdns0() != nil) != edns {
				t.Errorf("%s TYPE0 (EDNS %v): %s aa %v, %d records, OPT %v; want NOTIMP, no AA, no records, the OPT echoed", name, edns, dns.RcodeToString[r.Rcode], r.Authoritative, len(r.Answer)+len(r.Ns), r.IsEdns0() != nil)
			}
		}
	}
}
