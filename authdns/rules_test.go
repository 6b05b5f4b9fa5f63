package authdns

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
)

// rulesZone is testZone with the names the protocol rules of README.md
// need: CNAME chains of 8 and 9 hops, a failover CNAME with two primaries,
// a dangling CNAME, wildcards beside an existing name and an empty
// non-terminal, and a CNAME into a second served zone.
func rulesZone() string {
	var b strings.Builder
	b.WriteString(testZone)
	chain := func(prefix string, n int) {
		for i := 1; i <= n; i++ {
			next := fmt.Sprintf("%s-%d", prefix, i+1)
			if i == n {
				next = "static"
			}
			fmt.Fprintf(&b, "      - {name: %s-%d, type: CNAME, values: [%s]}\n", prefix, i, next)
		}
	}
	chain("hop8", 8)
	chain("hop9", 9)
	b.WriteString(`      - {name: fo, type: CNAME, policy: failover, values: [static, two]}
      - {name: two, type: A, values: [10.6.0.1, 10.6.0.2]}
      - {name: dangle, type: CNAME, values: [nowhere]}
      - {name: "*.w", type: A, values: [10.5.0.1]}
      - {name: x.w, type: A, values: [10.5.0.2]}
      - {name: deep.y.w, type: A, values: [10.5.0.3]}
      - {name: toother, type: CNAME, values: [x.other.test.]}
  - origin: other.test
    ns: [ns1.corral.test.]
    records:
      - {name: x, type: CNAME, values: [static.corral.test.]}
`)
	return b.String()
}

// ruleWant is what a rule expects of the answer to a query.
type ruleWant struct {
	drop      bool // no answer at all
	transfer  bool // handed to the zone transfer (TCP)
	rcode     int
	answers   int
	authority int
	tc, aa    bool
}

// TestProtocolRules has a row for each protocol rule authdns/README.md
// states (the rule is in the failure message); each row fails when its
// rule is taken out of the code. "What the tests pin" in README.md lists
// the mutations tried.
func TestProtocolRules(t *testing.T) {
	servers := map[string]*Server{
		"default": newRulesServer(t, nil),
		// edns_buffer 600: a client's 4096 must not lift the cap.
		"buffer600": newRulesServer(t, func(c *Config) { c.EDNSBuffer = 600 }),
	}
	zone := wireOf("corral.test")
	edns := func(size uint16) func(*dns.Msg) { return func(m *dns.Msg) { m.SetEdns0(size, false) } }
	withOpt := func(name string, qtype uint16, opts ...[]byte) []byte {
		return rawQuery(0, wireOf(name), qtype, optRR([]byte{0}, 1232, 0, opts...))
	}
	outsider := netip.MustParseAddr("10.20.30.40") // outside axfr_allow
	tests := []struct {
		rule   string // the README's rule
		name   string // what this row differs in
		server string // key of servers; "" is "default"
		req    []byte
		tcp    bool
		client netip.Addr // zero: 127.0.0.1
		want   ruleWant
		check  func(t *testing.T, r *dns.Msg)
	}{
		// Header.
		{rule: "no answer to packets shorter than a header", name: "11 bytes are dropped", req: make([]byte, 11), want: ruleWant{drop: true}},
		{rule: "no answer to packets with QR set", name: "a response is dropped", req: func() []byte {
			b := mkQuery("static.corral.test", dns.TypeA, nil)
			b[2] |= 0x80
			return b
		}(), want: ruleWant{drop: true}},
		{rule: "NOTIMP for opcodes other than QUERY", name: "UPDATE is NOTIMP", req: mkQuery("corral.test", dns.TypeSOA, func(m *dns.Msg) { m.Opcode = dns.OpcodeUpdate }), want: ruleWant{rcode: dns.RcodeNotImplemented}},
		{rule: "NOTIMP for opcodes other than QUERY", name: "opcode 3 without a question is NOTIMP, not FORMERR", req: withCounts(rawQuery(3<<11, zone, dns.TypeSOA), 0, 0, 0, 0)[:12], want: ruleWant{rcode: dns.RcodeNotImplemented}},
		{rule: "FORMERR for malformed questions", name: "no question", req: withCounts(rawQuery(0, zone, dns.TypeSOA), 0, 0, 0, 0)[:12], want: ruleWant{rcode: dns.RcodeFormatError}},
		{rule: "FORMERR for malformed questions", name: "two questions", req: withCounts(rawQuery(0, zone, dns.TypeSOA), 2, 0, 0, 0), want: ruleWant{rcode: dns.RcodeFormatError}},
		{rule: "the response echoes RD and CD", name: "RD and CD set", req: mkQuery("static.corral.test", dns.TypeA, func(m *dns.Msg) { m.RecursionDesired, m.CheckingDisabled = true, true }), want: ruleWant{answers: 2, aa: true}, check: func(t *testing.T, r *dns.Msg) {
			if !r.RecursionDesired || !r.CheckingDisabled || r.RecursionAvailable {
				t.Errorf("rd %v cd %v ra %v, want rd and cd echoed, no ra", r.RecursionDesired, r.CheckingDisabled, r.RecursionAvailable)
			}
		}},

		// Question.
		{rule: "FORMERR for malformed questions: no compression pointers in a question", name: "a pointer followed by 192 bytes that would read as a label", req: func() []byte {
			name := append([]byte{0xC0, 0x0C}, make([]byte, 191)...)
			return rawQuery(0, append(name, 0), dns.TypeA)
		}(), want: ruleWant{rcode: dns.RcodeFormatError}},
		{rule: "FORMERR for malformed questions: no compression pointers in a question", name: "a pointer to the header", req: rawQuery(0, []byte{0xC0, 0x0C}, dns.TypeA), want: ruleWant{rcode: dns.RcodeFormatError}},
		{rule: "FORMERR for malformed questions: label types 0x40 and 0x80 are reserved", name: "label byte 0x41", req: rawQuery(0, append([]byte{0x41}, make([]byte, 66)...), dns.TypeA), want: ruleWant{rcode: dns.RcodeFormatError}},
		{rule: "FORMERR for malformed questions: label types 0x40 and 0x80 are reserved", name: "label byte 0x81", req: rawQuery(0, append([]byte{0x81}, make([]byte, 130)...), dns.TypeA), want: ruleWant{rcode: dns.RcodeFormatError}},
		{rule: "FORMERR for malformed questions: names are at most 255 bytes", name: "a 255-byte name in the zone is answered", req: rawQuery(0, longName(255, zone), dns.TypeA), want: ruleWant{rcode: dns.RcodeNameError, authority: 1, aa: true}},
		{rule: "FORMERR for malformed questions: names are at most 255 bytes", name: "a 255-byte name under a wildcard gets the wildcard", req: rawQuery(0, longName(255, wireOf("w.corral.test")), dns.TypeA), want: ruleWant{answers: 1, aa: true}},
		{rule: "FORMERR for malformed questions: names are at most 255 bytes", name: "a 256-byte name", req: rawQuery(0, longName(256, zone), dns.TypeA), want: ruleWant{rcode: dns.RcodeFormatError}},
		{rule: "FORMERR for malformed questions: names are at most 255 bytes", name: "a 256-byte name under a wildcard", req: rawQuery(0, longName(256, wireOf("w.corral.test")), dns.TypeA), want: ruleWant{rcode: dns.RcodeFormatError}},
		{rule: "FORMERR for malformed questions: names are at most 255 bytes", name: "a 320-byte name", req: rawQuery(0, longName(320, zone), dns.TypeA), want: ruleWant{rcode: dns.RcodeFormatError}},
		{rule: "FORMERR for malformed questions", name: "the question ends inside qclass", req: mkQuery("static.corral.test", dns.TypeA, nil)[:12+20+3], want: ruleWant{rcode: dns.RcodeFormatError}},
		{rule: "FORMERR for malformed questions", name: "qtype OPT", req: mkQuery("static.corral.test", dns.TypeOPT, nil), want: ruleWant{rcode: dns.RcodeFormatError}},
		{rule: "the question is echoed with its case", name: "mixed case", req: mkQuery("StAtIc.CoRrAl.TeSt", dns.TypeA, nil), want: ruleWant{answers: 2, aa: true}, check: func(t *testing.T, r *dns.Msg) {
			if len(r.Question) != 1 || r.Question[0].Name != "StAtIc.CoRrAl.TeSt." {
				t.Errorf("question %v", r.Question)
			}
		}},
		{rule: "REFUSED for classes other than IN (ANY is IN here)", name: "class CH", req: mkQuery("static.corral.test", dns.TypeA, func(m *dns.Msg) { m.Question[0].Qclass = dns.ClassCHAOS }), want: ruleWant{rcode: dns.RcodeRefused}},
		{rule: "REFUSED for classes other than IN (ANY is IN here)", name: "class NONE", req: mkQuery("static.corral.test", dns.TypeA, func(m *dns.Msg) { m.Question[0].Qclass = dns.ClassNONE }), want: ruleWant{rcode: dns.RcodeRefused}},
		{rule: "REFUSED for classes other than IN (ANY is IN here)", name: "class ANY is answered", req: mkQuery("static.corral.test", dns.TypeA, func(m *dns.Msg) { m.Question[0].Qclass = dns.ClassANY }), want: ruleWant{answers: 2, aa: true}},
		{rule: "REFUSED outside the zones", name: "example.com, without AA", req: mkQuery("example.com", dns.TypeA, nil), want: ruleWant{rcode: dns.RcodeRefused}},

		{rule: "NOTIMP for query type 0 (as Knot)", name: "qtype 0", req: rawQuery(0, wireOf("static.corral.test"), 0), want: ruleWant{rcode: dns.RcodeNotImplemented}},

		// Additional section (RFC 1034 4.3.2 step 6).
		{rule: "NS answers carry the glue of name servers in the served zones", name: "NS at the apex", req: mkQuery("corral.test", dns.TypeNS, nil), want: ruleWant{answers: 1, aa: true}, check: wantExtra("A")},
		{rule: "SRV answers carry the addresses of their targets", name: "SRV to static", req: mkQuery("_x._tcp.corral.test", dns.TypeSRV, edns(1232)), want: ruleWant{answers: 1, aa: true}, check: wantExtra("A", "A")},
		{rule: "MX answers carry the addresses of their targets in the served zones", name: "MX to mail, which does not exist", req: mkQuery("corral.test", dns.TypeMX, nil), want: ruleWant{answers: 1, aa: true}, check: wantExtra()},

		// EDNS.
		{rule: "EDNS0 with a 1232-byte buffer", name: "a client asking 4096 is told 1232", req: mkQuery("static.corral.test", dns.TypeA, edns(4096)), want: ruleWant{answers: 2, aa: true}, check: wantOPT(1232, false)},
		{rule: "edns_buffer is the advertised size", name: "edns_buffer 600", server: "buffer600", req: mkQuery("static.corral.test", dns.TypeA, edns(4096)), want: ruleWant{answers: 2, aa: true}, check: wantOPT(600, false)},
		{rule: "no OPT in the answer to a query without one", name: "no EDNS", req: mkQuery("static.corral.test", dns.TypeA, nil), want: ruleWant{answers: 2, aa: true}, check: func(t *testing.T, r *dns.Msg) {
			if r.IsEdns0() != nil {
				t.Error("OPT in the answer to a query without EDNS")
			}
		}},
		{rule: "the DO bit is echoed (RFC 3225)", name: "DO set", req: mkQuery("static.corral.test", dns.TypeA, func(m *dns.Msg) { m.SetEdns0(1232, true) }), want: ruleWant{answers: 2, aa: true}, check: wantOPT(1232, true)},
		{rule: "the DO bit is echoed (RFC 3225)", name: "DO clear", req: mkQuery("static.corral.test", dns.TypeA, edns(1232)), want: ruleWant{answers: 2, aa: true}, check: wantOPT(1232, false)},
		{rule: "the DO bit is echoed (RFC 3225)", name: "DO set on NXDOMAIN", req: mkQuery("nope.corral.test", dns.TypeA, func(m *dns.Msg) { m.SetEdns0(1232, true) }), want: ruleWant{rcode: dns.RcodeNameError, authority: 1, aa: true}, check: wantOPT(1232, true)},
		{rule: "BADVERS for EDNS versions above 0", name: "version 1, with OPT and nothing else", req: rawQuery(0, wireOf("geo.corral.test"), dns.TypeA, optRR([]byte{0}, 1232, 1<<16, ecsOpt(1, 24, 0, 10, 9, 8))), want: ruleWant{rcode: dns.RcodeBadVers}, check: func(t *testing.T, r *dns.Msg) {
			if o := r.IsEdns0(); o == nil || o.Version() != 0 || ecsOf(r) != nil {
				t.Errorf("OPT %v, want version 0 without a client subnet", o)
			}
		}},
		{rule: "FORMERR for two OPT records", name: "two OPT records", req: rawQuery(0, wireOf("static.corral.test"), dns.TypeA, optRR([]byte{0}, 1232, 0), optRR([]byte{0}, 1232, 0)), want: ruleWant{rcode: dns.RcodeFormatError}},
		{rule: "FORMERR for an OPT not owned by the root (RFC 6891 6.1.2)", name: "OPT owned by corral.test", req: rawQuery(0, wireOf("static.corral.test"), dns.TypeA, optRR(zone, 1232, 0)), want: ruleWant{rcode: dns.RcodeFormatError}},
		{rule: "EDNS is read from the additional section only", name: "an OPT in the answer section is skipped", req: func() []byte {
			b := rawQuery(0, wireOf("static.corral.test"), dns.TypeA)
			return append(withCounts(b, 1, 1, 0, 0), optRR([]byte{0}, 1232, ednsDO)...)
		}(), want: ruleWant{answers: 2, aa: true}, check: func(t *testing.T, r *dns.Msg) {
			if r.IsEdns0() != nil {
				t.Error("an OPT in the answer section was taken for EDNS")
			}
		}},
		{rule: "FORMERR for malformed records", name: "an additional record cut short", req: rawQuery(0, wireOf("static.corral.test"), dns.TypeA, optRR([]byte{0}, 1232, 0)[:8]), want: ruleWant{rcode: dns.RcodeFormatError}},
		{rule: "EDNS options other than client subnet are skipped", name: "a cookie", req: withOpt("static.corral.test", dns.TypeA, ednsOpt(10, 1, 2, 3, 4, 5, 6, 7, 8)), want: ruleWant{answers: 2, aa: true}},
		{rule: "FORMERR for malformed EDNS options", name: "an option longer than the OPT", req: withOpt("static.corral.test", dns.TypeA, ednsOpt(10, 1, 2)[:5]), want: ruleWant{rcode: dns.RcodeFormatError}},

		// Client subnet (RFC 7871).
		{rule: "the client subnet is echoed with its scope", name: "10.9.8.0/24 on a cidr set", req: withOpt("geo.corral.test", dns.TypeA, ecsOpt(1, 24, 0, 10, 9, 8)), want: ruleWant{answers: 1, aa: true}, check: wantECS(1, 24, "10.9.8.0", true)},
		{rule: "the client subnet is echoed with its scope", name: "scope 0 on a set that ignores the client", req: withOpt("static.corral.test", dns.TypeA, ecsOpt(1, 24, 0, 10, 9, 8)), want: ruleWant{answers: 2, aa: true}, check: wantECS(1, 24, "10.9.8.0", false)},
		{rule: "the client subnet is echoed with its scope", name: "source /0 without address bytes", req: withOpt("static.corral.test", dns.TypeA, ecsOpt(1, 0, 0)), want: ruleWant{answers: 2, aa: true}, check: wantECS(1, 0, "0.0.0.0", false)},
		{rule: "the client subnet is echoed with its scope", name: "IPv6 /56 in 7 bytes", req: withOpt("static.corral.test", dns.TypeA, ecsOpt(2, 56, 0, 0x20, 0x01, 0x0d, 0xb8, 0, 0, 0x01)), want: ruleWant{answers: 2, aa: true}, check: wantECS(2, 56, "2001:db8:0:100::", false)},
		{rule: "FORMERR for a bad client subnet: scope must be 0 in a query", name: "scope 24", req: withOpt("geo.corral.test", dns.TypeA, ecsOpt(1, 24, 24, 10, 9, 8)), want: ruleWant{rcode: dns.RcodeFormatError}},
		{rule: "FORMERR for a bad client subnet: no address bits beyond the source prefix", name: "10.9.9.0/23, a bit past the prefix", req: withOpt("geo.corral.test", dns.TypeA, ecsOpt(1, 23, 0, 10, 9, 9)), want: ruleWant{rcode: dns.RcodeFormatError}},
		{rule: "FORMERR for a bad client subnet: no address bits beyond the source prefix", name: "2001:db9::/31, a bit past the prefix", req: withOpt("geo.corral.test", dns.TypeA, ecsOpt(2, 31, 0, 0x20, 0x01, 0x0d, 0xb9)), want: ruleWant{rcode: dns.RcodeFormatError}},
		{rule: "FORMERR for a bad client subnet: the address has exactly the source's bytes", name: "/24 in 4 bytes", req: withOpt("geo.corral.test", dns.TypeA, ecsOpt(1, 24, 0, 10, 9, 8, 1)), want: ruleWant{rcode: dns.RcodeFormatError}},
		{rule: "FORMERR for a bad client subnet: no address bits beyond the source prefix", name: "10.9.8.128/25 written 10.9.8.255", req: withOpt("geo.corral.test", dns.TypeA, ecsOpt(1, 25, 0, 10, 9, 8, 255)), want: ruleWant{rcode: dns.RcodeFormatError}},
		{rule: "FORMERR for a bad client subnet: the address has exactly the source's bytes", name: "/24 in 2 bytes", req: withOpt("geo.corral.test", dns.TypeA, ecsOpt(1, 24, 0, 10, 9)), want: ruleWant{rcode: dns.RcodeFormatError}},
		{rule: "FORMERR for a bad client subnet: the address has exactly the source's bytes", name: "/16 in 4 bytes", req: withOpt("geo.corral.test", dns.TypeA, ecsOpt(1, 16, 0, 10, 9, 0, 0)), want: ruleWant{rcode: dns.RcodeFormatError}},
		{rule: "FORMERR for a bad client subnet: the source fits the family", name: "IPv4 /33", req: withOpt("geo.corral.test", dns.TypeA, ecsOpt(1, 33, 0, 10, 9, 8, 0, 0)), want: ruleWant{rcode: dns.RcodeFormatError}},
		{rule: "FORMERR for a bad client subnet: the source fits the family", name: "IPv6 /129", req: withOpt("geo.corral.test", dns.TypeA, ecsOpt(2, 129, 0, make([]byte, 17)...)), want: ruleWant{rcode: dns.RcodeFormatError}},
		{rule: "client subnet family 0 with source 0 (dig +subnet=0 before BIND 9.18) is taken as /0", name: "family 0 on a cidr set", req: withOpt("geo.corral.test", dns.TypeA, ecsOpt(0, 0, 0)), want: ruleWant{answers: 1, aa: true}, check: func(t *testing.T, r *dns.Msg) {
			wantECS(0, 0, "0.0.0.0", false)(t, r)
			if !slices.Equal(answerData(r), []string{"10.4.0.3"}) {
				t.Errorf("answer %v, want the default location's 10.4.0.3", answerData(r))
			}
		}},
		{rule: "FORMERR for a bad client subnet: family 0 has no address", name: "family 0 with source 8", req: withOpt("geo.corral.test", dns.TypeA, ecsOpt(0, 8, 0, 10)), want: ruleWant{rcode: dns.RcodeFormatError}},
		{rule: "FORMERR for a bad client subnet: family 0 has no address", name: "family 0 with an address byte", req: withOpt("geo.corral.test", dns.TypeA, ecsOpt(0, 0, 0, 10)), want: ruleWant{rcode: dns.RcodeFormatError}},
		{rule: "FORMERR for a bad client subnet: family 0, 1 or 2", name: "family 3", req: withOpt("geo.corral.test", dns.TypeA, ecsOpt(3, 8, 0, 10)), want: ruleWant{rcode: dns.RcodeFormatError}},
		{rule: "FORMERR for a bad client subnet: one per query", name: "two client subnets", req: withOpt("geo.corral.test", dns.TypeA, ecsOpt(1, 24, 0, 10, 9, 8), ecsOpt(1, 24, 0, 10, 9, 8)), want: ruleWant{rcode: dns.RcodeFormatError}},
		{rule: "FORMERR for a bad client subnet", name: "3 bytes", req: withOpt("geo.corral.test", dns.TypeA, ednsOpt(optECS, 0, 1, 24)), want: ruleWant{rcode: dns.RcodeFormatError}},
		{rule: "FORMERR echoes the question and the OPT", name: "bad subnet", req: withOpt("geo.corral.test", dns.TypeA, ecsOpt(1, 24, 24, 10, 9, 8)), want: ruleWant{rcode: dns.RcodeFormatError}, check: func(t *testing.T, r *dns.Msg) {
			if len(r.Question) != 1 || r.IsEdns0() == nil {
				t.Errorf("question %v, OPT %v: want both echoed", r.Question, r.IsEdns0())
			}
		}},

		// Sizes.
		{rule: "answers that do not fit 512 bytes without EDNS are sent empty with TC", name: "two 400-byte TXT", req: mkQuery("big.corral.test", dns.TypeTXT, nil), want: ruleWant{tc: true, aa: true}},
		{rule: "answers that fit the client's EDNS buffer are sent whole", name: "two 400-byte TXT with EDNS 1232", req: mkQuery("big.corral.test", dns.TypeTXT, edns(1232)), want: ruleWant{answers: 2, aa: true}},
		{rule: "answers that do not fit the client's buffer are sent empty with TC", name: "EDNS 800", req: mkQuery("big.corral.test", dns.TypeTXT, edns(800)), want: ruleWant{tc: true, aa: true}},
		{rule: "an EDNS buffer below 512 counts as 512 (RFC 6891 6.2.5)", name: "EDNS 100 and a 190-byte answer", req: mkQuery("multi.corral.test", dns.TypeA, edns(100)), want: ruleWant{answers: 8, aa: true}},
		{rule: "edns_buffer is the largest UDP answer", name: "EDNS 4096 against edns_buffer 600", server: "buffer600", req: mkQuery("big.corral.test", dns.TypeTXT, edns(4096)), want: ruleWant{tc: true, aa: true}},
		{rule: "TCP answers are not limited to the UDP sizes", name: "two 400-byte TXT over TCP without EDNS", req: mkQuery("big.corral.test", dns.TypeTXT, nil), tcp: true, want: ruleWant{answers: 2, aa: true}},

		// Negative answers (RFC 2308).
		{rule: "NXDOMAIN carries the zone SOA with the negative TTL", name: "nope", req: mkQuery("nope.corral.test", dns.TypeA, nil), want: ruleWant{rcode: dns.RcodeNameError, authority: 1, aa: true}, check: wantNegSOA("corral.test.", 30)},
		{rule: "NODATA carries the zone SOA with the negative TTL", name: "AAAA of an A name", req: mkQuery("static.corral.test", dns.TypeAAAA, nil), want: ruleWant{authority: 1, aa: true}, check: wantNegSOA("corral.test.", 30)},
		{rule: "NODATA carries the zone SOA with the negative TTL", name: "empty non-terminal", req: mkQuery("y.w.corral.test", dns.TypeA, nil), want: ruleWant{authority: 1, aa: true}, check: wantNegSOA("corral.test.", 30)},
		{rule: "NODATA carries the zone SOA with the negative TTL", name: "HINFO, a type never served", req: mkQuery("static.corral.test", dns.TypeHINFO, nil), want: ruleWant{authority: 1, aa: true}},

		// ANY (RFC 8482).
		{rule: "one RRset for ANY (RFC 8482): the name's first", name: "at the apex, the SOA", req: mkQuery("corral.test", dns.TypeANY, nil), want: ruleWant{answers: 1, aa: true}, check: wantTypes("SOA")},
		{rule: "one RRset for ANY (RFC 8482): the whole RRset", name: "a static A of 2", req: mkQuery("static.corral.test", dns.TypeANY, nil), want: ruleWant{answers: 2, aa: true}, check: wantTypes("A", "A")},
		{rule: "one RRset for ANY (RFC 8482): chosen by its policy", name: "a multivalue of 10", req: mkQuery("multi.corral.test", dns.TypeANY, nil), want: ruleWant{answers: 8, aa: true}},
		{rule: "one RRset for ANY (RFC 8482)", name: "a CNAME is not followed", req: mkQuery("www.corral.test", dns.TypeANY, nil), want: ruleWant{answers: 1, aa: true}, check: wantTypes("CNAME")},

		// CNAME.
		{rule: "CNAME chains followed inside the served zones (8 hops)", name: "8 hops reach the address", req: mkQuery("hop8-1.corral.test", dns.TypeA, nil), want: ruleWant{answers: 10, aa: true}, check: wantTypes("CNAME", "CNAME", "CNAME", "CNAME", "CNAME", "CNAME", "CNAME", "CNAME", "A", "A")},
		{rule: "CNAME chains followed inside the served zones (8 hops)", name: "the 9th CNAME is answered, not followed", req: mkQuery("hop9-1.corral.test", dns.TypeA, nil), want: ruleWant{answers: 9, aa: true}, check: wantTypes("CNAME", "CNAME", "CNAME", "CNAME", "CNAME", "CNAME", "CNAME", "CNAME", "CNAME")},
		{rule: "CNAME chains followed inside the served zones", name: "into another served zone", req: mkQuery("toother.corral.test", dns.TypeA, nil), want: ruleWant{answers: 4, aa: true}, check: wantTypes("CNAME", "CNAME", "A", "A")},
		{rule: "CNAME chains followed inside the served zones", name: "out of the zones, the CNAME alone", req: mkQuery("away.corral.test", dns.TypeA, nil), want: ruleWant{answers: 1, aa: true}},
		{rule: "CNAME chains: the rcode is the last name's (RFC 6604)", name: "a CNAME to a missing name", req: mkQuery("dangle.corral.test", dns.TypeA, nil), want: ruleWant{rcode: dns.RcodeNameError, answers: 1, authority: 1, aa: true}},
		{rule: "CNAME chains: a CNAME asked for is not followed", name: "qtype CNAME", req: mkQuery("www.corral.test", dns.TypeCNAME, nil), want: ruleWant{answers: 1, aa: true}, check: wantTypes("CNAME")},
		{rule: "one CNAME per answer", name: "failover with two primaries", req: mkQuery("fo.corral.test", dns.TypeA, nil), want: ruleWant{answers: 3, aa: true}, check: wantTypes("CNAME", "A", "A")},

		// Wildcards (RFC 4592).
		{rule: "wildcards", name: "one label under *.w", req: mkQuery("a.w.corral.test", dns.TypeA, nil), want: ruleWant{answers: 1, aa: true}, check: wantAnswer("a.w.corral.test.", "10.5.0.1")},
		{rule: "wildcards", name: "two labels under *.w (the closest encloser is w)", req: mkQuery("a.b.w.corral.test", dns.TypeA, nil), want: ruleWant{answers: 1, aa: true}, check: wantAnswer("a.b.w.corral.test.", "10.5.0.1")},
		{rule: "wildcards: an existing name is not covered", name: "x.w itself", req: mkQuery("x.w.corral.test", dns.TypeA, nil), want: ruleWant{answers: 1, aa: true}, check: wantAnswer("x.w.corral.test.", "10.5.0.2")},
		{rule: "wildcards: an existing name is not covered", name: "NODATA at x.w", req: mkQuery("x.w.corral.test", dns.TypeAAAA, nil), want: ruleWant{authority: 1, aa: true}},
		{rule: "wildcards (RFC 4592 closest encloser)", name: "below x.w, which exists and has no wildcard", req: mkQuery("a.x.w.corral.test", dns.TypeA, nil), want: ruleWant{rcode: dns.RcodeNameError, authority: 1, aa: true}},
		{rule: "wildcards (RFC 4592 closest encloser)", name: "below the empty non-terminal y.w", req: mkQuery("a.y.w.corral.test", dns.TypeA, nil), want: ruleWant{rcode: dns.RcodeNameError, authority: 1, aa: true}},
		{rule: "wildcards", name: "NODATA through the wildcard", req: mkQuery("a.w.corral.test", dns.TypeAAAA, nil), want: ruleWant{authority: 1, aa: true}},
		{rule: "wildcards", name: "the wildcard's own name", req: mkQuery("*.w.corral.test", dns.TypeA, nil), want: ruleWant{answers: 1, aa: true}},

		// Transfers.
		{rule: "AXFR over TCP only", name: "AXFR over UDP", req: mkQuery("corral.test", dns.TypeAXFR, nil), want: ruleWant{rcode: dns.RcodeRefused}},
		{rule: "AXFR over TCP for addresses in axfr_allow", name: "AXFR over TCP from 127.0.0.1", req: mkQuery("corral.test", dns.TypeAXFR, nil), tcp: true, want: ruleWant{transfer: true}},
		{rule: "AXFR over TCP for addresses in axfr_allow", name: "AXFR over TCP from outside", req: mkQuery("corral.test", dns.TypeAXFR, nil), tcp: true, client: outsider, want: ruleWant{rcode: dns.RcodeRefused}},
		{rule: "AXFR of a zone's origin only", name: "AXFR of static.corral.test", req: mkQuery("static.corral.test", dns.TypeAXFR, nil), tcp: true, want: ruleWant{rcode: dns.RcodeRefused}},
		{rule: "AXFR outside the zones is REFUSED", name: "AXFR of example.com", req: mkQuery("example.com", dns.TypeAXFR, nil), tcp: true, want: ruleWant{rcode: dns.RcodeRefused}},
		{rule: "IXFR is answered with a full transfer", name: "IXFR over TCP", req: mkQuery("corral.test", dns.TypeIXFR, nil), tcp: true, want: ruleWant{transfer: true}},
		{rule: "IXFR is answered with a full transfer", name: "IXFR over UDP", req: mkQuery("corral.test", dns.TypeIXFR, nil), want: ruleWant{rcode: dns.RcodeRefused}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := servers[tc.server]
			if tc.server == "" {
				s = servers["default"]
			}
			client := tc.client
			if !client.IsValid() {
				client = loopback
			}
			w := newWorker(s, &stats{}, 1)
			resp, o := w.handle(tc.req, client, tc.tcp, make([]byte, 0, 70000))
			switch {
			case tc.want.drop || o == outDrop:
				if !tc.want.drop || o != outDrop {
					t.Fatalf("rule %q: outcome %d, want drop %v", tc.rule, o, tc.want.drop)
				}
				return
			case tc.want.transfer || o == outTransfer:
				if !tc.want.transfer || o != outTransfer {
					t.Fatalf("rule %q: outcome %d, want transfer %v", tc.rule, o, tc.want.transfer)
				}
				return
			}
			if binary.BigEndian.Uint16(resp) != binary.BigEndian.Uint16(tc.req) {
				t.Fatalf("rule %q: the ID is not echoed", tc.rule)
			}
			r := new(dns.Msg)
			if err := r.Unpack(resp); err != nil {
				t.Fatalf("rule %q: unparseable response %x: %v", tc.rule, resp, err)
			}
			wantCounts(t, resp, r)
			got := ruleWant{rcode: r.Rcode, answers: len(r.Answer), authority: len(r.Ns), tc: r.Truncated, aa: r.Authoritative}
			if got != tc.want || !r.Response {
				t.Fatalf("rule %q:\n got rcode %s answers %d authority %d tc %v aa %v\nwant rcode %s answers %d authority %d tc %v aa %v\n%v",
					tc.rule, dns.RcodeToString[got.rcode], got.answers, got.authority, got.tc, got.aa,
					dns.RcodeToString[tc.want.rcode], tc.want.answers, tc.want.authority, tc.want.tc, tc.want.aa, r)
			}
			if !tc.tcp && len(resp) > udpLimit(s, tc.req) {
				t.Errorf("rule %q: UDP answer of %d bytes, over the negotiated %d", tc.rule, len(resp), udpLimit(s, tc.req))
			}
			if tc.check != nil {
				tc.check(t, r)
			}
		})
	}
}

// newRulesServer builds a Server of rulesZone, edited by edit.
func newRulesServer(t *testing.T, edit func(*Config)) *Server {
	t.Helper()
	cfg := decodeConfig(t, rulesZone())
	if edit != nil {
		edit(cfg)
	}
	s, err := New(cfg, Options{})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// udpLimit is the largest UDP answer to req: the client's EDNS size (at
// least 512) capped by edns_buffer, and 512 without EDNS. The client's size
// is read with miekg/dns, not with the parser under test; a request
// miekg/dns cannot read gets 512 (its answer carries no records).
func udpLimit(s *Server, req []byte) int {
	var m dns.Msg
	if m.Unpack(req) != nil {
		return 512
	}
	if o := m.IsEdns0(); o != nil {
		return min(max(int(o.UDPSize()), 512), s.cfg.EDNSBuffer)
	}
	return 512
}

// wantOPT checks the answer's OPT: the advertised size and the DO bit.
func wantOPT(size uint16, do bool) func(*testing.T, *dns.Msg) {
	return func(t *testing.T, r *dns.Msg) {
		t.Helper()
		o := r.IsEdns0()
		if o == nil || o.UDPSize() != size || o.Do() != do {
			t.Errorf("OPT %v, want udp %d do %v", o, size, do)
		}
	}
}

// ecsOf returns the client subnet option of r's OPT, or nil.
func ecsOf(r *dns.Msg) *dns.EDNS0_SUBNET {
	if o := r.IsEdns0(); o != nil {
		for _, e := range o.Option {
			if s, ok := e.(*dns.EDNS0_SUBNET); ok {
				return s
			}
		}
	}
	return nil
}

// wantECS checks the echoed client subnet: family, source and address as
// sent, and a scope that is non-zero only when the answer used it.
func wantECS(family uint16, source uint8, addr string, scoped bool) func(*testing.T, *dns.Msg) {
	return func(t *testing.T, r *dns.Msg) {
		t.Helper()
		e := ecsOf(r)
		if e == nil {
			t.Fatal("no client subnet in the answer")
		}
		a, _ := netip.AddrFromSlice(e.Address)
		if e.Family != family || e.SourceNetmask != source || a.Unmap().String() != addr || (e.SourceScope != 0) != scoped {
			t.Errorf("client subnet %v (family %d), want family %d %s/%d with a scope only if the answer used it", e, e.Family, family, addr, source)
		}
	}
}

// wantNegSOA checks that the authority section is the SOA of the zone with
// the negative-caching TTL.
func wantNegSOA(zone string, ttl uint32) func(*testing.T, *dns.Msg) {
	return func(t *testing.T, r *dns.Msg) {
		t.Helper()
		soa, ok := r.Ns[0].(*dns.SOA)
		if !ok || soa.Hdr.Name != zone || soa.Hdr.Ttl != ttl {
			t.Errorf("authority %v, want the SOA of %s with TTL %d", r.Ns, zone, ttl)
		}
	}
}

// wantTypes checks the types of the answer records, in order.
func wantTypes(types ...string) func(*testing.T, *dns.Msg) {
	return func(t *testing.T, r *dns.Msg) {
		t.Helper()
		var got []string
		for _, rr := range r.Answer {
			got = append(got, dns.TypeToString[rr.Header().Rrtype])
		}
		if !slices.Equal(got, types) {
			t.Errorf("answer types %v, want %v", got, types)
		}
	}
}

// wantAnswer checks a one-record answer's owner and data.
func wantAnswer(owner, data string) func(*testing.T, *dns.Msg) {
	return func(t *testing.T, r *dns.Msg) {
		t.Helper()
		if r.Answer[0].Header().Name != owner || !slices.Equal(answerData(r), []string{data}) {
			t.Errorf("answer %v, want %s %s", r.Answer, owner, data)
		}
	}
}

// TestSlipIsEmpty: a response that rate limiting slips is sent empty with
// TC, its authority SOA included ("answers ... are sent empty with TC").
func TestSlipIsEmpty(t *testing.T) {
	cfg := decodeConfig(t, testZone)
	cfg.RRL = RRLConfig{Enabled: true, Rate: 1, Slip: 1, IPv4Prefix: 24, IPv6Prefix: 64}
	now := time.Unix(5000, 0)
	s, err := New(cfg, Options{Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	w := newWorker(s, &stats{}, 1)
	for i, want := range []ruleWant{
		{rcode: dns.RcodeNameError, authority: 1, aa: true},
		{rcode: dns.RcodeNameError, tc: true, aa: true},
	} {
		resp, o := w.handle(mkQuery("nope.corral.test", dns.TypeA, nil), loopback, false, make([]byte, 0, 4096))
		if o != outAnswer {
			t.Fatalf("response %d: outcome %d, want an answer (slip 1)", i, o)
		}
		var r dns.Msg
		if err := r.Unpack(resp); err != nil {
			t.Fatal(err)
		}
		wantCounts(t, resp, &r)
		got := ruleWant{rcode: r.Rcode, answers: len(r.Answer), authority: len(r.Ns), tc: r.Truncated, aa: r.Authoritative}
		if got != want {
			t.Errorf("response %d: %+v, want %+v", i, got, want)
		}
	}
}

// wantCounts checks that the header's section counts are the records
// miekg/dns read (it forgives counts larger than the records present).
func wantCounts(t *testing.T, resp []byte, r *dns.Msg) {
	t.Helper()
	an, ns, ar := binary.BigEndian.Uint16(resp[6:]), binary.BigEndian.Uint16(resp[8:]), binary.BigEndian.Uint16(resp[10:])
	if int(an) != len(r.Answer) || int(ns) != len(r.Ns) || int(ar) != len(r.Extra) {
		t.Errorf("header counts %d/%d/%d, records %d/%d/%d", an, ns, ar, len(r.Answer), len(r.Ns), len(r.Extra))
	}
}

// wantExtra checks the types of the additional records other than OPT.
func wantExtra(types ...string) func(*testing.T, *dns.Msg) {
	return func(t *testing.T, r *dns.Msg) {
		t.Helper()
		var got []string
		for _, rr := range r.Extra {
			if rr.Header().Rrtype != dns.TypeOPT {
				got = append(got, dns.TypeToString[rr.Header().Rrtype])
			}
		}
		if !slices.Equal(got, types) {
			t.Errorf("additional types %v, want %v: %v", got, types, r.Extra)
		}
	}
}
