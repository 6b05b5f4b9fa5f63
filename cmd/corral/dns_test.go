package main

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/corralhq/corral/internal/testkit"
)

func TestDNSValidateExample(t *testing.T) {
	code, out, errOut := corral(t, "dns", "validate", "--config", "../../examples/dns.yaml")
	if code != 0 || !strings.Contains(out, "ok") {
		t.Fatalf("examples/dns.yaml: exit %d, %s %s", code, out, errOut)
	}
}

func TestDNSValidateNamesFileLineKey(t *testing.T) {
	p := filepath.Join(t.TempDir(), "dns.yaml")
	body := "listen: 127.0.0.1:0\nzones:\n  - origin: corral.test\n    ns: [ns1]\n    records:\n      - {name: a, type: A, values: [10.0.0.300]}\n"
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, errOut := corral(t, "dns", "validate", "--config", p)
	if code == 0 || !strings.Contains(errOut, p+":6:") || !strings.Contains(errOut, "zones[0].records[0].values[0]") {
		t.Fatalf("exit %d, stderr %q: want the file, line 6 and the key", code, errOut)
	}
}

// TestDNSWithoutConfigPointsAtTheExample: the built-in defaults hold no
// zone, and the message says where a complete config is.
func TestDNSWithoutConfigPointsAtTheExample(t *testing.T) {
	for _, args := range [][]string{{"dns", "--listen", "127.0.0.1:0"}, {"dns"}} {
		code, _, errOut := corral(t, args...)
		if code == 0 || !strings.Contains(errOut, "at least one zone is needed") || !strings.Contains(errOut, "corral dns --config examples/dns.yaml") {
			t.Errorf("corral %s: exit %d, stderr %q: want the missing zone and the example named", strings.Join(args, " "), code, errOut)
		}
	}
}

// TestDNSConfigTTLsTakeDurationsOrSeconds: a zone's and a record's TTL and
// the SOA's times are durations or plain seconds, and a TTL the wire
// cannot carry is refused with its key.
func TestDNSConfigTTLsTakeDurationsOrSeconds(t *testing.T) {
	dir := t.TempDir()
	write := func(body string) string {
		p := filepath.Join(dir, "dns.yaml")
		if err := os.WriteFile(p, []byte("listen: 127.0.0.1:0\nzones:\n  - origin: corral.test\n    ns: [ns1]\n"+body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	for _, body := range []string{
		"    ttl: 60s\n    soa: {refresh: 1h, retry: 600, expire: 1w, minimum: 30s}\n    records: [{name: a, type: A, ttl: 5m, values: [10.0.0.1]}]\n",
		"    ttl: 60\n    records: [{name: a, type: A, ttl: 300, values: [10.0.0.1]}]\n",
	} {
		if code, _, errOut := corral(t, "dns", "validate", "--config", write(body)); code != 0 {
			t.Errorf("%q: exit %d, %s", body, code, errOut)
		}
	}
	for _, tc := range []struct{ body, want string }{
		{"    ttl: 1.5s\n", "zones[0].ttl: authdns: must be whole seconds"},
		{"    records: [{name: a, type: A, ttl: 100000d, values: [10.0.0.1]}]\n", "zones[0].records[0].ttl"},
		{"    soa: {minimum: -1s}\n", "zones[0].soa.minimum: authdns: must not be negative"},
		{"    ttl: soon\n", "plain seconds"},
	} {
		code, _, errOut := corral(t, "dns", "validate", "--config", write(tc.body))
		if code == 0 || !strings.Contains(errOut, tc.want) {
			t.Errorf("%q: exit %d, stderr %q, want %q", tc.body, code, errOut, tc.want)
		}
	}
}

// freePort returns a port that was free for UDP and TCP a moment ago.
func freePort(t *testing.T) string {
	t.Helper()
	for range 20 {
		pc, err := net.ListenPacket("udp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		_, port, _ := net.SplitHostPort(pc.LocalAddr().String())
		l, err := net.Listen("tcp", "127.0.0.1:"+port)
		pc.Close()
		if err == nil {
			l.Close()
			return port
		}
	}
	t.Fatal("no free port")
	return ""
}

// TestDNSServesExample runs `corral dns` on the shipped example and asks
// for multi.corral.test, as README.md tells users to.
func TestDNSServesExample(t *testing.T) {
	addr := "127.0.0.1:" + freePort(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	var out, errb testkit.SyncBuffer
	go func() {
		done <- run(ctx, []string{"dns", "--config", "../../examples/dns.yaml", "--listen", addr, "--admin", "127.0.0.1:0", "--log-format", "json"}, &out, &errb)
	}()
	defer func() {
		cancel()
		if code := <-done; code != 0 {
			t.Errorf("corral dns exit %d: %s", code, errb.String())
		} else if t.Failed() {
			t.Logf("corral dns stderr: %s", errb.String())
		}
	}()
	m := new(dns.Msg)
	m.SetQuestion("multi.corral.test.", dns.TypeA)
	c := &dns.Client{Timeout: time.Second}
	var r *dns.Msg
	testkit.WaitFor(t, 20*time.Second, "an answer from corral dns", func() bool {
		var err error
		r, _, err = c.Exchange(m, addr)
		return err == nil
	})
	if r.Rcode != dns.RcodeSuccess || len(r.Answer) != 8 {
		t.Fatalf("multi.corral.test: %v", r)
	}
}
