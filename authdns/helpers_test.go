package authdns

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/corralhq/corral/internal/config"
)

// testZone is a zone with one record set of every policy and type.
var testZone = `
listen: 127.0.0.1:0
sockets: 2
rrl: {enabled: false}
axfr_allow: [127.0.0.0/8]
zones:
  - origin: corral.test
    ttl: 60
    soa: {mname: ns1.corral.test, rname: hostmaster.corral.test, serial: 7, minimum: 30}
    ns: [ns1.corral.test]
    records:
      - {name: ns1, type: A, values: [127.0.0.1]}
      - {name: static, type: A, values: [192.0.2.1, 192.0.2.2]}
      - name: multi
        type: A
        policy: multivalue
        values: [10.0.0.1, 10.0.0.2, 10.0.0.3, 10.0.0.4, 10.0.0.5, 10.0.0.6, 10.0.0.7, 10.0.0.8, 10.0.0.9, 10.0.0.10]
      - name: weighted
        type: A
        policy: weighted
        values: [{value: 10.1.0.1, weight: 1}, {value: 10.1.0.2, weight: 3}]
      - name: subset
        type: A
        policy: weighted-subset
        n: 3
        values: [{value: 10.2.0.1, weight: 1}, {value: 10.2.0.2, weight: 1}, {value: 10.2.0.3, weight: 1}, {value: 10.2.0.4, weight: 1}, {value: 10.2.0.5, weight: 1}, {value: 10.2.0.6, weight: 1}]
      - name: "*.tenants"
        type: A
        policy: shuffle
        shuffle: {secret: 000102030405060708090a0b0c0d0e0f, hand_size: 4}
        values: [10.3.0.1, 10.3.0.2, 10.3.0.3, 10.3.0.4, 10.3.0.5, 10.3.0.6, 10.3.0.7, 10.3.0.8, 10.3.0.9, 10.3.0.10, 10.3.0.11, 10.3.0.12, 10.3.0.13, 10.3.0.14, 10.3.0.15, 10.3.0.16]
      - name: geo
        type: A
        policy: cidr
        locations: {eu: [10.9.0.0/16], us: [172.16.0.0/12]}
        values: [{value: 10.4.0.1, location: eu}, {value: 10.4.0.2, location: us}, {value: 10.4.0.3, location: "*"}]
      - {name: big, type: TXT, values: ["` + bigTXT + `", "` + bigTXT + `"]}
      - {name: six, type: AAAA, values: ["2001:db8::1"]}
      - {name: www, type: CNAME, values: [static]}
      - {name: away, type: CNAME, values: [example.net.]}
      - {name: "@", type: MX, values: ["10 mail"]}
      - {name: _x._tcp, type: SRV, values: ["1 2 443 static"]}
      - {name: "@", type: CAA, values: ['0 issue "ca.example"']}
`

// bigTXT is 400 bytes: two of them do not fit in 512 bytes.
var bigTXT = strings.Repeat("x", 400)

// decodeConfig reads YAML text over the defaults.
func decodeConfig(t testing.TB, text string) *Config {
	t.Helper()
	cfg := DefaultConfig()
	if err := config.Decode("test.yaml", []byte(text), &cfg, config.Options{}); err != nil {
		t.Fatal(err)
	}
	return &cfg
}

// startServer runs a server for the YAML text and returns it with its
// address once it serves.
func startServer(t testing.TB, text string, opts Options) (*Server, string) {
	t.Helper()
	return startConfig(t, decodeConfig(t, text), opts)
}

func startConfig(t testing.TB, cfg *Config, opts Options) (*Server, string) {
	t.Helper()
	if opts.Registerer == nil {
		opts.Registerer = prometheus.NewRegistry()
	}
	s, err := New(cfg, opts)
	if err != nil {
		t.Fatal(err)
	}
	return startRunning(t, s)
}

// startRunning runs s until the test ends and returns it with its address
// once it serves.
func startRunning(t testing.TB, s *Server) (*Server, string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- s.Run(ctx) }()
	<-s.Started()
	if s.Ready() != nil {
		cancel()
		t.Fatalf("server did not start: %v", <-errc)
	}
	t.Cleanup(func() {
		cancel()
		sctx, c2 := context.WithTimeout(context.Background(), 5*time.Second)
		defer c2()
		if err := s.Shutdown(sctx); err != nil {
			t.Error(err)
		}
		if err := <-errc; err != nil {
			t.Error(err)
		}
	})
	return s, s.Addr().String()
}

// ask sends one query with miekg/dns over net ("udp" or "tcp").
func ask(t testing.TB, addr, network, name string, qtype uint16, edit func(*dns.Msg)) *dns.Msg {
	t.Helper()
	m := new(dns.Msg)
	m.SetQuestion(dns.Fqdn(name), qtype)
	m.RecursionDesired = false
	if edit != nil {
		edit(m)
	}
	c := &dns.Client{Net: network, Timeout: 5 * time.Second, UDPSize: 65535}
	r, _, err := c.Exchange(m, addr)
	if err != nil {
		t.Fatalf("%s %s %s: %v", network, name, dns.TypeToString[qtype], err)
	}
	return r
}

// answerSet returns the sorted presentation of the data of r's answers.
func answerData(r *dns.Msg) []string {
	var out []string
	for _, rr := range r.Answer {
		f := strings.Fields(rr.String())
		out = append(out, strings.Join(f[4:], " "))
	}
	return out
}

func writeFile(t testing.TB, dir, body string) string {
	t.Helper()
	p := filepath.Join(dir, "dns.yaml")
	tmp := p + ".tmp"
	if err := os.WriteFile(tmp, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, p); err != nil {
		t.Fatal(err)
	}
	return p
}

var loopback = netip.MustParseAddr("127.0.0.1")

func netParse(s string) net.IP { return net.ParseIP(s).To4() }

func testLogger(w io.Writer) *slog.Logger { return slog.New(slog.NewTextHandler(w, nil)) }

// checkedSet returns, for the check names, the YAML items of a health
// checks list (TCP checks of an unused port, probed hourly) and of a
// record's values list, value 10.0.0.<i+1> checked by names[i], indented
// to stand under "health: checks:" and under a record of "zones: records:".
func checkedSet(names ...string) (checks, values string) {
	var c, v strings.Builder
	for i, n := range names {
		fmt.Fprintf(&c, "    - {name: %s, kind: tcp, address: \"127.0.0.1:1\", interval: 1h}\n", n)
		fmt.Fprintf(&v, "          - {value: 10.0.0.%d, check: %s}\n", i+1, n)
	}
	return c.String(), v.String()
}

// lbNames are the 8 check names of the multivalue case of bench/dns/run.sh.
var lbNames = []string{"lb-1", "lb-2", "lb-3", "lb-4", "lb-5", "lb-6", "lb-7", "lb-8"}
