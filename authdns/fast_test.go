package authdns

import (
	"bytes"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/corralhq/corral/authdns/answer"
)

// fastPair is two servers of one configuration, each with a worker of the
// same random seed: f answers as serve does (fast where it takes the
// packet), g only by the general path. Every answer of f must be the
// answer of g, byte for byte, and their metrics the same.
type fastPair struct {
	fs, gs *Server
	f, g   *worker
}

func newFastPair(t testing.TB, text string) *fastPair {
	t.Helper()
	clock := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	opts := Options{Now: func() time.Time { return clock }}
	fs, err := New(decodeConfig(t, text), opts)
	if err != nil {
		t.Fatal(err)
	}
	gs, err := New(decodeConfig(t, text), opts)
	if err != nil {
		t.Fatal(err)
	}
	return &fastPair{fs: fs, gs: gs, f: newWorker(fs, &stats{}, 1), g: newWorker(gs, &stats{}, 1)}
}

// answer answers req on both and fails the test when they differ; it
// reports whether the fast path took req.
func (p *fastPair) answer(t testing.TB, req []byte, tcp bool) bool {
	t.Helper()
	out, wantOut := make([]byte, 0, 70000), make([]byte, 0, 70000)
	st := p.fs.state.Load()
	resp, took := p.f.fast(st, req, loopback, tcp, out)
	o := outAnswer
	if !took {
		resp, o = p.f.general(st, req, loopback, tcp, out)
	} else if resp == nil {
		o = outDrop
	}
	want, wo := p.g.general(p.gs.state.Load(), req, loopback, tcp, wantOut)
	if o != wo || !bytes.Equal(resp, want) {
		t.Errorf("fast path (took it: %v) answered %v %s\nthe general path answers %v %s", took, o, msgString(resp), wo, msgString(want))
	}
	return took
}

// force sets the health of the check name on both servers.
func (p *fastPair) force(t testing.TB, name string, healthy bool) {
	t.Helper()
	for _, s := range []*Server{p.fs, p.gs} {
		if err := s.Checker().Force(name, healthy); err != nil {
			t.Fatal(err)
		}
	}
}

// sameStats fails when the two workers counted differently.
func (p *fastPair) sameStats(t testing.TB) {
	t.Helper()
	p.f.flush()
	p.g.flush() // the general path's class counts
	if got, want := statsOf(p.f.st), statsOf(p.g.st); got != want {
		t.Errorf("metrics of the fast path:\n%s\nof the general path:\n%s", got, want)
	}
}

// statsOf prints every counter of st.
func statsOf(st *stats) string {
	var b strings.Builder
	for i := range st.qtype {
		fmt.Fprintf(&b, "qtype[%d]=%d ", i, st.qtype[i].Load())
	}
	for i := range st.rcode {
		fmt.Fprintf(&b, "rcode[%d]=%d ", i, st.rcode[i].Load())
	}
	for i := range st.policy {
		fmt.Fprintf(&b, "policy[%d]=%d ", i, st.policy[i].Load())
	}
	for i := range st.size {
		fmt.Fprintf(&b, "size[%d]=%d ", i, st.size[i].Load())
	}
	for i := range st.byClass {
		c := &st.byClass[i]
		fmt.Fprintf(&b, "class[%d]=%d/%d/%d ", i, c.queries.Load(), c.answers.Load(), c.records.Load())
	}
	fmt.Fprintf(&b, "sizeSum=%d truncated=%d dropped=%d rrlDropped=%d rrlSlipped=%d failOpen=%d panics=%d",
		st.sizeSum.Load(), st.truncated.Load(), st.dropped.Load(), st.rrlDropped.Load(), st.rrlSlipped.Load(), st.failOpen.Load(), st.panics.Load())
	return b.String()
}

// msgString is a response as miekg/dns prints it, or its bytes.
func msgString(b []byte) string {
	if b == nil {
		return "(none)"
	}
	var m dns.Msg
	if err := m.Unpack(b); err != nil {
		return fmt.Sprintf("%x (%v)", b, err)
	}
	return fmt.Sprintf("%x\n%s", b, m.String())
}

// TestFastMatchesGeneral checks that the fast path takes the common
// queries and answers each exactly as the general path does (header
// bits, the question's case, EDNS, the DO bit, TC, the size limits, the
// records of each policy by health, metrics), and that it leaves every
// other packet to the general path.
func TestFastMatchesGeneral(t *testing.T) {
	p := newFastPair(t, allocsZone())
	static := wireOf("static.corral.test")
	opt := func(size uint16, ttl uint32) []byte { return optRR([]byte{0}, size, ttl) }
	q := func(name []byte, qtype uint16, ar ...[]byte) []byte { return rawQuery(0, name, qtype, ar...) }
	tests := []struct {
		name string
		req  []byte
		tcp  bool
		fast bool
	}{
		{name: "A, no EDNS", req: q(static, dns.TypeA), fast: true},
		{name: "A, EDNS 1232", req: q(static, dns.TypeA, opt(1232, 0)), fast: true},
		{name: "A, DO set", req: q(static, dns.TypeA, opt(1232, ednsDO)), fast: true},
		{name: "A, extended rcode bits in the query", req: q(static, dns.TypeA, opt(1232, 0xFF<<24|0x7FFF)), fast: true},
		{name: "mixed case (0x20)", req: q(wireOf("StAtIc.CoRrAl.TeSt"), dns.TypeA), fast: true},
		{name: "RD, CD and AD set", req: rawQuery(flagRD|flagCD|1<<5, static, dns.TypeA), fast: true},
		{name: "AA and TC set in the query", req: rawQuery(flagAA|flagTC, static, dns.TypeA), fast: true},
		{name: "over TCP", req: q(static, dns.TypeA, opt(1232, 0)), tcp: true, fast: true},
		{name: "multivalue of 10", req: q(wireOf("multi.corral.test"), dns.TypeA), fast: true},
		{name: "multivalue of 8 checked", req: q(wireOf("checked.other.test"), dns.TypeA, opt(1232, 0)), fast: true},
		{name: "weighted", req: q(wireOf("weighted.corral.test"), dns.TypeA), fast: true},
		{name: "weighted-subset", req: q(wireOf("subset.corral.test"), dns.TypeA), fast: true},
		{name: "cidr by the client address", req: q(wireOf("geo.corral.test"), dns.TypeA, opt(1232, 0)), fast: true},
		{name: "AAAA", req: q(wireOf("six.corral.test"), dns.TypeAAAA, opt(1232, 0)), fast: true},
		{name: "CAA at the apex", req: q(wireOf("corral.test"), dns.TypeCAA), fast: true},
		{name: "SOA at the apex", req: q(wireOf("corral.test"), dns.TypeSOA, opt(1232, 0)), fast: true},
		{name: "TXT of 800 bytes without EDNS: TC", req: q(wireOf("big.corral.test"), dns.TypeTXT), fast: true},
		{name: "TXT of 800 bytes, EDNS 100 (raised to 512): TC", req: q(wireOf("big.corral.test"), dns.TypeTXT, opt(100, 0)), fast: true},
		{name: "TXT of 800 bytes, EDNS 4096 capped by edns_buffer", req: q(wireOf("big.corral.test"), dns.TypeTXT, opt(4096, 0)), fast: true},
		{name: "TXT of 800 bytes with TC over TCP", req: q(wireOf("big.corral.test"), dns.TypeTXT), tcp: true, fast: true},
		{name: "TXT, EDNS 4096, DO", req: q(wireOf("big.corral.test"), dns.TypeTXT, opt(4096, ednsDO)), fast: true},

		{name: "NXDOMAIN", req: q(wireOf("nope.corral.test"), dns.TypeA)},
		{name: "NODATA", req: q(static, dns.TypeAAAA)},
		{name: "outside the zones", req: q(wireOf("example.com"), dns.TypeA)},
		{name: "a wildcard", req: q(wireOf("acme.tenants.corral.test"), dns.TypeA)},
		{name: "a CNAME", req: q(wireOf("www.corral.test"), dns.TypeA)},
		{name: "the CNAME itself", req: q(wireOf("www.corral.test"), dns.TypeCNAME)},
		{name: "MX, with additional addresses", req: q(wireOf("corral.test"), dns.TypeMX, opt(1232, 0))},
		{name: "NS, with glue", req: q(wireOf("corral.test"), dns.TypeNS)},
		{name: "ANY", req: q(wireOf("corral.test"), dns.TypeANY)},
		{name: "class CH", req: mkQuery("static.corral.test", dns.TypeA, func(m *dns.Msg) { m.Question[0].Qclass = dns.ClassCHAOS })},
		{name: "class ANY", req: mkQuery("static.corral.test", dns.TypeA, func(m *dns.Msg) { m.Question[0].Qclass = dns.ClassANY })},
		{name: "EDNS version 1", req: q(static, dns.TypeA, opt(1232, 1<<16))},
		{name: "an EDNS option", req: q(static, dns.TypeA, optRR([]byte{0}, 1232, 0, ednsOpt(10, 1, 2, 3, 4, 5, 6, 7, 8)))},
		{name: "a client subnet", req: q(wireOf("geo.corral.test"), dns.TypeA, optRR([]byte{0}, 1232, 0, ecsOpt(1, 24, 0, 10, 9, 8)))},
		{name: "two OPT", req: q(static, dns.TypeA, opt(1232, 0), opt(1232, 0))},
		{name: "an OPT not owned by the root", req: q(static, dns.TypeA, optRR(wireOf("corral.test"), 1232, 0))},
		{name: "a record other than OPT", req: append(withCounts(q(static, dns.TypeA), 1, 0, 0, 1), static[len(static)-1], 0, 1, 0, 1, 0, 0, 0, 0, 0, 0)},
		{name: "a byte after the question", req: append(q(static, dns.TypeA), 0)},
		{name: "a byte after the OPT", req: append(q(static, dns.TypeA, opt(1232, 0)), 0)},
		{name: "a cut OPT", req: q(static, dns.TypeA, opt(1232, 0)[:10])},
		{name: "an answer record", req: append(withCounts(q(static, dns.TypeA), 1, 1, 0, 0), opt(1232, 0)...)},
		{name: "two questions", req: withCounts(q(static, dns.TypeA), 2, 0, 0, 0)},
		{name: "opcode NOTIFY", req: rawQuery(uint16(dns.OpcodeNotify)<<11, static, dns.TypeA)},
		{name: "a response", req: rawQuery(flagQR, static, dns.TypeA)},
		{name: "a compression pointer", req: q([]byte{0xC0, 0x0C}, dns.TypeA)},
		{name: "a 256-byte name", req: q(longName(256, wireOf("corral.test")), dns.TypeA)},
		{name: "a cut question", req: q(static, dns.TypeA)[:12+len(static)+2]},
		{name: "a header only", req: withCounts(make([]byte, 12), 1, 0, 0, 0)},
		{name: "AXFR", req: q(wireOf("corral.test"), dns.TypeAXFR), tcp: true},
		{name: "qtype 0", req: q(static, 0)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			for range 20 { // the random choices too
				if got := p.answer(t, tc.req, tc.tcp); got != tc.fast {
					t.Fatalf("the fast path took it: %v, want %v", got, tc.fast)
				}
			}
		})
	}
	checked := q(wireOf("checked.other.test"), dns.TypeA, opt(1232, 0))
	for i, name := range lbNames {
		p.force(t, name, false) // the last step: all down, fail open
		t.Run(fmt.Sprintf("%d of 8 checks down", i+1), func(t *testing.T) {
			for range 20 {
				if !p.answer(t, checked, false) {
					t.Fatal("the fast path did not take it")
				}
			}
		})
	}
	p.sameStats(t)
}

// TestFastMatchesGeneralWithResolvers: with resolver-aware answers the
// fast path classes and counts the resolver as the general path does, and
// answers the same, before the step (small) and after it (big: the only
// resolver).
func TestFastMatchesGeneralWithResolvers(t *testing.T) {
	p := newFastPair(t, allocsZone()+"resolvers: {enabled: true, big_share: 0.2}\n")
	opt := optRR([]byte{0}, 1232, 0)
	reqs := map[string][]byte{
		"multivalue of 10": rawQuery(0, wireOf("multi.corral.test"), dns.TypeA, opt),
		"weighted":         rawQuery(0, wireOf("weighted.corral.test"), dns.TypeA),
		"weighted-subset":  rawQuery(0, wireOf("subset.corral.test"), dns.TypeA, opt),
		"static":           rawQuery(0, wireOf("static.corral.test"), dns.TypeA),
	}
	for _, step := range []string{"small", "big"} {
		for name, req := range reqs {
			t.Run(step+" "+name, func(t *testing.T) {
				for range 20 {
					if !p.answer(t, req, false) {
						t.Fatal("the fast path did not take it")
					}
				}
			})
		}
		now := p.fs.opts.Now()
		p.fs.res.tick(now)
		p.gs.res.tick(now)
	}
	p.sameStats(t)
	if c := p.f.st.byClass[answer.ClassBig].queries.Load(); c != 80 {
		t.Errorf("%d queries of a big resolver, want 80", c)
	}
}

// TestFastRateLimits checks that the fast path limits its answers as the
// general path does: the same answers, drops and slips (TC, empty).
func TestFastRateLimits(t *testing.T) {
	p := newFastPair(t, strings.Replace(testZone, "rrl: {enabled: false}", "rrl: {enabled: true, rate: 3, slip: 2}", 1))
	req := rawQuery(0, wireOf("static.corral.test"), dns.TypeA, optRR([]byte{0}, 1232, ednsDO))
	for i := range 12 {
		if !p.answer(t, req, false) {
			t.Fatalf("query %d: the fast path did not take it", i)
		}
	}
	if got := p.f.st.rrlDropped.Load(); got != 5 {
		t.Errorf("%d dropped, want 5 (12 - 3 answered - 4 slipped)", got)
	}
	p.sameStats(t)
}

// FuzzFast checks on arbitrary packets that the fast path either leaves
// a packet to the general path, having changed nothing, or answers it
// exactly as the general path does. The seeds are seedPackets, in
// testdata/fuzz/FuzzFast.
func FuzzFast(f *testing.F) {
	p := newFastPair(f, rulesZone())
	f.Fuzz(func(t *testing.T, req []byte) {
		for _, tcp := range []bool{false, true} {
			p.answer(t, req, tcp)
		}
		p.sameStats(t)
	})
}

// fastAnswer answers req by the fast path of w and returns the sorted data
// of its answers; it fails when the fast path does not take req.
func fastAnswer(t *testing.T, s *Server, w *worker, req []byte) []string {
	t.Helper()
	resp, ok := w.fast(s.state.Load(), req, loopback, false, make([]byte, 0, 4608))
	if !ok || resp == nil {
		t.Fatalf("the fast path did not answer %x", req)
	}
	var m dns.Msg
	if err := m.Unpack(resp); err != nil {
		t.Fatal(err)
	}
	got := answerData(&m)
	slices.Sort(got)
	return got
}

// TestFastFollowsReload checks that the fast path answers from the zones
// a reload swapped in, from the next query on: new records, and a name the
// reload removed left to the general path (NXDOMAIN).
func TestFastFollowsReload(t *testing.T) {
	zone := func(values string) string {
		return "listen: 127.0.0.1:0\nrrl: {enabled: false}\nzones:\n  - origin: corral.test\n    ns: [ns1.corral.test]\n    records:\n" + values
	}
	s, err := New(decodeConfig(t, zone("      - {name: static, type: A, values: [192.0.2.1, 192.0.2.2]}\n")), Options{})
	if err != nil {
		t.Fatal(err)
	}
	w := newWorker(s, &stats{}, 1)
	req := rawQuery(0, wireOf("static.corral.test"), dns.TypeA)
	if got := fastAnswer(t, s, w, req); !slices.Equal(got, []string{"192.0.2.1", "192.0.2.2"}) {
		t.Fatalf("before the reload: %v", got)
	}
	if err := s.Reload(decodeConfig(t, zone("      - {name: static, type: A, values: [192.0.2.9]}\n"))); err != nil {
		t.Fatal(err)
	}
	if got := fastAnswer(t, s, w, req); !slices.Equal(got, []string{"192.0.2.9"}) {
		t.Fatalf("after a reload changing the records: %v, want [192.0.2.9]", got)
	}
	if err := s.Reload(decodeConfig(t, zone("      - {name: other, type: A, values: [192.0.2.9]}\n"))); err != nil {
		t.Fatal(err)
	}
	if _, ok := w.fast(s.state.Load(), req, loopback, false, make([]byte, 0, 4608)); ok {
		t.Fatal("after a reload removing the name: the fast path answered it")
	}
	if r, _ := handleRaw(t, s, req, false); r == nil || r.Rcode != dns.RcodeNameError {
		t.Fatalf("after a reload removing the name: %v, want NXDOMAIN", r)
	}
}

// TestFastFollowsHealth checks that the fast path reads health on every
// query: a record whose check goes down leaves the next answer, and comes
// back with its check.
func TestFastFollowsHealth(t *testing.T) {
	s, err := New(decodeConfig(t, healthZone("a", "b")), Options{})
	if err != nil {
		t.Fatal(err)
	}
	w := newWorker(s, &stats{}, 1)
	req := rawQuery(0, wireOf("multi.corral.test"), dns.TypeA)
	expect := func(step string, want ...string) {
		t.Helper()
		if got := fastAnswer(t, s, w, req); !slices.Equal(got, want) {
			t.Fatalf("%s: answered %v, want %v", step, got, want)
		}
	}
	expect("all healthy", "10.0.0.1", "10.0.0.2")
	if err := s.Checker().Force("b", false); err != nil {
		t.Fatal(err)
	}
	expect("b down", "10.0.0.1")
	if err := s.Checker().Force("b", true); err != nil {
		t.Fatal(err)
	}
	expect("b up again", "10.0.0.1", "10.0.0.2")
}

// TestNameTable checks that the table finds every name it holds whatever
// the case of the name looked up (lowerHash lower-cases as it hashes), at
// every length up to 255 bytes, and nothing else.
func TestNameTable(t *testing.T) {
	nodes := []*node{{name: []byte{0}}}
	for n := 3; n <= maxName; n++ { // no name has 2 bytes
		nodes = append(nodes, &node{name: longName(n, []byte{0})})
	}
	tab := newNameTable(nodes, 42)
	var buf [maxName + 1]byte
	for _, nd := range nodes {
		upper := bytes.ToUpper(nd.name) // length bytes stay (all below 'A')
		n := copy(buf[:], upper)
		h := tab.lowerHash(buf[:], n)
		if h != tab.hash(nd.name) {
			t.Fatalf("name of %d bytes: lowerHash of its upper case differs from its hash", len(nd.name))
		}
		if !bytes.Equal(buf[:n], nd.name) {
			t.Fatalf("name of %d bytes: lowerHash lower-cased it to %q", len(nd.name), buf[:n])
		}
		if got := tab.get(nd.name, h); got != nd {
			t.Fatalf("name of %d bytes: not found", len(nd.name))
		}
		if len(nd.name) == 1 {
			continue
		}
		other := slices.Clone(nd.name)
		other[len(other)-2] ^= 1 // the last byte of the last label
		if got := tab.get(other, tab.hash(other)); got != nil {
			t.Fatalf("name of %d bytes with one byte changed: found %q", len(nd.name), got.name)
		}
	}
	var empty nameTable
	if empty.get([]byte{0}, 0) != nil {
		t.Fatal("the zero table found a name")
	}
}

// TestFastCountsEachBatch checks that the answers of the fast path, which
// are counted per run of alike answers, are all in the worker's metrics
// when answerBatch returns, and when handle returns.
func TestFastCountsEachBatch(t *testing.T) {
	s, err := New(decodeConfig(t, testZone), Options{})
	if err != nil {
		t.Fatal(err)
	}
	w := newWorker(s, &stats{}, 1)
	static := rawQuery(0, wireOf("static.corral.test"), dns.TypeA)
	reqs := [][]byte{static, static, rawQuery(0, wireOf("multi.corral.test"), dns.TypeA), static, rawQuery(0, wireOf("static.corral.test"), dns.TypeA, optRR([]byte{0}, 1232, 0))}
	clients := slices.Repeat([]netip.Addr{loopback}, len(reqs))
	const slot = 4096 + 512
	out := make([]byte, len(reqs)*slot)
	resps := make([][]byte, len(reqs))
	w.answerBatch(reqs, clients, out, slot, resps)
	size := 0
	for _, r := range resps {
		size += len(r)
	}
	simple, multi := answerPolicy(t, "simple"), answerPolicy(t, "multivalue")
	check := func(step string, n, simples int) {
		t.Helper()
		got := [...]uint64{w.st.rcode[rcodeNoError].Load(), w.st.qtype[qtypeSlot(typeA)].Load(), w.st.policy[simple].Load(), w.st.policy[multi].Load(), w.st.sizeSum.Load()}
		want := [...]uint64{uint64(n), uint64(n), uint64(simples), 1, uint64(size)}
		if got != want {
			t.Errorf("%s: NOERROR, A, simple, multivalue, bytes counted %v, want %v", step, got, want)
		}
	}
	check("after answerBatch", 5, 4)
	resp, _ := w.handle(static, loopback, false, make([]byte, 0, 512))
	size += len(resp)
	check("after handle", 6, 5)
}

// answerPolicy is the index of the policy named name in stats.policy.
func answerPolicy(t *testing.T, name string) int {
	t.Helper()
	p, err := answer.ParsePolicy(name)
	if err != nil {
		t.Fatal(err)
	}
	return p.Index()
}
