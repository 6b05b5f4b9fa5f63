package authdns

import (
	"context"
	"net"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// runClient runs dig or kdig against the server and returns its output.
// The tools come from Debian's bind9-dnsutils and knot-dnsutils, which
// scripts/test.sh installs.
func runClient(t *testing.T, tool, addr string, args ...string) string {
	t.Helper()
	path, err := exec.LookPath(tool)
	if err != nil {
		t.Skipf("%s is not installed (scripts/test.sh installs it)", tool)
	}
	host, port, _ := net.SplitHostPort(addr)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	all := []string{"@" + host, "-p", port, "+time=2", "+tries=2"}
	if tool == "kdig" {
		all = []string{"@" + host, "-p", port, "+timeout=2", "+retry=1"}
	}
	all = append(all, args...)
	out, err := exec.CommandContext(ctx, path, all...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", tool, strings.Join(all, " "), err, out)
	}
	return string(out)
}

// TestRealClients asks dig and kdig, over UDP and TCP, with and without
// EDNS, and checks what they print.
func TestRealClients(t *testing.T) {
	_, addr := startServer(t, testZone, Options{})
	tests := []struct {
		name string
		tool string
		args []string
		want []string // substrings of the output
		not  []string
	}{
		{"dig udp multivalue", "dig", []string{"multi.corral.test", "A"}, []string{"status: NOERROR", "flags: qr aa", "ANSWER: 8,", "udp: 1232"}, nil},
		{"dig tcp multivalue", "dig", []string{"+tcp", "multi.corral.test", "A"}, []string{"status: NOERROR", "ANSWER: 8,", "(TCP)"}, nil},
		{"kdig udp static", "kdig", []string{"static.corral.test", "A"}, []string{"status: NOERROR", "192.0.2.1", "192.0.2.2"}, nil},
		{"kdig tcp static", "kdig", []string{"+tcp", "static.corral.test", "A"}, []string{"status: NOERROR", "192.0.2.1", "TCP"}, nil},
		{"dig nxdomain", "dig", []string{"nope.corral.test", "A"}, []string{"status: NXDOMAIN", "AUTHORITY: 1", "SOA"}, nil},
		{"kdig nodata", "kdig", []string{"static.corral.test", "MX"}, []string{"status: NOERROR", "AUTHORITY SECTION", "SOA"}, nil},
		{"dig refused", "dig", []string{"example.com", "A"}, []string{"status: REFUSED"}, nil},
		{"dig truncation without EDNS", "dig", []string{"+noedns", "+ignore", "big.corral.test", "TXT"}, []string{"flags: qr aa tc", "ANSWER: 0,"}, nil},
		{"dig retries truncated over TCP", "dig", []string{"+noedns", "big.corral.test", "TXT"}, []string{"Truncated, retrying in TCP mode", "ANSWER: 2,"}, nil},
		{"kdig big answer fits with EDNS", "kdig", []string{"+bufsize=1232", "big.corral.test", "TXT"}, []string{"status: NOERROR", "ANSWER: 2;", "(UDP)"}, []string{" tc"}},
		{"kdig EDNS 512 truncates", "kdig", []string{"+bufsize=512", "+ignore", "big.corral.test", "TXT"}, []string{"tc"}, nil},
		{"dig BADVERS", "dig", []string{"+edns=1", "+noednsnegotiation", "static.corral.test"}, []string{"status: BADVERS"}, nil},
		{"kdig client subnet", "kdig", []string{"+subnet=10.9.1.0/24", "geo.corral.test"}, []string{"CLIENT-SUBNET: 10.9.1.0/24/16", "10.4.0.1"}, nil},
		{"dig tenant hand", "dig", []string{"acme.tenants.corral.test"}, []string{"ANSWER: 4,"}, nil},
		{"kdig axfr", "kdig", []string{"corral.test", "AXFR"}, []string{"corral.test.", "SOA", "10.3.0.16"}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out := runClient(t, tc.tool, addr, tc.args...)
			for _, w := range tc.want {
				if !strings.Contains(out, w) {
					t.Errorf("output lacks %q:\n%s", w, out)
				}
			}
			for _, w := range tc.not {
				if strings.Contains(out, w) {
					t.Errorf("output holds %q:\n%s", w, out)
				}
			}
		})
	}
}
