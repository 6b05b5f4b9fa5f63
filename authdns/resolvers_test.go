package authdns

import (
	"fmt"
	"math/rand/v2"
	"net"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/corralhq/corral/authdns/answer"
	"github.com/corralhq/corral/internal/testkit"
)

// resolverZone has a multivalue set of 10 (n 2), a weighted set of 4 with
// a big weighted subset of 3 and a weighted set of 4 without; %s is the
// resolvers block.
const resolverZone = `
listen: 127.0.0.1:0
rrl: {enabled: false}
%s
zones:
  - origin: corral.test
    soa: {mname: ns1.corral.test, rname: hostmaster.corral.test, serial: 1}
    ns: [ns1.corral.test]
    records:
      - {name: ns1, type: A, values: [127.0.0.1]}
      - name: multi
        type: A
        policy: multivalue
        n: 2
        values: [10.0.0.1, 10.0.0.2, 10.0.0.3, 10.0.0.4, 10.0.0.5, 10.0.0.6, 10.0.0.7, 10.0.0.8, 10.0.0.9, 10.0.0.10]
      - name: w
        type: A
        policy: weighted
        big_weighted_subset: true
        big_n: 3
        values: [{value: 10.1.0.1, weight: 1}, {value: 10.1.0.2, weight: 2}, {value: 10.1.0.3, weight: 3}, {value: 10.1.0.4, weight: 4}]
      - name: one
        type: A
        policy: weighted
        values: [{value: 10.2.0.1, weight: 1}, {value: 10.2.0.2, weight: 2}, {value: 10.2.0.3, weight: 3}, {value: 10.2.0.4, weight: 4}]
`

// askFrom sends one UDP query from the address src with miekg/dns.
func askFrom(t *testing.T, addr, src, name string, edit func(*dns.Msg)) *dns.Msg {
	t.Helper()
	m := new(dns.Msg)
	m.SetQuestion(dns.Fqdn(name), dns.TypeA)
	if edit != nil {
		edit(m)
	}
	c := &dns.Client{Net: "udp", Timeout: 5 * time.Second, Dialer: &net.Dialer{Timeout: 5 * time.Second, LocalAddr: &net.UDPAddr{IP: net.ParseIP(src)}}}
	r, _, err := c.Exchange(m, addr)
	if err != nil {
		t.Fatalf("%s from %s: %v", name, src, err)
	}
	return r
}

// withSubnet adds an EDNS client subnet to a query.
func withSubnet(p string) func(*dns.Msg) {
	pp := netip.MustParsePrefix(p)
	return func(m *dns.Msg) {
		m.SetEdns0(1232, false)
		o := m.IsEdns0()
		o.Option = append(o.Option, &dns.EDNS0_SUBNET{Code: dns.EDNS0SUBNET, Family: 1, SourceNetmask: uint8(pp.Bits()), Address: pp.Addr().AsSlice()})
	}
}

// gathered returns the metrics of reg by name and label values
// ("corral_dns_resolvers/big"): a counter's or gauge's value, a
// histogram's sample count.
func gathered(t *testing.T, reg *prometheus.Registry) map[string]float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			key := mf.GetName()
			for _, l := range m.GetLabel() {
				key += "/" + l.GetValue()
			}
			switch {
			case m.Counter != nil:
				got[key] = m.GetCounter().GetValue()
			case m.Gauge != nil:
				got[key] = m.GetGauge().GetValue()
			case m.Histogram != nil:
				got[key] = float64(m.GetHistogram().GetSampleCount())
			}
		}
	}
	return got
}

// TestBigResolverGetsMoreAddresses: over real UDP, a resolver sending many
// times the queries of others (from 127.0.9.1, eight others from
// 127.0.1.1 to 127.0.8.1) is classed big at the next step and gets every
// healthy address of a multivalue set and a weighted subset of a weighted
// set with big_weighted_subset, the others the configured count; a client
// subnet that sends many queries is a resolver of its own, whose answers
// are scoped to it; the classes are in the metrics.
func TestBigResolverGetsMoreAddresses(t *testing.T) {
	reg := prometheus.NewRegistry()
	srv, addr := startServer(t, fmt.Sprintf(resolverZone, "resolvers: {enabled: true, window: 1h, big_share: 0.2}"), Options{Registerer: reg})
	big, ecs := "127.0.9.1", "10.9.0.0/24"
	small := func(i int) string { return fmt.Sprintf("127.0.%d.1", i) }
	// Before any step every resolver is small.
	if r := askFrom(t, addr, big, "multi.corral.test", nil); len(r.Answer) != 2 {
		t.Fatalf("before the step: %d records, want 2", len(r.Answer))
	}
	for range 39 {
		askFrom(t, addr, big, "multi.corral.test", nil)
	}
	for range 60 {
		askFrom(t, addr, small(1), "multi.corral.test", withSubnet(ecs))
	}
	for i := 1; i <= 8; i++ {
		for range 5 {
			askFrom(t, addr, small(i), "multi.corral.test", nil)
		}
	}
	// 140 queries: the big source 40 (29 %), the subnet 60 (43 %), each
	// small source 5 (4 %); big above 20 %.
	srv.res.tick(time.Now())

	for range 20 {
		if r := askFrom(t, addr, big, "multi.corral.test", nil); len(r.Answer) != 10 {
			t.Fatalf("big resolver, multivalue: %d records, want all 10", len(r.Answer))
		}
		if r := askFrom(t, addr, big, "w.corral.test", nil); len(r.Answer) != 3 {
			t.Fatalf("big resolver, weighted with big_weighted_subset: %d records, want 3", len(r.Answer))
		}
		if r := askFrom(t, addr, big, "one.corral.test", nil); len(r.Answer) != 1 {
			t.Fatalf("big resolver, weighted: %d records, want 1", len(r.Answer))
		}
		if r := askFrom(t, addr, small(2), "multi.corral.test", nil); len(r.Answer) != 2 {
			t.Fatalf("small resolver, multivalue: %d records, want 2", len(r.Answer))
		}
		if r := askFrom(t, addr, small(2), "w.corral.test", nil); len(r.Answer) != 1 {
			t.Fatalf("small resolver, weighted: %d records, want 1", len(r.Answer))
		}
	}
	// The busy subnet is big through any source; its answer is scoped to
	// the /24 the class was keyed by. Another subnet from the same
	// source is small, and its answer says so for its /24.
	for _, tc := range []struct {
		src, subnet string
		records     int
	}{{small(3), ecs, 10}, {small(4), "10.9.0.0/25", 10}, {small(1), "10.8.0.0/24", 2}} {
		r := askFrom(t, addr, tc.src, "multi.corral.test", withSubnet(tc.subnet))
		if len(r.Answer) != tc.records {
			t.Errorf("subnet %s from %s: %d records, want %d", tc.subnet, tc.src, len(r.Answer), tc.records)
		}
		var scope uint8 = 255
		for _, o := range r.IsEdns0().Option {
			if s, ok := o.(*dns.EDNS0_SUBNET); ok {
				scope = s.SourceScope
			}
		}
		if scope != 24 {
			t.Errorf("subnet %s: scope %d, want 24", tc.subnet, scope)
		}
	}

	// Queries by class: 140 small before the step; then 20 rounds of 3
	// big (multi: 10 records, w: 3, one: not by class) and 2 small
	// (multi: 2, w: 1); then 2 big subnets (10 each) and a small one (2).
	got := gathered(t, reg)
	for k, want := range map[string]float64{
		"corral_dns_resolvers/big":                       2,
		"corral_dns_resolvers/small":                     8,
		"corral_dns_resolver_queries_total/big":          20*3 + 2,
		"corral_dns_resolver_answers_total/big":          20*2 + 2,
		"corral_dns_resolver_answer_records_total/big":   20*(10+3) + 2*10,
		"corral_dns_resolver_queries_total/small":        140 + 20*2 + 1,
		"corral_dns_resolver_answers_total/small":        140 + 20*2 + 1,
		"corral_dns_resolver_answer_records_total/small": 140*2 + 20*(2+1) + 2,
		"corral_dns_resolver_table_slots":                float64(4096 * (1 + srv.cfg.sockets())),
	} {
		if got[k] != want {
			t.Errorf("%s = %v, want %v", k, got[k], want)
		}
	}
	// Each socket's table holds the resolvers it saw: 10 in all, in one
	// slot per table that saw them.
	if e := got["corral_dns_resolver_table_entries"]; e < 10 || e > 10*float64(1+srv.cfg.sockets()) {
		t.Errorf("%v table entries for 10 resolvers", e)
	}
	// The health page and BigResolvers name them, the larger share first.
	bigs := srv.BigResolvers()
	if len(bigs) != 2 || bigs[0].Prefix.String() != ecs || bigs[1].Prefix.String() != "127.0.9.0/24" || bigs[1].Share != 40.0/140 {
		t.Errorf("BigResolvers %v, want %s (60 of 140) and 127.0.9.0/24 (40 of 140)", bigs, ecs)
	}
	rec := httptest.NewRecorder()
	srv.HealthHandler().ServeHTTP(rec, httptest.NewRequest("GET", "/health", nil))
	if body := rec.Body.String(); !strings.Contains(body, "resolvers: big") || !strings.Contains(body, "127.0.9.0/24") || !strings.Contains(body, "28.6 %") {
		t.Errorf("health page without the big resolvers:\n%s", body)
	}
}

// TestResolverTableSprayBounded: a spray of random sources (IPv4 and
// IPv6, a new one on nearly every query) leaves the table at its size,
// allocates nothing per query, and does not hide the one resolver that
// sends a tenth of the queries; none of the sprayed sources is big.
func TestResolverTableSprayBounded(t *testing.T) {
	now := time.Unix(1000, 0)
	r := newResolvers(ResolversConfig{Enabled: true, Window: time.Minute, BigShare: 0.05, TableSize: 256}, now)
	tab := r.newTable(nil)
	rng := rand.New(rand.NewPCG(1, 2))
	heavy := netip.MustParseAddr("192.0.2.77")
	query := func(i int) {
		var a netip.Addr
		switch {
		case i%10 == 0:
			a = heavy
		case i%3 == 0:
			var b [16]byte
			for j := range b {
				b[j] = byte(rng.Uint32())
			}
			b[0] = 0x20
			a = netip.AddrFrom16(b)
		default:
			a = netip.AddrFrom4([4]byte{byte(rng.Uint32()), byte(rng.Uint32()), byte(rng.Uint32()), 1})
		}
		r.class(tab, a, netip.Prefix{})
	}
	const n = 200000
	for i := range n {
		query(i)
	}
	if allocs := testing.AllocsPerRun(1000, func() { query(1) }); allocs != 0 {
		t.Errorf("%.1f allocations per counted query", allocs)
	}
	if len(tab.slots) != 256 {
		t.Fatalf("the table has %d slots, want 256", len(tab.slots))
	}
	r.tick(now.Add(30 * time.Second))
	v := r.view.Load()
	if v.entries > 2*256 || v.tracked > 2*256 { // this table and the TCP one
		t.Errorf("%d entries, %d resolvers tracked: more than the tables hold", v.entries, v.tracked)
	}
	if len(v.big) != 1 || v.big[0].prefix != netip.MustParsePrefix("192.0.2.0/24") {
		t.Fatalf("big resolvers %v, want only 192.0.2.0/24", v.big)
	}
	if c, _, _ := r.class(tab, heavy, netip.Prefix{}); c != answer.ClassBig {
		t.Errorf("the heavy resolver is %v", c)
	}
	// Two windows later without its queries, it is small again.
	r.tick(now.Add(2*time.Minute + time.Second))
	if c, _, _ := r.class(tab, heavy, netip.Prefix{}); c != answer.ClassSmall {
		t.Errorf("two windows later the heavy resolver is %v", c)
	}
}

// TestResolverWindowSlides: a resolver's queries count fully in their
// window and by the part of it still in the sliding window after.
func TestResolverWindowSlides(t *testing.T) {
	start := time.Unix(0, 0)
	r := newResolvers(ResolversConfig{Enabled: true, Window: 80 * time.Second, BigShare: 0.5, TableSize: 64}, start)
	tab := r.newTable(nil)
	a, b := netip.MustParseAddr("192.0.2.1"), netip.MustParseAddr("198.51.100.1")
	for range 80 {
		r.class(tab, a, netip.Prefix{}) // window 1
	}
	r.tick(start.Add(120 * time.Second)) // half way through window 2
	for range 60 {
		r.class(tab, b, netip.Prefix{})
	}
	r.tick(start.Add(120 * time.Second))
	// a: half of its 80; b: 60; of 100.
	v := r.view.Load()
	if v.total != 100 || len(v.big) != 1 || v.big[0].prefix != netip.MustParsePrefix("198.51.100.0/24") || v.big[0].share != 0.6 {
		t.Fatalf("total %d, big %v; want 100 and 198.51.100.0/24 with 0.6", v.total, v.big)
	}
	if c, _, _ := r.class(tab, a, netip.Prefix{}); c != answer.ClassSmall {
		t.Errorf("a, 40 of 100, is %v", c)
	}
	r.tick(start.Add(220 * time.Second)) // 6/8 through window 3: b's 61 count 2/8, a's are gone
	if v := r.view.Load(); v.total != 61*2/8 || v.tracked != 1 || len(v.big) != 1 {
		t.Fatalf("total %d, %d tracked, big %v; want %d, 1, b", v.total, v.tracked, v.big, 61*2/8)
	}
	r.tick(start.Add(330 * time.Second)) // window 5: nothing left
	if v := r.view.Load(); v.total != 0 || len(v.big) != 0 || v.tracked != 0 {
		t.Fatalf("two windows later: total %d, big %v, %d tracked", v.total, v.big, v.tracked)
	}
}

// TestResolverKeys: sources are cut to the configured prefixes, client
// subnets to the shorter of theirs and the configured one, and a /0
// subnet counts as none.
func TestResolverKeys(t *testing.T) {
	r := newResolvers(ResolversConfig{Enabled: true}, time.Now())
	tests := []struct {
		client, subnet string
		want           string
		ecsBits        int
	}{
		{"192.0.2.77", "", "192.0.2.0/24", 0},
		{"::ffff:192.0.2.77", "", "192.0.2.0/24", 0},
		{"2001:db8:1:2:3::1", "", "2001:db8:1::/48", 0},
		{"192.0.2.77", "10.1.2.0/24", "10.1.2.0/24", 24},
		{"192.0.2.77", "10.1.0.0/16", "10.1.0.0/16", 16},
		{"192.0.2.77", "10.1.2.128/25", "10.1.2.0/24", 24},
		{"192.0.2.77", "0.0.0.0/0", "192.0.2.0/24", 0},
		{"192.0.2.77", "2001:db8:aa::/40", "2001:db8::/40", 40},
	}
	for _, tc := range tests {
		t.Run(tc.client+" "+tc.subnet, func(t *testing.T) {
			var sub netip.Prefix
			if tc.subnet != "" {
				sub = netip.MustParsePrefix(tc.subnet)
			}
			k, bits := r.key(netip.MustParseAddr(tc.client), sub)
			if got := keyPrefix(k); got.String() != tc.want || bits != tc.ecsBits {
				t.Errorf("key %s (ecs bits %d), want %s (%d)", got, bits, tc.want, tc.ecsBits)
			}
		})
	}
	if k, _ := r.key(netip.Addr{}, netip.Prefix{}); k != 0 {
		t.Errorf("a query without an address has key %x", k)
	}
}

// TestResolversOffByDefault: without a resolvers block nothing is
// measured: a source sending every query gets the configured count, and
// no resolver metric exists.
func TestResolversOffByDefault(t *testing.T) {
	if DefaultConfig().Resolvers.Enabled {
		t.Fatal("resolver-aware answers are on by default")
	}
	reg := prometheus.NewRegistry()
	srv, addr := startServer(t, fmt.Sprintf(resolverZone, ""), Options{Registerer: reg})
	if srv.res != nil {
		t.Fatal("resolvers measured without the resolvers block")
	}
	for range 50 {
		if r := askFrom(t, addr, "127.0.9.1", "multi.corral.test", nil); len(r.Answer) != 2 {
			t.Fatalf("%d records, want 2", len(r.Answer))
		}
		if r := askFrom(t, addr, "127.0.9.1", "w.corral.test", nil); len(r.Answer) != 1 {
			t.Fatalf("weighted: %d records, want 1", len(r.Answer))
		}
	}
	for k := range gathered(t, reg) {
		if strings.HasPrefix(k, "corral_dns_resolver") {
			t.Errorf("metric %s without resolver-aware answers", k)
		}
	}
}

// TestResolversConfigErrors: every bad setting is reported under its key.
func TestResolversConfigErrors(t *testing.T) {
	base := fmt.Sprintf(resolverZone, "%s")
	tests := []struct {
		name, block, want string
	}{
		{"negative window", "resolvers: {enabled: true, window: -1s}", "resolvers.window: authdns: must be at least 8ms"},
		{"share of 1", "resolvers: {enabled: true, big_share: 1}", "resolvers.big_share: authdns: must be above 0 and below 1, got 1"},
		{"negative share", "resolvers: {big_share: -0.5}", "resolvers.big_share: authdns: must be above 0 and below 1"},
		{"table below 8/share", "resolvers: {enabled: true, big_share: 0.01, table_size: 500}", "resolvers.table_size: authdns: must be at least 8/big_share = 800"},
		{"table too large", "resolvers: {table_size: 2000000}", "resolvers.table_size: authdns: must be 64 to 1048576"},
		{"ipv4 prefix", "resolvers: {ipv4_prefix: 33}", "resolvers.ipv4_prefix: authdns: must be 1 to 32"},
		{"ipv6 prefix", "resolvers: {ipv6_prefix: 64}", "resolvers.ipv6_prefix: authdns: must be 1 to 56"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			wantConfigError(t, strings.Replace(base, "%s", tc.block, 1), tc.want)
		})
	}
	sets := []struct {
		name, from, to, want string
	}{
		{"big_n below n", "        n: 2\n", "        n: 2\n        big_n: 1\n", "zones[0].records[1].big_n: authdns: big n 1 is below n 2"},
		{"big_n on weighted without the subset", "        big_weighted_subset: true\n", "", "zones[0].records[2].big_n: authdns: big n applies to a weighted set only with big weighted subset"},
		{"big_weighted_subset on multivalue", "        n: 2\n", "        n: 2\n        big_weighted_subset: true\n", "zones[0].records[1].big_weighted_subset: authdns: big weighted subset applies to the weighted policy, not multivalue"},
	}
	for _, tc := range sets {
		t.Run(tc.name, func(t *testing.T) {
			wantConfigError(t, strings.Replace(strings.Replace(base, "%s", "", 1), tc.from, tc.to, 1), tc.want)
		})
	}
}

// TestResolversCountTCP: queries over TCP count in the TCP connections'
// shared table, and the step sums it with the sockets' tables: a resolver
// that sends its queries over TCP is big over UDP too.
func TestResolversCountTCP(t *testing.T) {
	srv, addr := startServer(t, fmt.Sprintf(resolverZone, "resolvers: {enabled: true, window: 1h, big_share: 0.3}"), Options{})
	tcp := &dns.Client{Net: "tcp", Timeout: 5 * time.Second, Dialer: &net.Dialer{Timeout: 5 * time.Second, LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.9.1")}}}
	for range 30 {
		m := new(dns.Msg)
		m.SetQuestion("multi.corral.test.", dns.TypeA)
		if _, _, err := tcp.Exchange(m, addr); err != nil {
			t.Fatal(err)
		}
	}
	for i := 1; i <= 6; i++ {
		for range 5 {
			askFrom(t, addr, fmt.Sprintf("127.0.%d.1", i), "multi.corral.test", nil)
		}
	}
	srv.res.tick(time.Now()) // 30 of 60 over TCP: big
	if r := askFrom(t, addr, "127.0.9.1", "multi.corral.test", nil); len(r.Answer) != 10 {
		t.Fatalf("over UDP after its TCP queries: %d records, want 10", len(r.Answer))
	}
	if r := askFrom(t, addr, "127.0.1.1", "multi.corral.test", nil); len(r.Answer) != 2 {
		t.Fatalf("a small resolver: %d records, want 2", len(r.Answer))
	}
	if v := srv.res.view.Load(); v.total != 60 || v.tracked != 7 {
		t.Errorf("the step saw %d queries of %d resolvers, want 60 of 7", v.total, v.tracked)
	}
}

// TestResolverTableNeverUndercounts: within a window, the count of every
// resolver the table holds is at least its true count (Space-Saving's
// property, per bucket), and the heaviest resolvers of a skewed stream
// are all held.
func TestResolverTableNeverUndercounts(t *testing.T) {
	r := newResolvers(ResolversConfig{Enabled: true, TableSize: 256, BigShare: 0.05}, time.Unix(0, 0))
	for seed := range uint64(5) {
		tab := newResolverTable(256, nil)
		z := rand.NewZipf(rand.New(rand.NewPCG(seed, 1)), 1.2, 1, 4999)
		truth := map[uint64]uint64{}
		clock := r.clock.Load()
		base, _ := r.key(netip.MustParseAddr("10.0.0.1"), netip.Prefix{})
		for range 50000 {
			k := base + z.Uint64()<<8 // a /24 per Zipf rank: 10.0.0.0/24 is rank 0
			truth[k]++
			tab.count(k, clock)
		}
		epoch, phase := clock>>8, clock&0xFF
		held := map[uint64]uint64{}
		for i := range tab.slots {
			if k := tab.slots[i].key.Load(); k != 0 {
				held[k] = estimate(tab.slots[i].n.Load(), epoch, phase)
			}
		}
		for k, n := range held {
			if n < truth[k] {
				t.Errorf("seed %d: %s counted %d, sent %d", seed, keyPrefix(k), n, truth[k])
			}
		}
		for rank := range uint64(5) {
			if k := base + rank<<8; held[k] == 0 {
				t.Errorf("seed %d: the resolver of rank %d (%d queries) is not held", seed, rank, truth[k])
			}
		}
	}
}

// TestReloadKeepsResolvers: a reload that changes the resolvers block
// keeps the running settings and says so in the log; a set's big_n
// reloads.
func TestReloadKeepsResolvers(t *testing.T) {
	text := fmt.Sprintf(resolverZone, "resolvers: {enabled: true, window: 1h, big_share: %s}")
	var logs testkit.SyncBuffer
	srv, addr := startServer(t, fmt.Sprintf(text, "0.2"), Options{Logger: testLogger(&logs)})
	next := decodeConfig(t, strings.Replace(fmt.Sprintf(text, "0.5"), "        n: 2\n", "        n: 2\n        big_n: 4\n", 1))
	if err := srv.Reload(next); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(logs.String(), "resolvers changes need a restart") {
		t.Fatalf("reload log without the resolvers warning:\n%s", logs.String())
	}
	if srv.res.rule.BigShare != 0.2 {
		t.Errorf("big share %v after the reload, want the running 0.2", srv.res.rule.BigShare)
	}
	askFrom(t, addr, "127.0.9.1", "multi.corral.test", nil)
	srv.res.tick(time.Now())
	if r := askFrom(t, addr, "127.0.9.1", "multi.corral.test", nil); len(r.Answer) != 4 {
		t.Errorf("big resolver after a reload to big_n 4: %d records", len(r.Answer))
	}
}
