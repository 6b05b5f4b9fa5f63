package authdns

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
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
feedback: {nats: "nats://127.0.0.1:1", timeout: 10s, max_step: 2}
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

// TestFeedbackSeesAFullOrigin: a report's capacity reaches the step: an
// origin whose sessions fill its capacity, with nothing in flight and
// no shedding, loses weight; one with the same capacity mostly free
// gains.
func TestFeedbackSeesAFullOrigin(t *testing.T) {
	cfg, err := ParseConfig("dns.yaml", []byte(`
listen: 127.0.0.1:0
feedback: {nats: "nats://127.0.0.1:1"}
zones:
  - origin: corral.test
    soa: {mname: ns1.corral.test, rname: hostmaster.corral.test, serial: 1}
    ns: [ns1.corral.test]
    records:
      - {name: ns1, type: A, values: [127.0.0.1]}
      - {name: w, type: A, policy: weighted, values: [{value: 10.0.0.1, weight: 1}, {value: 10.0.0.2, weight: 1}]}
`))
	if err != nil {
		t.Fatal(err)
	}
	now := time.Unix(1000, 0)
	srv, err := New(cfg, Options{Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range []loadreport.Report{
		{Node: "full", Addr: "10.0.0.1:8080", Sessions: 30_000, Capacity: 30_000, Limit: 64},
		{Node: "room", Addr: "10.0.0.2:8080", Sessions: 3_000, Capacity: 30_000, Limit: 64},
	} {
		b, _ := json.Marshal(r)
		srv.fb.receive(&nats.Msg{Data: b})
	}
	srv.fb.tick(now)
	got := map[string]float64{}
	for _, w := range srv.FeedbackWeights() {
		got[w.Value] = w.Effective
	}
	if got["10.0.0.1"] != 0.75 || got["10.0.0.2"] != 1.25 { // one max_step (0.25) down and up
		t.Fatalf("effective weights %v: want the full origin at 0.75, the other at 1.25", got)
	}
}

// TestFeedbackConfigRefusesZeros: a bound the file sets to 0 would be
// its default (answer.FeedbackConfig reads 0 as absent), so it is
// refused with its key; absent keys take the defaults, as does a
// FeedbackConfig built in code with zero fields.
func TestFeedbackConfigRefusesZeros(t *testing.T) {
	const zone = `
zones:
  - origin: corral.test
    soa: {mname: ns1.corral.test, rname: hostmaster.corral.test, serial: 1}
    ns: [ns1.corral.test]
    records:
      - {name: ns1, type: A, values: [127.0.0.1]}
`
	for _, key := range []string{"hysteresis", "floor", "ceiling", "max_step", "timeout", "interval", "max_ttl"} {
		for _, zero := range []string{"0", "0.0"} {
			if key == "timeout" || key == "interval" || key == "max_ttl" {
				zero = map[string]string{"0": "0", "0.0": "0s"}[zero]
			}
			t.Run(key+": "+zero, func(t *testing.T) {
				_, err := ParseConfig("dns.yaml", []byte("feedback: {nats: \"nats://127.0.0.1:1\", "+key+": "+zero+"}\n"+zone))
				if err == nil || !strings.Contains(err.Error(), "feedback."+key+": ") || !strings.Contains(err.Error(), "0 is not usable") {
					t.Fatalf("explicit %s: %s: %v, want an error naming feedback.%s", key, zero, err, key)
				}
			})
		}
	}
	for _, tc := range []struct{ value, want string }{
		{"1500ms", "must be whole seconds"},
		{"-5s", "must not be negative"},
		{"4294967296s", "must be at most 2147483647s"},
	} {
		_, err := ParseConfig("dns.yaml", []byte("feedback: {nats: \"nats://127.0.0.1:1\", max_ttl: "+tc.value+"}\n"+zone))
		if err == nil || !strings.Contains(err.Error(), "feedback.max_ttl: ") || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("max_ttl %s: %v, want an error naming feedback.max_ttl that says %q", tc.value, err, tc.want)
		}
	}
	cfg, err := ParseConfig("dns.yaml", []byte("feedback: {nats: \"nats://127.0.0.1:1\", hysteresis: 0.01}\n"+zone))
	if err != nil {
		t.Fatal(err)
	}
	if b := cfg.Feedback.bounds(); b.Hysteresis != 0.01 || b.MaxStep != 0.25 || b.Floor != 0.1 || b.Timeout != 5*time.Second || b.MaxTTL != 30*time.Second {
		t.Fatalf("bounds %+v: want hysteresis 0.01 as given, the rest the defaults", b)
	}
	inCode := DefaultConfig()
	inCode.Feedback = FeedbackConfig{NATS: "nats://127.0.0.1:1"}
	inCode.Zones = cfg.Zones
	if err := inCode.Validate(); err != nil {
		t.Fatalf("a feedback block built in code with zero bounds (the defaults): %v", err)
	}
}

// TestFeedbackConfigRefusesZerosFromEnv: an environment override of a
// bound to 0 is refused with its key as the file's is; a positive one is
// taken.
func TestFeedbackConfigRefusesZerosFromEnv(t *testing.T) {
	path := filepath.Join(t.TempDir(), "dns.yaml")
	text := ` # the file sets no bound: the environment alone does
feedback: {nats: "nats://127.0.0.1:1"}
zones:
  - origin: corral.test
    soa: {mname: ns1.corral.test, rname: hostmaster.corral.test, serial: 1}
    ns: [ns1.corral.test]
    records:
      - {name: ns1, type: A, values: [127.0.0.1]}
`
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("CORRAL_DNS_FEEDBACK_HYSTERESIS", "0")
	t.Setenv("CORRAL_DNS_FEEDBACK_MAX_STEP", "0.5")
	if _, err := LoadConfig(path); err == nil || !strings.Contains(err.Error(), "feedback.hysteresis: ") || !strings.Contains(err.Error(), "0 is not usable") {
		t.Fatalf("CORRAL_DNS_FEEDBACK_HYSTERESIS=0: %v, want an error naming feedback.hysteresis", err)
	}
	t.Setenv("CORRAL_DNS_FEEDBACK_HYSTERESIS", "0.02")
	cfg, err := LoadConfig(path)
	if err != nil {
		t.Fatal(err)
	}
	if b := cfg.Feedback.bounds(); b.Hysteresis != 0.02 || b.MaxStep != 0.5 {
		t.Fatalf("bounds %+v: want the environment's hysteresis 0.02 and max_step 0.5", b)
	}
}

// TestReloadKeepsFeedback: a reload that changes the feedback block keeps
// the running settings and says so in the log; the zones it loads are
// served under the running feedback's TTL cap.
func TestReloadKeepsFeedback(t *testing.T) {
	text := `
listen: 127.0.0.1:0
feedback: {nats: "nats://127.0.0.1:1", interval: %s, max_ttl: %s}
zones:
  - origin: corral.test
    soa: {mname: ns1.corral.test, rname: hostmaster.corral.test, serial: 1}
    ns: [ns1.corral.test]
    records:
      - {name: ns1, type: A, values: [127.0.0.1]}
      - {name: w, type: A, ttl: 60s, policy: weighted, values: [{value: 10.0.0.1, weight: 1}, {value: 10.0.0.2, weight: 1}]}
`
	wTTL := func(s *Server) uint32 {
		var ttl uint32
		s.state.Load().zones.eachSet(func(set *rrset) {
			if set.owner == "w.corral.test." {
				ttl = set.ttl
			}
		})
		return ttl
	}
	cfg, err := ParseConfig("dns.yaml", fmt.Appendf(nil, text, "1s", "20s"))
	if err != nil {
		t.Fatal(err)
	}
	var logs testkit.SyncBuffer
	srv, err := New(cfg, Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	if got := wTTL(srv); got != 20 {
		t.Fatalf("the weighted set's TTL %d, want the cap of 20", got)
	}
	next, err := ParseConfig("dns.yaml", fmt.Appendf(nil, text, "2s", "10s"))
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Reload(next); err != nil {
		t.Fatal(err)
	}
	if got := wTTL(srv); got != 20 {
		t.Errorf("the weighted set's TTL %d after a reload that asks for 10s, want the running cap of 20", got)
	}
	if !strings.Contains(logs.String(), "feedback changes need a restart") {
		t.Fatalf("reload log without the feedback warning:\n%s", logs.String())
	}
	if srv.cfg.Feedback.Interval != time.Second {
		t.Fatalf("feedback interval %v after the reload, want the running 1s", srv.cfg.Feedback.Interval)
	}
}
