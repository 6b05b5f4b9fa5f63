package authdns

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/corralhq/corral/internal/testkit"

	"github.com/miekg/dns"
)

// TestUnhealthyOriginLeavesAnswers runs a real HTTP origin behind an http
// check: when it starts failing, its record leaves the multivalue answers
// once the failure threshold is reached, and comes back after recovery.
func TestUnhealthyOriginLeavesAnswers(t *testing.T) {
	var failing atomic.Bool
	origin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		if failing.Load() {
			http.Error(w, "down", http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ok")
	}))
	defer origin.Close()
	const threshold = 3
	yaml := fmt.Sprintf(`
listen: 127.0.0.1:0
rrl: {enabled: false}
health:
  checks:
    - {name: origin, kind: http, url: %q, interval: 20ms, failure_threshold: %d, success_threshold: 2}
zones:
  - origin: corral.test
    ns: [ns1.corral.test]
    records:
      - name: multi
        type: A
        policy: multivalue
        values: [{value: 10.0.0.1, check: origin}, 10.0.0.2, 10.0.0.3]
`, origin.URL+"/healthz", threshold)
	s, addr := startServer(t, yaml, Options{})
	has := func(want bool) func() bool {
		return func() bool {
			r := ask(t, addr, "udp", "multi.corral.test", dns.TypeA, nil)
			return slices.Contains(answerData(r), "10.0.0.1") == want
		}
	}
	testkit.WaitFor(t, 10*time.Second, "the checked record in the answers", has(true))

	failing.Store(true)
	testkit.WaitFor(t, 10*time.Second, "the failing record to leave the answers", has(false))
	st, _ := s.Checker().StatusOf("origin")
	if st.Healthy || st.Failures < threshold {
		t.Errorf("record left after %d failed probes (healthy %v), want at least %d", st.Failures, st.Healthy, threshold)
	}
	// It stays out while the origin fails.
	for range 20 {
		if !has(false)() {
			t.Fatal("unhealthy record answered")
		}
	}

	failing.Store(false)
	testkit.WaitFor(t, 10*time.Second, "the record to return after recovery", has(true))
	if st, _ := s.Checker().StatusOf("origin"); !st.Healthy {
		t.Error("record answered while its check is unhealthy")
	}
}

// TestAllUnhealthyFailsOpen: when every record of a multivalue set is
// unhealthy the answer still holds them (Route 53 fails open).
func TestAllUnhealthyFailsOpen(t *testing.T) {
	yaml := `
listen: 127.0.0.1:0
health:
  checks:
    - {name: a, kind: tcp, address: "127.0.0.1:1", interval: 1h, initial: unhealthy}
    - {name: b, kind: tcp, address: "127.0.0.1:1", interval: 1h, initial: unhealthy}
zones:
  - origin: corral.test
    ns: [ns1.corral.test]
    records:
      - {name: m, type: A, policy: multivalue, values: [{value: 10.0.0.1, check: a}, {value: 10.0.0.2, check: b}]}
`
	s := newServer(t, yaml)
	r, _ := handleRaw(t, s, mkQuery("m.corral.test", dns.TypeA, nil), false)
	if len(r.Answer) != 2 {
		t.Fatalf("answers %v, want both records (fail open)", r.Answer)
	}
}

func newServer(t *testing.T, yaml string) *Server {
	t.Helper()
	s, err := New(decodeConfig(t, yaml), Options{})
	if err != nil {
		t.Fatal(err)
	}
	return s
}
