package authdns

import (
	"context"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
)

const (
	tsigName   = "xfr.corral.test."
	tsigSecret = "3q2+7wAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=" // base64 of 32 bytes
)

// tsigZone is testZone with transfers that need the key xfr.corral.test,
// read from the environment variable CORRAL_TEST_TSIG, and 2,000 records
// so that the transfer takes several messages, each signed.
func tsigZone(t *testing.T) string {
	t.Helper()
	t.Setenv("CORRAL_TEST_TSIG", tsigSecret)
	var b strings.Builder
	b.WriteString(strings.Replace(testZone, "axfr_allow: [127.0.0.0/8]", `axfr_allow: [127.0.0.0/8]
axfr_tsig: [xfr.corral.test]
tsig_keys:
  - {name: xfr.corral.test, secret_env: CORRAL_TEST_TSIG}`, 1))
	for i := range 2000 {
		fmt.Fprintf(&b, "      - {name: h%d, type: A, values: [10.7.%d.%d]}\n", i, i/256, i%256)
	}
	return b.String()
}

// transferWith runs a miekg/dns client transfer signed with secret under
// name (no TSIG when name is empty) and returns its records or its error.
func transferWith(addr, qtype, name, alg, secret string) ([]dns.RR, error) {
	m := new(dns.Msg)
	if qtype == "IXFR" {
		m.SetIxfr("corral.test.", 0, "ns1.corral.test.", "hostmaster.corral.test.")
	} else {
		m.SetAxfr("corral.test.")
	}
	tr := &dns.Transfer{}
	if name != "" {
		m.SetTsig(name, alg, 300, time.Now().Unix())
		tr.TsigSecret = map[string]string{name: secret}
	}
	env, err := tr.In(m, addr)
	if err != nil {
		return nil, err
	}
	var rrs []dns.RR
	for e := range env {
		if e.Error != nil {
			return rrs, e.Error
		}
		rrs = append(rrs, e.RR...)
	}
	return rrs, nil
}

// TestTransferTSIG: with axfr_tsig, a transfer signed with the key gets the
// whole zone in signed messages (miekg/dns's client verifies each); one
// without a TSIG, with an unknown key or a bad MAC gets NOTAUTH.
func TestTransferTSIG(t *testing.T) {
	_, addr := startServer(t, tsigZone(t), Options{})
	for _, qtype := range []string{"AXFR", "IXFR"} {
		rrs, err := transferWith(addr, qtype, tsigName, dns.HmacSHA256, tsigSecret)
		if err != nil {
			t.Fatalf("%s signed with the key: %v", qtype, err)
		}
		if len(rrs) < 2040 || rrs[0].Header().Rrtype != dns.TypeSOA || rrs[len(rrs)-1].Header().Rrtype != dns.TypeSOA {
			t.Fatalf("%s: %d records, want SOA, every record, SOA", qtype, len(rrs))
		}
	}
	if _, err := transferWith(addr, "AXFR", "", "", ""); err == nil || !strings.Contains(err.Error(), "9") {
		t.Errorf("unsigned AXFR: %v, want refused with NOTAUTH (9)", err)
	}
	other := base64.StdEncoding.EncodeToString([]byte("another secret of 32 bytes......"))
	tests := []struct {
		name, key, alg, secret string
		tsigErr                uint16
	}{
		{"wrong secret", tsigName, dns.HmacSHA256, other, dns.RcodeBadSig},
		{"unknown key", "other.corral.test.", dns.HmacSHA256, tsigSecret, dns.RcodeBadKey},
		{"other algorithm", tsigName, dns.HmacSHA512, tsigSecret, dns.RcodeBadKey},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := rawTransfer(t, addr, tc.key, tc.alg, tc.secret, time.Now())
			ts := r.IsTsig()
			if r.Rcode != rcodeNotAuth || ts == nil || ts.Error != tc.tsigErr || ts.MAC != "" || len(r.Answer) != 0 {
				t.Fatalf("got %s, TSIG %v, %d answers; want NOTAUTH with an unsigned TSIG error %s", dns.RcodeToString[r.Rcode], ts, len(r.Answer), dns.RcodeToString[int(tc.tsigErr)])
			}
		})
	}
	t.Run("clock skew", func(t *testing.T) {
		r := rawTransfer(t, addr, tsigName, dns.HmacSHA256, tsigSecret, time.Now().Add(-time.Hour))
		ts := r.IsTsig()
		if r.Rcode != rcodeNotAuth || ts == nil || ts.Error != dns.RcodeBadTime || ts.MAC == "" || ts.OtherLen != 6 {
			t.Fatalf("got %s, TSIG %v; want NOTAUTH with a signed BADTIME carrying the server's time", dns.RcodeToString[r.Rcode], ts)
		}
	})
	// Plain queries need no TSIG.
	if r := ask(t, addr, "udp", "static.corral.test", dns.TypeA, nil); len(r.Answer) != 2 {
		t.Errorf("a query: %v", r)
	}
}

// rawTransfer sends an AXFR signed at signed over TCP and returns the first
// response, unverified.
func rawTransfer(t *testing.T, addr, key, alg, secret string, signed time.Time) *dns.Msg {
	t.Helper()
	m := new(dns.Msg)
	m.SetAxfr("corral.test.")
	m.SetTsig(key, alg, 300, signed.Unix())
	req, _, err := dns.TsigGenerate(m, secret, "", false)
	if err != nil {
		t.Fatal(err)
	}
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	b := binary.BigEndian.AppendUint16(nil, uint16(len(req)))
	if _, err := c.Write(append(b, req...)); err != nil {
		t.Fatal(err)
	}
	var lb [2]byte
	if _, err := io.ReadFull(c, lb[:]); err != nil {
		t.Fatal(err)
	}
	resp := make([]byte, binary.BigEndian.Uint16(lb[:]))
	if _, err := io.ReadFull(c, resp); err != nil {
		t.Fatal(err)
	}
	r := new(dns.Msg)
	if err := r.Unpack(resp); err != nil {
		t.Fatal(err)
	}
	return r
}

// TestTransferTSIGWithDig runs BIND's dig and Knot's kdig, when installed,
// with -y against the server: the signed transfer verifies, a wrong key
// fails.
func TestTransferTSIGWithDig(t *testing.T) {
	_, addr := startServer(t, tsigZone(t), Options{})
	host, port, _ := net.SplitHostPort(addr)
	ran := 0
	for _, tool := range []string{"dig", "kdig"} {
		path, err := exec.LookPath(tool)
		if err != nil {
			continue
		}
		ran++
		run := func(key string) (string, error) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			out, err := exec.CommandContext(ctx, path, "@"+host, "-p", port, "-y", key, "AXFR", "corral.test").CombinedOutput()
			return string(out), err
		}
		out, err := run("hmac-sha256:" + tsigName + ":" + tsigSecret)
		if err != nil || !strings.Contains(out, "h1999.corral.test.") || strings.Contains(out, "failed") || strings.Contains(out, ";; ERROR") || strings.Contains(out, "Couldn't verify") {
			t.Errorf("%s -y with the key: %v\n%s", tool, err, tail(out))
		}
		out, _ = run("hmac-sha256:" + tsigName + ":" + base64.StdEncoding.EncodeToString([]byte("wrong")))
		if strings.Contains(out, "h1999.corral.test.") || !strings.Contains(out, "BADSIG") {
			t.Errorf("%s -y with a wrong secret was not refused with BADSIG:\n%s", tool, tail(out))
		}
	}
	if ran == 0 {
		t.Skip("neither dig nor kdig is installed")
	}
}

func tail(s string) string {
	l := strings.Split(strings.TrimSpace(s), "\n")
	return strings.Join(l[max(0, len(l)-8):], "\n")
}

func TestTSIGConfigErrors(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.key")
	if err := os.WriteFile(good, []byte(tsigSecret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	notB64 := filepath.Join(dir, "bad.key")
	if err := os.WriteFile(notB64, []byte("not base64!"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("CORRAL_TEST_SET", tsigSecret)
	os.Unsetenv("CORRAL_TEST_UNSET")
	tests := []struct {
		name string
		yaml string
		want string // "" for valid
	}{
		{"secret from a file", `{name: k, secret_file: ` + good + `}`, ""},
		{"secret from the environment, sha512", `{name: k, algorithm: HMAC-SHA512, secret_env: CORRAL_TEST_SET}`, ""},
		{"no secret source", `{name: k}`, "tsig_keys[0]: authdns: key k.: the secret comes from secret_env or secret_file"},
		{"both sources", `{name: k, secret_env: CORRAL_TEST_SET, secret_file: ` + good + `}`, "not both"},
		{"unset variable", `{name: k, secret_env: CORRAL_TEST_UNSET}`, "CORRAL_TEST_UNSET of its secret is not set"},
		{"missing file", `{name: k, secret_file: ` + filepath.Join(dir, "none") + `}`, "reading its secret"},
		{"not base64", `{name: k, secret_file: ` + notB64 + `}`, "not base64"},
		{"unknown algorithm", `{name: k, algorithm: hmac-md5, secret_env: CORRAL_TEST_SET}`, "tsig_keys[0].algorithm: authdns: unknown algorithm"},
		{"inline secret is no key", `{name: k, secret: abc}`, "secret"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			text := strings.Replace(testZone, "axfr_allow: [127.0.0.0/8]", "axfr_allow: [127.0.0.0/8]\naxfr_tsig: [k]\ntsig_keys: ["+tc.yaml+"]", 1)
			_, err := ParseConfig("test.yaml", []byte(text))
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("error %v, want one saying %q", err, tc.want)
			}
		})
	}
	text := strings.Replace(testZone, "axfr_allow: [127.0.0.0/8]", "axfr_allow: [127.0.0.0/8]\naxfr_tsig: [nokey]", 1)
	if _, err := ParseConfig("test.yaml", []byte(text)); err == nil || !strings.Contains(err.Error(), `axfr_tsig[0]: authdns: unknown TSIG key "nokey"`) {
		t.Errorf("unknown key in axfr_tsig: %v", err)
	}
}

// TestSignedTransferWithoutRequiredKey: with tsig_keys but no axfr_tsig an
// unsigned transfer goes on, a signed one is verified and answered signed,
// and one signed with a key the server does not know gets BADKEY (RFC 8945
// section 5.2).
func TestSignedTransferWithoutRequiredKey(t *testing.T) {
	text := strings.Replace(tsigZone(t), "axfr_tsig: [xfr.corral.test]\n", "", 1)
	_, addr := startServer(t, text, Options{})
	if rrs, err := transferWith(addr, "AXFR", "", "", ""); err != nil || len(rrs) < 2040 {
		t.Fatalf("unsigned transfer: %d records, %v", len(rrs), err)
	}
	if rrs, err := transferWith(addr, "AXFR", tsigName, dns.HmacSHA256, tsigSecret); err != nil || len(rrs) < 2040 {
		t.Fatalf("signed transfer: %d records, %v", len(rrs), err)
	}
	r := rawTransfer(t, addr, "other.corral.test.", dns.HmacSHA256, tsigSecret, time.Now())
	if ts := r.IsTsig(); r.Rcode != rcodeNotAuth || ts == nil || ts.Error != dns.RcodeBadKey {
		t.Fatalf("unknown key: %s %v, want NOTAUTH with BADKEY", dns.RcodeToString[r.Rcode], ts)
	}
}
