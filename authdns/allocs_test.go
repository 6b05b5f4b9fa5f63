package authdns

import (
	"testing"

	"github.com/miekg/dns"
)

// allocsZone is rulesZone with the multivalue set of 8 health-checked
// values of bench/dns/run.sh, checked.other.test (rulesZone ends with the
// zone other.test).
func allocsZone() string {
	checks, values := checkedSet(lbNames...)
	return "health:\n  checks:\n" + checks + rulesZone() +
		"      - name: checked\n        type: A\n        policy: multivalue\n        values:\n" + values
}

// TestPerQueryAllocs pins the allocations of the query path (parse, select,
// write the answer) for each kind of answer: none. README.md says "no
// allocation per query".
func TestPerQueryAllocs(t *testing.T) {
	s, err := New(decodeConfig(t, allocsZone()), Options{})
	if err != nil {
		t.Fatal(err)
	}
	edns := func(m *dns.Msg) { m.SetEdns0(1232, false) }
	subnet := func(m *dns.Msg) {
		m.SetEdns0(1232, false)
		m.IsEdns0().Option = append(m.IsEdns0().Option, &dns.EDNS0_SUBNET{Code: dns.EDNS0SUBNET, Family: 1, SourceNetmask: 24, Address: netParse("10.9.1.0")})
	}
	tests := []struct {
		name string
		req  []byte
		tcp  bool
	}{
		{name: "static A of 2, EDNS", req: mkQuery("static.corral.test", dns.TypeA, edns)},
		{name: "multivalue of 8 health-checked", req: mkQuery("checked.other.test", dns.TypeA, edns)},
		{name: "multivalue of 10, no EDNS", req: mkQuery("multi.corral.test", dns.TypeA, nil)},
		{name: "weighted", req: mkQuery("weighted.corral.test", dns.TypeA, nil)},
		{name: "weighted-subset", req: mkQuery("subset.corral.test", dns.TypeA, nil)},
		{name: "shuffle through a wildcard", req: mkQuery("acme.tenants.corral.test", dns.TypeA, nil)},
		{name: "cidr with a client subnet", req: mkQuery("geo.corral.test", dns.TypeA, subnet)},
		{name: "CNAME chain of 8", req: mkQuery("hop8-1.corral.test", dns.TypeA, nil)},
		{name: "NXDOMAIN", req: mkQuery("nope.corral.test", dns.TypeA, nil)},
		{name: "truncated", req: mkQuery("big.corral.test", dns.TypeTXT, nil)},
		{name: "REFUSED", req: mkQuery("example.com", dns.TypeA, nil)},
		{name: "FORMERR", req: mkQuery("static.corral.test", dns.TypeA, nil)[:20]},
		{name: "over TCP", req: mkQuery("static.corral.test", dns.TypeA, nil), tcp: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorker(s, &stats{}, 1)
			out := make([]byte, 0, 70000)
			got := testing.AllocsPerRun(200, func() {
				if _, o := w.handle(tc.req, loopback, tc.tcp, out); o != outAnswer {
					t.Fatal("no answer")
				}
			})
			if got != 0 {
				t.Errorf("%v allocations per query, want 0", got)
			}
		})
	}
}

// TestPerQueryAllocsLearning: with resolvers.audience on, a query of a set
// that teaches audiences (noting its resolver's answer) allocates nothing
// once its resolver is noted, on the general path and the fast one.
func TestPerQueryAllocsLearning(t *testing.T) {
	s, err := New(decodeConfig(t, audienceZone), Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		req  []byte
	}{
		{"fast path", mkQuery("w.corral.test", dns.TypeA, nil)},
		{"general path, EDNS", mkQuery("w.corral.test", dns.TypeA, func(m *dns.Msg) { m.SetEdns0(1232, false) })},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorker(s, &stats{}, 1)
			out := make([]byte, 0, 70000)
			w.handle(tc.req, loopback, false, out) // notes the resolver
			got := testing.AllocsPerRun(200, func() {
				if _, o := w.handle(tc.req, loopback, false, out); o != outAnswer {
					t.Fatal("no answer")
				}
			})
			if got != 0 {
				t.Errorf("%v allocations per query, want 0", got)
			}
		})
	}
	a := s.res.aud
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.sets) != 1 {
		t.Fatalf("%d sets noted, want the weighted one", len(a.sets))
	}
	for _, sa := range a.sets {
		if len(sa.slot) != 1 {
			t.Errorf("%d resolvers noted, want loopback's", len(sa.slot))
		}
	}
}
