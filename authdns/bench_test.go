package authdns

import (
	"net/netip"
	"testing"

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
			const slot = 4096 + 512
			var reqs, resps [batch][]byte
			var clients [batch]netip.Addr
			for i := range batch {
				reqs[i], clients[i] = req, loopback
			}
			out := make([]byte, batch*slot)
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i += batch {
				n := min(batch, b.N-i)
				w.answerBatch(reqs[:n], clients[:n], out, slot, resps[:n])
				if resps[n-1] == nil {
					b.Fatal("no answer")
				}
			}
		})
	}
}
