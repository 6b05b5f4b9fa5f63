package authdns_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/corralhq/corral/authdns"
	"github.com/corralhq/corral/internal/loadreport"
	"github.com/corralhq/corral/internal/natsutil"
	"github.com/corralhq/corral/internal/testkit"
)

// ttlZone is a zone of 60 s whose sets the feedback TTL cap reaches (the
// weighted, multivalue and weighted-subset ones) or not (simple, failover,
// and a weighted set whose own TTL is under the cap).
const ttlZone = `
zones:
  - origin: corral.test
    ttl: 60s
    soa: {mname: ns1.corral.test, rname: hostmaster.corral.test, serial: 1}
    ns: [ns1.corral.test]
    records:
      - {name: ns1, type: A, values: [127.0.0.1]}
      - {name: w, type: A, policy: weighted, values: [{value: 10.0.0.1, weight: 1}, {value: 10.0.0.2, weight: 1}]}
      - {name: m, type: A, policy: multivalue, values: [10.0.0.1, 10.0.0.2]}
      - {name: ws, type: A, policy: weighted-subset, n: 1, values: [{value: 10.0.0.1, weight: 1}, {value: 10.0.0.2, weight: 1}]}
      - {name: short, type: A, policy: weighted, ttl: 20s, values: [{value: 10.0.0.1, weight: 1}, {value: 10.0.0.2, weight: 1}]}
      - {name: s, type: A, values: [10.0.0.1, 10.0.0.2]}
      - {name: f, type: A, policy: failover, values: [{value: 10.0.0.1}, {value: 10.0.0.2, secondary: true}]}
`

// answerTTLs asks srv for name's A records over UDP without EDNS, over
// UDP with EDNS (the fast path) and over TCP, and returns the TTL of
// every answer record of the three, failing on an empty answer.
func answerTTLs(t *testing.T, addr, name string) []uint32 {
	t.Helper()
	var ttls []uint32
	for _, q := range []struct {
		net  string
		edns bool
	}{{"udp", false}, {"udp", true}, {"tcp", false}} {
		m := new(dns.Msg)
		m.SetQuestion(name, dns.TypeA)
		if q.edns {
			m.SetEdns0(1232, false)
		}
		c := &dns.Client{Net: q.net, Timeout: 5 * time.Second}
		r, _, err := c.Exchange(m, addr)
		if err != nil {
			t.Fatalf("%s over %s (EDNS %v): %v", name, q.net, q.edns, err)
		}
		if len(r.Answer) == 0 {
			t.Fatalf("%s over %s (EDNS %v): no answer: %v", name, q.net, q.edns, r)
		}
		for _, rr := range r.Answer {
			ttls = append(ttls, rr.Header().Ttl)
		}
	}
	return ttls
}

// TestFeedbackCapsAnswerTTL: with load feedback on, authdns answers the
// sets feedback weights with at most feedback.max_ttl (30 s when the key
// is absent, the value given otherwise), over UDP (fast and general
// path) and TCP, while an origin's reports move the weights; a set of
// another policy, a set whose TTL is under the cap and every set without
// feedback keep their TTL. The health page, its JSON and the metrics
// show each fed set's TTL.
func TestFeedbackCapsAnswerTTL(t *testing.T) {
	ns, err := natsutil.StartServer(natsutil.Config{Listen: "127.0.0.1:0"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ns.Shutdown)
	url := ns.Server.ClientURL()
	pub, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pub.Close)

	for _, tc := range []struct {
		name     string
		feedback string // the feedback block, "" for none
		fed      uint32 // the TTL of w, m and ws
	}{
		{"feedback on, max_ttl absent: the default 30s", fmt.Sprintf("{nats: %q, interval: 50ms, timeout: 10s}", url), 30},
		{"feedback on, max_ttl 10s", fmt.Sprintf("{nats: %q, interval: 50ms, timeout: 10s, max_ttl: 10s}", url), 10},
		{"feedback on, a cap above the TTLs leaves them", fmt.Sprintf("{nats: %q, interval: 50ms, timeout: 10s, max_ttl: 1h}", url), 60},
		{"feedback off", "", 60},
	} {
		t.Run(tc.name, func(t *testing.T) {
			text := "listen: 127.0.0.1:0\nrrl: {enabled: false}\n"
			if tc.feedback != "" {
				text += "feedback: " + tc.feedback + "\n"
			}
			cfg, err := authdns.ParseConfig("dns.yaml", []byte(text+ttlZone))
			if err != nil {
				t.Fatal(err)
			}
			reg := prometheus.NewRegistry()
			srv, err := authdns.New(cfg, authdns.Options{Registerer: reg})
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- srv.Run(ctx) }()
			defer func() { cancel(); <-done }()
			<-srv.Started()
			addr := srv.Addr().String()

			if tc.feedback != "" {
				// A loaded origin and an idle one: the weights move, the
				// answers that carry them are held at most the cap.
				b, _ := json.Marshal(loadreport.Report{Node: "a", Addr: "10.0.0.1:8080", Stage: 5})
				b2, _ := json.Marshal(loadreport.Report{Node: "b", Addr: "10.0.0.2:8080"})
				testkit.WaitFor(t, 30*time.Second, "the weights moved by the reports", func() bool {
					_ = pub.Publish(loadreport.DefaultSubject, b)
					_ = pub.Publish(loadreport.DefaultSubject, b2)
					_ = pub.Flush()
					return effective(srv, "10.0.0.1") < 1 && effective(srv, "10.0.0.2") > 1
				})
			}
			for name, want := range map[string]uint32{
				"w.corral.test.": tc.fed, "m.corral.test.": tc.fed, "ws.corral.test.": tc.fed,
				"short.corral.test.": min(20, tc.fed), "s.corral.test.": 60, "f.corral.test.": 60,
			} {
				for _, ttl := range answerTTLs(t, addr, name) {
					if ttl != want {
						t.Errorf("%s: TTL %d, want %d", name, ttl, want)
					}
				}
			}
			if tc.feedback == "" {
				return
			}
			rec := httptest.NewRecorder()
			srv.HealthHandler().ServeHTTP(rec, httptest.NewRequest("GET", "/health", nil))
			wantCell := fmt.Sprintf("%ds (60s)", tc.fed)
			if body := rec.Body.String(); !strings.Contains(body, wantCell) || !strings.Contains(body, "feedback.max_ttl") {
				t.Errorf("health page without the TTL %q and the cap:\n%s", wantCell, body)
			}
			for _, w := range srv.FeedbackWeights() {
				want := fmt.Sprintf("%ds", tc.fed)
				if w.Name == "short.corral.test." {
					want = fmt.Sprintf("%ds", min(20, tc.fed))
				}
				if w.TTL != want {
					t.Errorf("FeedbackWeights %s %s: ttl %q, want %q", w.Name, w.Value, w.TTL, want)
				}
			}
			mfs, err := reg.Gather()
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, mf := range mfs {
				if mf.GetName() != "corral_dns_feedback_ttl_seconds" {
					continue
				}
				for _, m := range mf.GetMetric() {
					series := ""
					for _, l := range m.GetLabel() {
						series += l.GetName() + "=" + l.GetValue() + " "
					}
					got = append(got, fmt.Sprintf("%s%g", series, m.GetGauge().GetValue()))
				}
			}
			want := []string{ // one series per fed set, sorted by its labels
				fmt.Sprintf("name=m.corral.test. type=A %d", tc.fed), fmt.Sprintf("name=short.corral.test. type=A %d", min(20, tc.fed)),
				fmt.Sprintf("name=w.corral.test. type=A %d", tc.fed), fmt.Sprintf("name=ws.corral.test. type=A %d", tc.fed),
			}
			if strings.Join(got, ", ") != strings.Join(want, ", ") {
				t.Errorf("corral_dns_feedback_ttl_seconds:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
			}
		})
	}
}
