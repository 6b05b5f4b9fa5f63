package authdns

import (
	"testing"

	"github.com/miekg/dns"
)

func TestAXFRAllowedByAddress(t *testing.T) {
	cfg := decodeConfig(t, testZone)
	_, addr := startConfig(t, cfg, Options{})
	tr := &dns.Transfer{}
	m := new(dns.Msg)
	m.SetAxfr("corral.test.")
	env, err := tr.In(m, addr)
	if err != nil {
		t.Fatal(err)
	}
	var rrs []dns.RR
	for e := range env {
		if e.Error != nil {
			t.Fatal(e.Error)
		}
		rrs = append(rrs, e.RR...)
	}
	if len(rrs) < 40 || rrs[0].Header().Rrtype != dns.TypeSOA || rrs[len(rrs)-1].Header().Rrtype != dns.TypeSOA {
		t.Fatalf("transfer of %d records, want SOA ... SOA with every record", len(rrs))
	}

	refused := decodeConfig(t, testZone)
	refused.AXFRAllow = []string{"10.0.0.0/8"}
	_, addr2 := startConfig(t, refused, Options{})
	r := ask(t, addr2, "tcp", "corral.test", dns.TypeAXFR, nil)
	if r.Rcode != dns.RcodeRefused {
		t.Errorf("AXFR from a client outside axfr_allow: %s, want REFUSED", dns.RcodeToString[r.Rcode])
	}
}

// TestSocketsShareThePort: with sockets: 3 the server binds three UDP
// sockets to one port (SO_REUSEPORT) and answers on UDP and TCP there.
func TestSocketsShareThePort(t *testing.T) {
	cfg := decodeConfig(t, testZone)
	cfg.Sockets = 3
	s, addr := startConfig(t, cfg, Options{})
	s.mu.Lock()
	n := len(s.udp)
	ports := map[string]bool{}
	for _, c := range s.udp {
		ports[c.LocalAddr().String()] = true
	}
	s.mu.Unlock()
	if reusePortSupported && (n != 3 || len(ports) != 1) {
		t.Fatalf("%d sockets on %d addresses, want 3 on one", n, len(ports))
	}
	for i := range 20 {
		network := []string{"udp", "tcp"}[i%2]
		if r := ask(t, addr, network, "static.corral.test", dns.TypeA, nil); len(r.Answer) != 2 {
			t.Fatalf("%s: %v", network, r)
		}
	}
}
