package main

import (
	"encoding/pem"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/corralhq/corral/internal/testkit"
)

// TestSubPubTrustAPrivateCA: against a hub serving wss and https with a
// self-signed certificate for hub.corral.test, `corral sub --ca-file
// --server-name` receives what `corral pub --ca-file --server-name`
// publishes; without --ca-file both fail with the certificate error and
// the flag to pass; a missing or non-PEM CA file is refused by name.
func TestSubPubTrustAPrivateCA(t *testing.T) {
	cert, _ := testkit.SelfSignedCert(t, "hub.corral.test")
	certFile, keyFile := writeCert(t, cert)
	t.Setenv("CORRAL_HUB_TLS_CERT_FILE", certFile)
	t.Setenv("CORRAL_HUB_TLS_KEY_FILE", keyFile)
	h := startExampleHub(t, "", t.TempDir())
	defer h.stop(t)
	t.Setenv("CORRAL_TOKEN", devToken(t, "--channels", "news.*"))
	t.Setenv("CORRAL_API_KEY", exampleAPIKey)
	dir := t.TempDir()
	caFile := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cert.Certificate[0]}), 0o600); err != nil {
		t.Fatal(err)
	}
	notPEM := filepath.Join(dir, "junk.pem")
	if err := os.WriteFile(notPEM, []byte("not a certificate\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	trust := []string{"--ca-file", caFile, "--server-name", "hub.corral.test"}

	sub := start(append(append([]string{"sub", "--count", "1"}, trust...), "wss://"+h.addr, "news.eu"))
	testkit.WaitFor(t, 20*time.Second, "sub subscribed", func() bool { return strings.Contains(sub.err.String(), "subscribed to news.eu") || sub.exited() })
	if code, out, errOut := corral(t, append(append([]string{"pub", "--tenant", "demo"}, trust...), "https://"+h.addr, "news.eu", "over tls")...); code != 0 {
		t.Fatalf("pub over https: exit %d, %q %q", code, out, errOut)
	}
	if code := sub.wait(t); code != 0 {
		t.Fatalf("sub --count 1: exit %d: %s", code, sub.err.String())
	}
	if got := sub.stdout.String(); got != "[news.eu #1] over tls\n" {
		t.Fatalf("sub printed %q (stderr %s)", got, sub.err.String())
	}
	if code, out, errOut := corral(t, append(append([]string{"pub", "--tenant", "demo"}, trust...), "grpcs://"+h.grpc, "news.eu", "over grpcs")...); code != 0 || !strings.Contains(out, "offset 2") {
		t.Fatalf("pub over grpcs: exit %d, %q %q", code, out, errOut)
	}

	for _, tc := range []struct {
		name string
		args []string
		want []string
	}{
		{"sub without --ca-file", []string{"sub", "--server-name", "hub.corral.test", "wss://" + h.addr, "news.eu"},
			[]string{"x509: certificate signed by unknown authority", "pass --ca-file"}},
		{"pub over https without --ca-file", []string{"pub", "--tenant", "demo", "--server-name", "hub.corral.test", "https://" + h.addr, "news.eu", "x"},
			[]string{"x509: certificate signed by unknown authority", "pass --ca-file"}},
		{"pub over grpcs without --ca-file", []string{"pub", "--tenant", "demo", "--server-name", "hub.corral.test", "grpcs://" + h.grpc, "news.eu", "x"},
			[]string{"x509: certificate signed by unknown authority", "pass --ca-file"}},
		{"sub with another name than the certificate's", []string{"sub", "--ca-file", caFile, "wss://" + h.addr, "news.eu"},
			[]string{"x509: cannot validate certificate for 127.0.0.1", "pass --server-name"}},
		{"pub over grpcs with another name than the certificate's", []string{"pub", "--tenant", "demo", "--ca-file", caFile, "--server-name", "other.corral.test", "grpcs://" + h.grpc, "news.eu", "x"},
			[]string{"x509: certificate is valid for hub.corral.test, not other.corral.test", "pass --server-name"}},
		{"sub with a missing CA file", []string{"sub", "--ca-file", filepath.Join(dir, "none.pem"), "wss://" + h.addr, "news.eu"},
			[]string{"sub: --ca-file: open ", "no such file"}},
		{"pub with a CA file that holds no certificate", []string{"pub", "--tenant", "demo", "--ca-file", notPEM, "https://" + h.addr, "news.eu", "x"},
			[]string{"pub: --ca-file " + notPEM + " holds no PEM certificate"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errOut := corral(t, tc.args...)
			if code == 0 || out != "" {
				t.Fatalf("exit %d, stdout %q: want a failure", code, out)
			}
			for _, w := range tc.want {
				if !strings.Contains(errOut, w) {
					t.Errorf("stderr %q does not say %q", errOut, w)
				}
			}
		})
	}
}
