package authdns

import (
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
)

// benchZone has (a) a static A with 2 values and (b) a multivalue set of 8
// health-checked values, the two cases of bench/dns/run.sh.
func benchZone() string {
	checks, values := checkedSet(lbNames...)
	return `
listen: 127.0.0.1:0
rrl: {enabled: false}
health:
  checks:
` + checks + `
zones:
  - origin: corral.test
    ns: [ns1.corral.test]
    records:
      - {name: static, type: A, values: [192.0.2.1, 192.0.2.2]}
      - name: multi
        type: A
        policy: multivalue
        values:
` + values
}

// BenchmarkHandle measures the query path without sockets as the UDP loop
// runs it: parse, select, write the answer, in batches of 32 datagrams
// with one recover per batch (answerBatch). An op is one query.
func BenchmarkHandle(b *testing.B) {
	s, err := New(decodeConfig(b, benchZone()), Options{})
	if err != nil {
		b.Fatal(err)
	}
	for _, tc := range []struct{ name, qname string }{
		{"static-2", "static.corral.test"},
		{"multivalue-8-checked", "multi.corral.test"},
	} {
		b.Run(tc.name, func(b *testing.B) {
			w := newWorker(s, &stats{}, 1)
			req := mkQuery(tc.qname, dns.TypeA, func(m *dns.Msg) { m.SetEdns0(1232, false) })
			benchBatches(b, w, req, func(int) netip.Addr { return loopback }, nil)
		})
	}
}

// BenchmarkResolverAware is BenchmarkHandle with resolver-aware answers
// on: each query is counted in the socket's resolver table and classed;
// "big" queries come from the one resolver of the table, which the step
// classes big (a multivalue answer of all 8, as the default n of 8
// gives), "small" ones from 32 resolvers of 1/32 each (below the 0.2 of
// big_share). (Named apart from BenchmarkHandle so that
// bench/dns/icount.sh's 'BenchmarkHandle/static' selects one benchmark.)
func BenchmarkResolverAware(b *testing.B) {
	cfg := decodeConfig(b, benchZone()+"resolvers: {enabled: true, big_share: 0.2}\n")
	s, err := New(cfg, Options{})
	if err != nil {
		b.Fatal(err)
	}
	for _, tc := range []struct{ name, qname, class string }{
		{"static-2-small", "static.corral.test", "small"},
		{"static-2-big", "static.corral.test", "big"},
		{"multivalue-8-checked-small", "multi.corral.test", "small"},
		{"multivalue-8-checked-big", "multi.corral.test", "big"},
	} {
		b.Run(tc.name, func(b *testing.B) {
			w := newWorker(s, &stats{}, 1)
			w.tab = s.res.newTable(nil)
			req := mkQuery(tc.qname, dns.TypeA, func(m *dns.Msg) { m.SetEdns0(1232, false) })
			client := func(int) netip.Addr { return loopback }
			if tc.class == "small" {
				client = manyResolvers
			}
			benchBatches(b, w, req, client, func() { s.res.tick(time.Now()) })
		})
	}
}

// BenchmarkAudience is the weighted set of audienceZone answered to 32
// resolvers with resolver-aware answers on, without audience learning
// ("queries") and with it ("audience": each answer noted under the
// audience's mutex): what noting costs per query.
func BenchmarkAudience(b *testing.B) {
	for _, tc := range []struct{ name, resolvers string }{
		{"queries", "resolvers: {enabled: true, window: 1h, big_share: 0.25}"},
		{"audience", "resolvers: {enabled: true, audience: true, window: 1h, big_share: 0.25}"},
	} {
		b.Run(tc.name, func(b *testing.B) {
			zone := strings.Replace(audienceZone, "resolvers: {enabled: true, audience: true, window: 1h, big_share: 0.25}", tc.resolvers, 1)
			s, err := New(decodeConfig(b, zone), Options{})
			if err != nil {
				b.Fatal(err)
			}
			w := newWorker(s, &stats{}, 1)
			w.tab = s.res.newTable(nil)
			benchBatches(b, w, mkQuery("w.corral.test", dns.TypeA, nil), manyResolvers, func() {})
		})
	}
}

// manyResolvers is the source of the i-th query of a batch: 32 resolvers,
// each of its own /24.
func manyResolvers(i int) netip.Addr { return netip.AddrFrom4([4]byte{10, byte(i), byte(i * 7), 1}) }

// benchBatches runs w on req from client(i) for the i-th query of each
// batch of 32, as the UDP loop does (answerBatch, one recover per batch);
// an op is one query. With warm, one batch is answered untimed and warm
// called before the timing starts (a step of the resolver classes, say).
func benchBatches(b *testing.B, w *worker, req []byte, client func(int) netip.Addr, warm func()) {
	const slot = 4096 + 512
	var reqs, resps [batch][]byte
	var clients [batch]netip.Addr
	for i := range batch {
		reqs[i], clients[i] = req, client(i)
	}
	out := make([]byte, batch*slot)
	if warm != nil {
		w.answerBatch(reqs[:], clients[:], out, slot, resps[:])
		warm()
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i += batch {
		n := min(batch, b.N-i)
		w.answerBatch(reqs[:n], clients[:n], out, slot, resps[:n])
		if resps[n-1] == nil {
			b.Fatal("no answer")
		}
	}
}
