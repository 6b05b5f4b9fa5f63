package authdns

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/corralhq/corral/internal/loadreport"
	"github.com/corralhq/corral/internal/testkit"
)

// TestFeedbackMatchesAndShows: reports are matched to record values by
// address or host (a host with two origins takes the more loaded one), a
// set of another policy is left alone, a bad report is counted, and the
// health page and FeedbackWeights show the effective weights.
func TestFeedbackMatchesAndShows(t *testing.T) {
	cfg, err := ParseConfig("dns.yaml", []byte(`
listen: 127.0.0.1:0
feedback: {nats: "nats://127.0.0.1:1", timeout: 10s, max_step: 2, hysteresis: 0}
zones:
  - origin: corral.test
    soa: {mname: ns1.corral.test, rname: hostmaster.corral.test, serial: 1}
    ns: [ns1.corral.test]
    records:
      - {name: ns1, type: A, values: [127.0.0.1]}
      - name: w
        type: A
        policy: weighted
        values: [{value: 10.0.0.1, weight: 2}, {value: 10.0.0.2, weight: 1}, {value: 10.0.0.3, weight: 1}]
      - {name: m, type: A, policy: multivalue, values: [10.0.0.1, 10.0.0.2]}
      - {name: s, type: A, values: [10.0.0.1, 10.0.0.2]}
`))
	if err != nil {
		t.Fatal(err)
	}
	now := time.Unix(1000, 0)
	srv, err := New(cfg, Options{Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	send := func(r loadreport.Report) {
		b, _ := json.Marshal(r)
		srv.fb.receive(&nats.Msg{Data: b})
	}
	send(loadreport.Report{Node: "a1", Addr: "10.0.0.1:8080", Stage: 5}) // lifeboat
	send(loadreport.Report{Node: "a2", Addr: "10.0.0.1:8081"})           // idle, same host
	send(loadreport.Report{Node: "b", Addr: "10.0.0.2:8080"})            // idle
	srv.fb.receive(&nats.Msg{Data: []byte(`{"node":"no address"}`)})
	srv.fb.tick(now)
	got := map[string]float64{}
	for _, w := range srv.FeedbackWeights() {
		got[w.Name+" "+w.Value] = w.Effective
	}
	want := map[string]float64{
		"w.corral.test. 10.0.0.1": 2 * 0.1, // the lifeboat origin of the host counts
		"w.corral.test. 10.0.0.2": 1 * 2,
		"w.corral.test. 10.0.0.3": 1, // never heard from: configured
		"m.corral.test. 10.0.0.1": 0.1,
		"m.corral.test. 10.0.0.2": 2,
	}
	if len(got) != len(want) {
		t.Fatalf("weights %v, want %v (the simple set is not fed)", got, want)
	}
	for k, v := range want {
		if d := got[k] - v; d > 1e-9 || d < -1e-9 {
			t.Errorf("%s: effective %v, want %v", k, got[k], v)
		}
	}
	if srv.fb.reports[1].Load() != 1 {
		t.Errorf("bad reports %d, want 1", srv.fb.reports[1].Load())
	}
	rec := httptest.NewRecorder()
	srv.HealthHandler().ServeHTTP(rec, httptest.NewRequest("GET", "/health", nil))
	if body := rec.Body.String(); !strings.Contains(body, "load feedback: effective weights") || !strings.Contains(body, "10.0.0.1:8080") {
		t.Fatalf("health page without the feedback tables:\n%s", body)
	}
	rec = httptest.NewRecorder()
	srv.HealthHandler().ServeHTTP(rec, httptest.NewRequest("GET", "/health?format=json", nil))
	var js struct {
		Feedback []FeedbackWeight `json:"feedback"`
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &js); err != nil || len(js.Feedback) != 5 {
		t.Fatalf("health JSON %s: %v", rec.Body.String(), err)
	}
	now = now.Add(11 * time.Second) // every report older than the timeout
	srv.fb.tick(now)
	for _, w := range srv.FeedbackWeights() {
		if w.Effective != w.Configured {
			t.Errorf("%s %s after the timeout: effective %v, configured %v", w.Name, w.Value, w.Effective, w.Configured)
		}
	}
}

// TestReloadKeepsFeedback: a reload that changes the feedback block keeps
// the running settings and says so in the log.
func TestReloadKeepsFeedback(t *testing.T) {
	text := `
listen: 127.0.0.1:0
feedback: {nats: "nats://127.0.0.1:1", interval: %s}
zones:
  - origin: corral.test
    soa: {mname: ns1.corral.test, rname: hostmaster.corral.test, serial: 1}
    ns: [ns1.corral.test]
    records:
      - {name: ns1, type: A, values: [127.0.0.1]}
`
	cfg, err := ParseConfig("dns.yaml", fmt.Appendf(nil, text, "1s"))
	if err != nil {
		t.Fatal(err)
	}
	var logs testkit.SyncBuffer
	srv, err := New(cfg, Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	next, err := ParseConfig("dns.yaml", fmt.Appendf(nil, text, "2s"))
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Reload(next); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(logs.String(), "feedback changes need a restart") {
		t.Fatalf("reload log without the feedback warning:\n%s", logs.String())
	}
	if srv.cfg.Feedback.Interval != time.Second {
		t.Fatalf("feedback interval %v after the reload, want the running 1s", srv.cfg.Feedback.Interval)
	}
}
