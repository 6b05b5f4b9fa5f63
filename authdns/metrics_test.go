package authdns

import (
	"strings"
	"testing"

	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestMetricsCountQueries(t *testing.T) {
	reg := prometheus.NewRegistry()
	_, addr := startServer(t, testZone, Options{Registerer: reg})
	ask(t, addr, "udp", "multi.corral.test", dns.TypeA, nil)
	ask(t, addr, "tcp", "multi.corral.test", dns.TypeA, nil)
	ask(t, addr, "udp", "nope.corral.test", dns.TypeAAAA, nil)
	ask(t, addr, "udp", "big.corral.test", dns.TypeTXT, nil)
	want := `
# HELP corral_dns_policy_answers_total Answers chosen by a routing policy, by policy.
# TYPE corral_dns_policy_answers_total counter
corral_dns_policy_answers_total{policy="cidr"} 0
corral_dns_policy_answers_total{policy="failover"} 0
corral_dns_policy_answers_total{policy="multivalue"} 2
corral_dns_policy_answers_total{policy="shuffle"} 0
corral_dns_policy_answers_total{policy="simple"} 1
corral_dns_policy_answers_total{policy="weighted"} 0
corral_dns_policy_answers_total{policy="weighted-subset"} 0
# HELP corral_dns_truncated_total UDP responses sent truncated (TC) because the answer did not fit.
# TYPE corral_dns_truncated_total counter
corral_dns_truncated_total 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "corral_dns_policy_answers_total", "corral_dns_truncated_total"); err != nil {
		t.Error(err)
	}
	got := gathered(t, reg)
	for k, v := range map[string]float64{
		"corral_dns_queries_total/A": 2, "corral_dns_queries_total/AAAA": 1, "corral_dns_queries_total/TXT": 1,
		"corral_dns_responses_total/NXDOMAIN": 1, "corral_dns_responses_total/NOERROR": 3,
		"corral_dns_response_size_bytes": 4,
	} {
		if got[k] != v {
			t.Errorf("%s = %v, want %v", k, got[k], v)
		}
	}
}
