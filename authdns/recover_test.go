package authdns

import (
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/corralhq/corral/internal/testkit"
)

// panicOn makes a query hook that panics for names starting with label.
func panicOn(label string) func([]byte) {
	return func(name []byte) {
		if len(name) > 0 && int(name[0]) == len(label) && string(name[1:1+len(label)]) == label {
			var b []byte
			_ = b[len(name)] // index out of range, as a parser bug would
		}
	}
}

// TestPanicInQueryPathAnswersServfail injects a panic on the query path of
// a running server: the query gets SERVFAIL over UDP and TCP, the server
// keeps answering, the panic is counted and logged once per interval.
func TestPanicInQueryPathAnswersServfail(t *testing.T) {
	var logs testkit.SyncBuffer
	reg := prometheus.NewRegistry()
	clock := testkit.NewClock(time.Unix(1000, 0))
	s, err := New(decodeConfig(t, testZone), Options{Registerer: reg, Logger: testLogger(&logs), Now: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	s.queryHook = panicOn("boom")
	_, addr := startRunning(t, s)
	for _, network := range []string{"udp", "tcp", "udp"} {
		r := ask(t, addr, network, "boom.corral.test", dns.TypeA, func(m *dns.Msg) { m.SetEdns0(1232, false) })
		if r.Rcode != dns.RcodeServerFailure || len(r.Question) != 1 || r.Question[0].Name != "boom.corral.test." || r.IsEdns0() == nil {
			t.Fatalf("%s: got rcode %s question %v, want SERVFAIL for the question with its OPT", network, dns.RcodeToString[r.Rcode], r.Question)
		}
		if r := ask(t, addr, network, "static.corral.test", dns.TypeA, nil); r.Rcode != dns.RcodeSuccess || len(r.Answer) != 2 {
			t.Fatalf("%s: the next query got %s with %d answers", network, dns.RcodeToString[r.Rcode], len(r.Answer))
		}
	}
	if err := testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP corral_dns_panics_total Panics recovered while answering a packet (answered SERVFAIL when its question was parsed, else dropped) or on a TCP connection (closed).
# TYPE corral_dns_panics_total counter
corral_dns_panics_total 3
`), "corral_dns_panics_total"); err != nil {
		t.Error(err)
	}
	if n := strings.Count(logs.String(), "recovered from a panic"); n != 1 {
		t.Fatalf("%d panic logs in one interval, want 1:\n%s", n, logs.String())
	}
	clock.Advance(panicLogInterval)
	ask(t, addr, "udp", "boom.corral.test", dns.TypeA, nil)
	if n := strings.Count(logs.String(), "recovered from a panic"); n != 2 || !strings.Contains(logs.String(), "not_logged_since_last=2") {
		t.Fatalf("after the interval: %d panic logs, want 2, the second counting the 2 not logged:\n%s", n, logs.String())
	}
}

// TestRecoveredWithoutQuestionDrops checks the other branch: a panic
// before the question was parsed sends nothing.
func TestRecoveredWithoutQuestionDrops(t *testing.T) {
	s := newTestServer(t)
	w := newWorker(s, &stats{}, 1)
	w.q = query{}
	if resp, o := w.recovered("test", false, make([]byte, 0, 512)); o != outDrop || resp != nil {
		t.Fatalf("got %v %d, want no answer", resp, o)
	}
	if w.st.panics.Load() != 1 || w.st.dropped.Load() != 1 {
		t.Errorf("panics %d dropped %d, want 1 and 1", w.st.panics.Load(), w.st.dropped.Load())
	}
}
