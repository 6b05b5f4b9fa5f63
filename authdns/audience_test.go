package authdns

import (
	"encoding/json"
	"fmt"
	"math"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/corralhq/corral/internal/loadreport"
)

// audienceZone has a weighted set of three origins whose big answers are
// weighted subsets; feedback's interval is an hour so that only the test
// ticks (its NATS is never reached: the test hands the reports over).
const audienceZone = `
listen: 127.0.0.1:0
rrl: {enabled: false}
feedback: {nats: "nats://127.0.0.1:1", interval: 1h, timeout: 10s}
resolvers: {enabled: true, audience: true, window: 1h, big_share: 0.25}
zones:
  - origin: corral.test
    soa: {mname: ns1.corral.test, rname: hostmaster.corral.test, serial: 1}
    ns: [ns1.corral.test]
    ttl: 30
    records:
      - {name: ns1, type: A, values: [127.0.0.1]}
      - name: w
        type: A
        policy: weighted
        big_weighted_subset: true
        values: [10.0.0.1, 10.0.0.2, 10.0.0.3]
`

// TestAudienceLearnsFromTheOrigins: five resolvers ask for the weighted
// name once per 30 s TTL each, so by queries each sends a fifth, under
// the 25 % share. One of them (127.0.9.1) speaks for 60 of the 68
// sessions a second the origins open, the other four for 2 each. The test
// plays the edge hosts and the origins: every second, each origin opens
// the sessions of the resolvers whose answer names it (split evenly over
// an answer's records, in whole sessions) and reports its count, as hubs
// and edges do (loadreport.Report.Opened), and authdns's feedback ticks.
// After forty TTLs (20 minutes) the CDN resolver is big by its audience,
// and in each of the next ten its answers hold two of the three records
// (one left out), the others' one; it is in the metrics and on the health
// page with its share of the sessions (within 0.1 of 60/68). When its
// hosts leave (they open nothing), it is small again within forty TTLs
// (17 to 25 in 30 runs: its share falls only as fast as the whole opened
// rate's).
func TestAudienceLearnsFromTheOrigins(t *testing.T) {
	var clock atomic.Int64
	clock.Store(time.Unix(1_000_000, 0).UnixNano())
	now := func() time.Time { return time.Unix(0, clock.Load()) }
	reg := prometheus.NewRegistry()
	srv, addr := startServer(t, audienceZone, Options{Registerer: reg, Now: now})
	cdn := "127.0.9.1"
	sources := []string{cdn, "127.0.1.1", "127.0.2.1", "127.0.3.1", "127.0.4.1"}
	rates := map[string]int{cdn: 60, "127.0.1.1": 2, "127.0.2.1": 2, "127.0.3.1": 2, "127.0.4.1": 2}
	values := []string{"10.0.0.1", "10.0.0.2", "10.0.0.3"}
	opened := map[string]uint64{}
	answers := map[string][]string{}
	send := func(r loadreport.Report) {
		b, _ := json.Marshal(r)
		srv.fb.receive(&nats.Msg{Data: b})
	}
	// round asks from every source (each at its own second of the TTL)
	// and plays the TTL's 30 seconds; it returns the records each got.
	round := func() map[string]int {
		got := map[string]int{}
		for s := range 30 {
			if s < len(sources) {
				src := sources[s]
				r := askFrom(t, addr, src, "w.corral.test", nil)
				answers[src] = answers[src][:0]
				for _, rr := range r.Answer {
					if a, ok := rr.(*dns.A); ok {
						answers[src] = append(answers[src], a.A.String())
					}
				}
				got[src] = len(r.Answer)
			}
			clock.Add(int64(time.Second))
			for src, ans := range answers {
				for _, v := range ans {
					opened[v] += uint64(rates[src] / len(ans))
				}
			}
			for i, v := range values {
				send(loadreport.Report{Node: fmt.Sprintf("o%d", i), Kind: "hub", Addr: v + ":8080", Opened: opened[v]})
			}
			srv.fb.tick(now())
		}
		return got
	}
	// Forty TTLs (20 minutes) of the steady state, then ten more in
	// which every answer must be right.
	first := -1
	for r := range 40 {
		if got := round(); got[cdn] == 2 && first < 0 {
			first = r + 1
		}
	}
	for r := range 10 {
		got := round()
		for _, src := range sources[1:] {
			if got[src] != 1 {
				t.Errorf("TTL %d: small resolver %s: %d records, want 1", 41+r, src, got[src])
			}
		}
		if got[cdn] != 2 {
			t.Errorf("TTL %d: CDN resolver: %d records, want 2", 41+r, got[cdn])
		}
	}
	bigs := srv.BigResolvers()
	if len(bigs) != 1 || bigs[0].Prefix.String() != "127.0.9.0/24" || bigs[0].Share != 0 || math.Abs(bigs[0].Audience-60.0/68) > 0.1 {
		t.Errorf("BigResolvers %+v, want 127.0.9.0/24 alone, by its audience (about %.2f), not its queries", bigs, 60.0/68)
	}
	m := gathered(t, reg)
	if m["corral_dns_resolver_audience_big"] != 1 || m["corral_dns_resolver_audience_tracked"] != 5 || m["corral_dns_resolvers/big"] != 0 {
		t.Errorf("metrics: audience big %v, tracked %v, big by queries %v; want 1, 5, 0", m["corral_dns_resolver_audience_big"], m["corral_dns_resolver_audience_tracked"], m["corral_dns_resolvers/big"])
	}
	rec := httptest.NewRecorder()
	srv.HealthHandler().ServeHTTP(rec, httptest.NewRequest("GET", "/health", nil))
	if body := rec.Body.String(); !strings.Contains(body, "share of the sessions (audience)") || !strings.Contains(body, "127.0.9.0/24") || !strings.Contains(body, "resolver audiences") {
		t.Errorf("health page without the audience:\n%s", body)
	}
	t.Logf("big first after %d TTLs; after 50: %+v", first, bigs)

	// Its hosts leave: it is small again.
	rates[cdn] = 0
	for r := range 40 {
		if got := round(); got[cdn] == 1 {
			t.Logf("small again after %d TTLs", r+1)
			return
		}
	}
	t.Fatalf("the CDN resolver, whose hosts left, is still big: %+v", srv.BigResolvers())
}

// TestAudienceConfigErrors: audience learning needs resolver-aware
// answers and load feedback, and a half-life that is not negative.
func TestAudienceConfigErrors(t *testing.T) {
	for _, tc := range []struct{ block, want string }{
		{"resolvers: {enabled: true, audience: true}", "resolvers.audience: authdns: learns from the origins' load reports: needs feedback.nats"},
		{"resolvers: {audience: true}\nfeedback: {nats: \"nats://127.0.0.1:1\"}", "resolvers.audience: authdns: needs resolvers.enabled: true"},
		{"resolvers: {enabled: true, audience: true, half_life: -1s}\nfeedback: {nats: \"nats://127.0.0.1:1\"}", "resolvers.half_life: authdns: must not be negative"},
	} {
		_, err := ParseConfig("dns.yaml", []byte(strings.Replace(audienceZone, "feedback: {nats: \"nats://127.0.0.1:1\", interval: 1h, timeout: 10s}\nresolvers: {enabled: true, audience: true, window: 1h, big_share: 0.25}", tc.block, 1)))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.block, err, tc.want)
		}
	}
}

// TestAudienceReadsEachOrigin: an origin's rate is its own counter's
// growth, and a record's is the sum over the origins of its host (two
// hubs on 10.0.0.1 at 10 and 30 a second: 40); a tick without a newer
// report keeps the classes; an origin whose count falls (restarted) is a
// baseline, and while it is the set learns nothing.
func TestAudienceReadsEachOrigin(t *testing.T) {
	a := newAudience(ResolversConfig{Enabled: true, Audience: true, BigShare: 0.5})
	set := &rrset{values: []string{"10.0.0.1", "10.0.0.2"}, learn: true, ttl: 3600}
	set.learnKey = setKey(set)
	now := time.Unix(1000, 0)
	a.answered(set, 1, []int{0}, now) // resolver 1's hosts go to 10.0.0.1
	a.answered(set, 2, []int{1}, now) // resolver 2's to 10.0.0.2
	counts := map[string]uint64{}
	rates := map[string]uint64{"10.0.0.1:8080": 10, "10.0.0.1:8081": 30, "10.0.0.2:8080": 10}
	reports := func() []originReport {
		var out []originReport
		for addr, r := range rates {
			counts[addr] += r
			out = append(out, originReport{addr: addr, host: strings.Split(addr, ":")[0], opened: counts[addr], at: now})
		}
		return out
	}
	step := func(rs []originReport) {
		a.tick([]*rrset{set}, rs, now, time.Second, 10*time.Second)
		now = now.Add(time.Second)
	}
	var rs []originReport
	for range 300 {
		rs = reports()
		step(rs)
	}
	est := func() (float64, float64) {
		sa := a.sets[set.learnKey]
		return sa.aud.Est[sa.slot[1]], sa.aud.Est[sa.slot[2]]
	}
	e1, e2 := est()
	if math.Abs(e1-40) > 1 || math.Abs(e2-10) > 1 {
		t.Fatalf("estimates %.2f and %.2f sessions a second, want 40 (both origins of 10.0.0.1) and 10", e1, e2)
	}
	if !a.big.Load().has(1) || a.big.Load().has(2) {
		t.Fatalf("big: 1 %v, 2 %v; want 1 only (40 of 50)", a.big.Load().has(1), a.big.Load().has(2))
	}
	// Ticks with no newer report: the same classes, the same estimates.
	step(rs)
	step(rs)
	if f1, f2 := est(); !a.big.Load().has(1) || f1 != e1 || f2 != e2 {
		t.Errorf("after ticks without a newer report: big %v, estimates %v %v, want %v %v", a.big.Load().has(1), f1, f2, e1, e2)
	}
	// 10.0.0.2's origin restarts: its count falls; the set learns nothing
	// until a second report gives its rate, then goes on.
	counts["10.0.0.2:8080"] = 0
	before1, before2 := est()
	step(reports())
	if f1, f2 := est(); f1 != before1 || f2 != before2 || !a.big.Load().has(1) {
		t.Errorf("at the restarted origin's baseline: estimates %.3f %.3f, want %.3f %.3f unchanged, 1 still big", f1, f2, before1, before2)
	}
	step(reports())
	if f1, _ := est(); f1 == before1 {
		t.Error("after the restarted origin's second report the set still learns nothing")
	}
}

// TestAudienceNotesOnlyAnswersSent: an answer that rate limiting drops
// or slips (sent truncated, without its records) is not noted, on the
// fast path and the general one; the resolver's last noted answer stays
// the one it got.
func TestAudienceNotesOnlyAnswersSent(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(*dns.Msg)
	}{{"fast path", nil}, {"general path", func(m *dns.Msg) { m.SetEdns0(1232, false) }}} {
		t.Run(tc.name, func(t *testing.T) {
			at := time.Unix(5000, 0)
			zone := strings.Replace(audienceZone, "rrl: {enabled: false}", "rrl: {enabled: true, rate: 1, slip: 2}", 1)
			s, err := New(decodeConfig(t, zone), Options{Now: func() time.Time { return at }})
			if err != nil {
				t.Fatal(err)
			}
			w := newWorker(s, &stats{}, 1)
			req := mkQuery("w.corral.test", dns.TypeA, tc.edit)
			out := make([]byte, 0, 4096)
			asked := func() time.Time {
				a := s.res.aud
				a.mu.Lock()
				defer a.mu.Unlock()
				for _, sa := range a.sets {
					for i, k := range sa.keys {
						if k != 0 {
							return sa.asked[i]
						}
					}
				}
				return time.Time{}
			}
			w.handle(req, loopback, false, out) // the one answer a second the limit allows
			first := asked()
			if !first.Equal(at) {
				t.Fatalf("the answer sent was not noted (asked %v)", first)
			}
			for range 10 { // the same second: dropped or slipped
				at = at.Add(time.Millisecond)
				w.handle(req, loopback, false, out)
			}
			if got := asked(); !got.Equal(first) {
				t.Errorf("answers the rate limit kept back were noted (asked %v, want %v)", got, first)
			}
			if w.st.rrlDropped.Load()+w.st.rrlSlipped.Load() == 0 {
				t.Fatal("nothing rate limited: the test tests nothing")
			}
		})
	}
}
