package authdns

import (
	"flag"
	"fmt"
	"os"
	"sort"
	"strings"
	"testing"

	"github.com/miekg/dns"

	"github.com/corralhq/corral/internal/config"
)

var updateGolden = flag.Bool("update", false, "rewrite testdata/compiled.golden")

// goldenExtra adds to testZone values that exercise the naming rule, case,
// escapes and the less common fields of each type.
const goldenExtra = `      - {name: up, type: CNAME, values: [WWW.Corral.Test.]}
      - {name: mx2, type: MX, values: ["5 Mail.Example.NET."]}
      - {name: txt2, type: TXT, values: ['hello "world" \ back', ""]}
      - {name: caa2, type: CAA, values: ['128 iodef "mailto:a@b.c"', '0 issuewild ";"']}
      - {name: Mixed.Case, type: A, values: [1.2.3.4]}
      - {name: srv2, type: SRV, values: ["0 0 0 ."]}
`

// dumpCompiled renders every packed byte of the zones compiled from text.
func dumpCompiled(t *testing.T, b *strings.Builder, text string) {
	t.Helper()
	cfg := DefaultConfig()
	if err := config.Decode("x.yaml", []byte(text), &cfg, config.Options{}); err != nil {
		t.Fatal(err)
	}
	zs, err := compile(&cfg, cfg.Feedback, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	keys := make([]string, 0, len(zs.zones))
	for k := range zs.zones {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		z := zs.zones[k]
		fmt.Fprintf(b, "zone %x %s soa %x neg %x\n", z.origin, z.name, z.soa, z.negSOA)
		for _, n := range z.order {
			fmt.Fprintf(b, " node %x %s\n", n.name, presentation(n.name))
			for _, s := range n.sets {
				fmt.Fprintf(b, "  set %d pol %d rrs %x targets %x\n", s.rtype, s.policy, s.rrs, s.targets)
			}
		}
	}
}

// TestCompiledBytesGolden pins every byte the zone compiler packs for the
// test zone (with goldenExtra) and examples/dns.yaml. The golden file was
// written by corral's former hand-written encoder, so the move to
// github.com/miekg/dns changed no byte of any answer.
func TestCompiledBytesGolden(t *testing.T) {
	ex, err := os.ReadFile("../examples/dns.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	dumpCompiled(t, &b, testZone+goldenExtra)
	dumpCompiled(t, &b, string(ex))
	const path = "testdata/compiled.golden"
	if *updateGolden {
		if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if got := b.String(); got != string(want) {
		gl, wl := strings.Split(got, "\n"), strings.Split(string(want), "\n")
		for i := range min(len(gl), len(wl)) {
			if gl[i] != wl[i] {
				t.Fatalf("line %d differs:\n got %s\nwant %s", i+1, gl[i], wl[i])
			}
		}
		t.Fatalf("got %d lines, want %d", len(gl), len(wl))
	}
}

// TestValues checks what a configured value becomes, read back with
// miekg/dns: the naming rule (relative, absolute, already ending in the
// origin), lower-cased names, TXT as plain text in 255-byte strings.
func TestValues(t *testing.T) {
	long := strings.Repeat("a", 300)
	tests := []struct {
		name  string
		rtype uint16
		value string
		want  string // the record's presentation, owner "." and TTL 60
	}{
		{"A", typeA, "192.0.2.1", ".\t60\tIN\tA\t192.0.2.1"},
		{"AAAA", typeAAAA, "2001:DB8::1", ".\t60\tIN\tAAAA\t2001:db8::1"},
		{"relative CNAME", typeCNAME, "www", ".\t60\tIN\tCNAME\twww.corral.test."},
		{"CNAME ending in the origin", typeCNAME, "www.corral.test", ".\t60\tIN\tCNAME\twww.corral.test."},
		{"absolute CNAME lower-cased", typeCNAME, "Away.Example.NET.", ".\t60\tIN\tCNAME\taway.example.net."},
		{"MX", typeMX, "10 mail", ".\t60\tIN\tMX\t10 mail.corral.test."},
		{"SRV", typeSRV, "1 2 443 svc.other.test.", ".\t60\tIN\tSRV\t1 2 443 svc.other.test."},
		{"CAA", typeCAA, `0 issue "ca.example; account=1"`, ".\t60\tIN\tCAA\t0 issue \"ca.example; account=1\""},
		{"TXT plain text keeps quotes and backslashes", typeTXT, `say "hi" \o/`, ".\t60\tIN\tTXT\t\"say \\\"hi\\\" \\\\o/\""},
		{"TXT longer than 255 is split", typeTXT, long, ".\t60\tIN\tTXT\t\"" + long[:255] + "\" \"" + long[255:] + "\""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rec, err := parseValue(tc.rtype, tc.value, "corral.test.")
			if err != nil {
				t.Fatal(err)
			}
			b, err := packRR(rec, tc.rtype, 60)
			if err != nil {
				t.Fatal(err)
			}
			back, _, err := dns.UnpackRR(append([]byte{0}, b...), 0)
			if err != nil {
				t.Fatal(err)
			}
			if back.String() != tc.want {
				t.Fatalf("%q packed to %q, want %q", tc.value, back.String(), tc.want)
			}
		})
	}
}

// TestBadValuesNameTheKey checks that values miekg/dns rejects, and the
// ones corral refuses on top, stop the load with file:line and the key.
func TestBadValuesNameTheKey(t *testing.T) {
	base := "listen: 127.0.0.1:0\nzones:\n  - origin: corral.test\n    ns: [ns1]\n    records:\n      - {name: ok, type: A, values: [192.0.2.1]}\n"
	tests := []struct {
		name, record, want string
	}{
		{"A that is IPv6", "{name: a, type: A, values: [192.0.2.1, '2001:db8::1']}", "bad A value"},
		{"AAAA that is IPv4", "{name: a, type: AAAA, values: [192.0.2.1]}", "bad AAAA value"},
		{"AAAA mapped IPv4", "{name: a, type: AAAA, values: ['::ffff:192.0.2.1']}", "IPv4-mapped"},
		{"MX preference", "{name: a, type: MX, values: ['high mail']}", "bad MX value"},
		{"MX without exchange", "{name: a, type: MX, values: ['10']}", "bad MX value"},
		{"SRV port out of range", "{name: a, type: SRV, values: ['1 2 70000 x']}", "bad SRV value"},
		{"SRV missing target", "{name: a, type: SRV, values: ['1 2 3']}", "bad SRV value"},
		{"CNAME of two names", "{name: a, type: CNAME, values: ['b c']}", "bad CNAME value"},
		{"CAA flags", "{name: a, type: CAA, values: ['300 issue \"x\"']}", "bad CAA value"},
		{"CAA unquoted value with spaces", "{name: a, type: CAA, values: ['0 issue a b']}", "bad CAA value"},
		{"comment in a value", "{name: a, type: A, values: ['192.0.2.1 ; note']}", "comments are not allowed"},
		{"label of 64 bytes", "{name: a, type: CNAME, values: [" + strings.Repeat("x", 64) + "]}", "labels must have 1 to 63"},
		{"empty label", "{name: a, type: CNAME, values: [a..b]}", "labels must have 1 to 63"},
		{"space in an owner", "{name: 'a b', type: A, values: [192.0.2.1]}", "is not allowed"},
		{"leading dot", "{name: .a, type: A, values: [192.0.2.1]}", "labels must have 1 to 63"},
		{"non-ASCII name", "{name: a, type: CNAME, values: [bücher.example.]}", "xn-- form"},
		{"TXT too long", "{name: a, type: TXT, values: [" + strings.Repeat("x", 4001) + "]}", "too long"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			wantConfigError(t, base+"      - "+tc.record+"\n", tc.want, "dns.yaml:7:", "zones[0].records[1].")
		})
	}
}

// wantConfigError decodes text as the file dns.yaml and fails t unless the
// load fails with an error of package authdns that holds every one of
// wants.
func wantConfigError(t *testing.T, text string, wants ...string) {
	t.Helper()
	cfg := DefaultConfig()
	err := config.Decode("dns.yaml", []byte(text), &cfg, config.Options{})
	if err == nil {
		t.Fatal("accepted")
	}
	for _, w := range append(wants, "authdns: ") {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q lacks %q", err, w)
		}
	}
}

// BenchmarkCompile compiles the test zone (16 record sets, 50 records with
// the SOA and NS): the load-time cost of reading values and packing
// records.
func BenchmarkCompile(b *testing.B) {
	cfg := DefaultConfig()
	if err := config.Decode("x.yaml", []byte(testZone), &cfg, config.Options{}); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := compile(&cfg, cfg.Feedback, false, nil); err != nil {
			b.Fatal(err)
		}
	}
}
