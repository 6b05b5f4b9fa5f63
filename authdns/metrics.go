package authdns

import (
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/corralhq/corral/authdns/answer"
)

// qtypes are the query types counted by name; others count as "other".
var qtypes = [...]struct {
	t    uint16
	name string
}{
	{typeA, "A"}, {typeAAAA, "AAAA"}, {typeCNAME, "CNAME"}, {typeTXT, "TXT"}, {typeMX, "MX"},
	{typeSRV, "SRV"}, {typeCAA, "CAA"}, {typeNS, "NS"}, {typeSOA, "SOA"}, {typeANY, "ANY"},
	{typeAXFR, "AXFR"}, {typeIXFR, "IXFR"},
}

var qtypeIndex = func() [260]uint8 {
	var t [260]uint8
	for i := range t {
		t[i] = uint8(len(qtypes))
	}
	for i, q := range qtypes {
		t[q.t] = uint8(i)
	}
	return t
}()

var rcodeNames = map[int]string{
	rcodeNoError: "NOERROR", rcodeFormErr: "FORMERR", rcodeServFail: "SERVFAIL",
	rcodeNXDomain: "NXDOMAIN", rcodeNotImp: "NOTIMP", rcodeRefused: "REFUSED", rcodeNotAuth: "NOTAUTH", rcodeBadVers: "BADVERS",
}

// sizeBounds are the upper bounds of the answer size histogram, in bytes.
var sizeBounds = [...]float64{64, 128, 256, 512, 1024, 1232, 2048, 4096, 16384, 65535}

const nRcodes = 17

// sizeBuckets[(n+15)/16] is the bucket of sizeBounds of a response of n
// bytes up to the last bound that is a multiple of 16 (4096): n <= b holds
// exactly when ceil(n/16) <= b/16 for such a bound b.
var sizeBuckets = func() (t [4096/16 + 1]uint8) {
	for i := range t {
		b := 0
		for b < len(sizeBounds) && float64(i*16) > sizeBounds[b] {
			b++
		}
		t[i] = uint8(b)
	}
	return t
}()

// sizeBucket is the index in sizeBounds of the first bound at or above n
// bytes, len(sizeBounds) for +Inf.
func sizeBucket(n int) int {
	if i := (n + 15) / 16; i < len(sizeBuckets) {
		return int(sizeBuckets[i])
	}
	b := 0
	for b < len(sizeBounds) && float64(n) > sizeBounds[b] {
		b++
	}
	return b
}

// stats are the counters of one worker (a UDP socket, or every TCP
// connection together). They are written with atomics by their worker
// and summed by the collector.
type stats struct {
	qtype      [nQtypes + 1]atomic.Uint64
	rcode      [nRcodes]atomic.Uint64
	policy     [nPolicies]atomic.Uint64
	size       [len(sizeBounds) + 1]atomic.Uint64 // by sizeBounds, last is +Inf
	sizeSum    atomic.Uint64
	truncated  atomic.Uint64
	dropped    atomic.Uint64
	rrlDropped atomic.Uint64
	rrlSlipped atomic.Uint64
	failOpen   atomic.Uint64
	batches    atomic.Uint64 // UDP reads that returned datagrams
	panics     atomic.Uint64 // panics recovered on the query path
	// byClass counts resolver-aware answers by the resolver's class.
	byClass [answer.NumClasses]struct{ queries, answers, records atomic.Uint64 }
}

// nQtypes is the number of query types counted by name; nPolicies the
// number of answer policies.
const (
	nQtypes   = len(qtypes)
	nPolicies = answer.NumPolicies
)

// qtypeSlot is the index in stats.qtype of a query type.
func qtypeSlot(qtype uint16) uint8 {
	if int(qtype) < len(qtypeIndex) {
		return qtypeIndex[qtype]
	}
	return uint8(len(qtypes))
}

// count records one answered query.
func (s *stats) count(qtype uint16, rcode, policy, size int, tc bool) {
	s.qtype[qtypeSlot(qtype)].Add(1)
	s.rcode[rcode%nRcodes].Add(1)
	if policy > 0 {
		s.policy[policy-1].Add(1)
	}
	s.size[sizeBucket(size)].Add(1)
	s.sizeSum.Add(uint64(size))
	if tc {
		s.truncated.Add(1)
	}
}

// run is the tally of a run of alike answers of the fast path (NOERROR,
// not truncated, one query type, policy and size bucket): counted in a
// worker's stats at once when the run ends (flush), with one atomic
// addition per counter instead of one per answer. The zero value is an
// empty run.
type run struct {
	n, size uint64
	// key is the query type's slot in stats.qtype << 16 | the size
	// bucket << 8 | the policy index + 1 (0 for none).
	key uint32
}

// tally counts one NOERROR answer of the fast path, of size bytes, with
// the policy index + 1 (0 for none).
func (w *worker) tally(qtype uint16, policy, size int) {
	r := &w.run
	key := uint32(qtypeSlot(qtype))<<16 | uint32(sizeBucket(size))<<8 | uint32(policy)
	if key != r.key && r.n > 0 {
		w.flush()
	}
	r.key = key
	r.n++
	r.size += uint64(size)
}

// flush counts the tallied run in the worker's stats. The query loops
// call it after each batch (UDP) and each query (handle), so a scrape
// never misses an answer sent.
func (w *worker) flush() {
	if w.tab != nil {
		w.flushClasses()
	}
	r := &w.run
	if r.n == 0 {
		return
	}
	s := w.st
	s.qtype[uint8(r.key>>16)].Add(r.n)
	s.rcode[rcodeNoError].Add(r.n)
	if p := uint8(r.key); p > 0 {
		s.policy[p-1].Add(r.n)
	}
	s.size[uint8(r.key>>8)].Add(r.n)
	s.sizeSum.Add(r.size)
	r.n, r.size = 0, 0
}

// collector exports the sum of every worker's stats.
type collector struct {
	mu    sync.Mutex
	all   []*stats
	zones func() (zones, sets int)
	// reloadCounts returns the successful and failed reloads.
	reloadCounts func() (ok, failed uint64)

	queries, rcodes, policies, truncated, dropped, rrl, failOpen, zoneCount, batches, reloads, panics *prometheus.Desc
	size                                                                                              *prometheus.Desc
}

func newCollector(zones func() (int, int), reloads func() (uint64, uint64)) *collector {
	return &collector{
		zones:        zones,
		reloadCounts: reloads,
		reloads:      prometheus.NewDesc("corral_dns_reloads_total", "Configuration reloads, by result (ok, error: the old zones kept serving).", []string{"result"}, nil),
		queries:      prometheus.NewDesc("corral_dns_queries_total", "Queries answered, by query type.", []string{"qtype"}, nil),
		rcodes:       prometheus.NewDesc("corral_dns_responses_total", "Responses sent, by response code.", []string{"rcode"}, nil),
		policies:     prometheus.NewDesc("corral_dns_policy_answers_total", "Answers chosen by a routing policy, by policy.", []string{"policy"}, nil),
		truncated:    prometheus.NewDesc("corral_dns_truncated_total", "UDP responses sent truncated (TC) because the answer did not fit.", nil, nil),
		dropped:      prometheus.NewDesc("corral_dns_dropped_total", "Packets not answered because their header could not be parsed, they were responses, or the query path panicked before their question parsed.", nil, nil),
		rrl:          prometheus.NewDesc("corral_dns_rrl_total", "Responses withheld by response rate limiting, by action (drop, slip).", []string{"action"}, nil),
		failOpen:     prometheus.NewDesc("corral_dns_fail_open_total", "Answers made of unhealthy records because no candidate was healthy.", nil, nil),
		zoneCount:    prometheus.NewDesc("corral_dns_zones", "Zones and record sets served.", []string{"kind"}, nil),
		batches:      prometheus.NewDesc("corral_dns_udp_batches_total", "UDP reads (recvmmsg calls on Linux) that returned datagrams; queries over batches is the batch size.", nil, nil),
		panics:       prometheus.NewDesc("corral_dns_panics_total", "Panics recovered while answering a packet (answered SERVFAIL when its question was parsed, else dropped) or on a TCP connection (closed).", nil, nil),
		size:         prometheus.NewDesc("corral_dns_response_size_bytes", "Size of the responses sent.", nil, nil),
	}
}

func (c *collector) add(s *stats) {
	c.mu.Lock()
	c.all = append(c.all, s)
	c.mu.Unlock()
}

// Describe implements prometheus.Collector.
func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.queries, c.rcodes, c.policies, c.truncated, c.dropped, c.rrl, c.failOpen, c.zoneCount, c.batches, c.reloads, c.panics, c.size} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *collector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	all := c.all
	c.mu.Unlock()
	var sum struct {
		qtype                                                              [nQtypes + 1]uint64
		rcode                                                              [nRcodes]uint64
		policy                                                             [nPolicies]uint64
		size                                                               [len(sizeBounds) + 1]uint64
		sizeSum, truncated, dropped, rrlD, rrlS, failOpen, batches, panics uint64
	}
	for _, s := range all {
		for i := range s.qtype {
			sum.qtype[i] += s.qtype[i].Load()
		}
		for i := range s.rcode {
			sum.rcode[i] += s.rcode[i].Load()
		}
		for i := range s.policy {
			sum.policy[i] += s.policy[i].Load()
		}
		for i := range s.size {
			sum.size[i] += s.size[i].Load()
		}
		sum.sizeSum += s.sizeSum.Load()
		sum.truncated += s.truncated.Load()
		sum.dropped += s.dropped.Load()
		sum.rrlD += s.rrlDropped.Load()
		sum.rrlS += s.rrlSlipped.Load()
		sum.failOpen += s.failOpen.Load()
		sum.batches += s.batches.Load()
		sum.panics += s.panics.Load()
	}
	for i, q := range qtypes {
		ch <- prometheus.MustNewConstMetric(c.queries, prometheus.CounterValue, float64(sum.qtype[i]), q.name)
	}
	ch <- prometheus.MustNewConstMetric(c.queries, prometheus.CounterValue, float64(sum.qtype[len(qtypes)]), "other")
	for rc, name := range rcodeNames {
		ch <- prometheus.MustNewConstMetric(c.rcodes, prometheus.CounterValue, float64(sum.rcode[rc%nRcodes]), name)
	}
	for i, p := range answer.Policies() {
		ch <- prometheus.MustNewConstMetric(c.policies, prometheus.CounterValue, float64(sum.policy[i]), p.String())
	}
	ch <- prometheus.MustNewConstMetric(c.truncated, prometheus.CounterValue, float64(sum.truncated))
	ch <- prometheus.MustNewConstMetric(c.dropped, prometheus.CounterValue, float64(sum.dropped))
	ch <- prometheus.MustNewConstMetric(c.rrl, prometheus.CounterValue, float64(sum.rrlD), "drop")
	ch <- prometheus.MustNewConstMetric(c.rrl, prometheus.CounterValue, float64(sum.rrlS), "slip")
	ch <- prometheus.MustNewConstMetric(c.failOpen, prometheus.CounterValue, float64(sum.failOpen))
	ch <- prometheus.MustNewConstMetric(c.batches, prometheus.CounterValue, float64(sum.batches))
	ch <- prometheus.MustNewConstMetric(c.panics, prometheus.CounterValue, float64(sum.panics))
	ok, failed := c.reloadCounts()
	ch <- prometheus.MustNewConstMetric(c.reloads, prometheus.CounterValue, float64(ok), "ok")
	ch <- prometheus.MustNewConstMetric(c.reloads, prometheus.CounterValue, float64(failed), "error")
	zones, sets := c.zones()
	ch <- prometheus.MustNewConstMetric(c.zoneCount, prometheus.GaugeValue, float64(zones), "zones")
	ch <- prometheus.MustNewConstMetric(c.zoneCount, prometheus.GaugeValue, float64(sets), "record_sets")
	buckets := make(map[float64]uint64, len(sizeBounds))
	var cum, total uint64
	for i, b := range sizeBounds {
		cum += sum.size[i]
		buckets[b] = cum
	}
	total = cum + sum.size[len(sizeBounds)]
	ch <- prometheus.MustNewConstHistogram(c.size, total, float64(sum.sizeSum), buckets)
}

var _ prometheus.Collector = (*collector)(nil)
