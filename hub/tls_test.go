package hub

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/corralhq/corral/client"
	"github.com/corralhq/corral/internal/testkit"
	"github.com/corralhq/corral/wire"
)

// tlsName is the server name of the test certificates.
const tlsName = "hub.corral.test"

// testCert is a self-signed ECDSA P-256 certificate for tlsName with
// common name cn, and its key, in PEM.
type testCert struct {
	cert            *x509.Certificate
	certPEM, keyPEM []byte
}

func newTestCert(t *testing.T, cn string) testCert {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	serial, _ := rand.Int(rand.Reader, big.NewInt(1<<62))
	tmpl := &x509.Certificate{
		SerialNumber: serial, Subject: pkix.Name{CommonName: cn}, DNSNames: []string{tlsName},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	kder, _ := x509.MarshalPKCS8PrivateKey(key)
	return testCert{cert: cert,
		certPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		keyPEM:  pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder})}
}

// write puts c in dir as cert.pem and key.pem, each with a modification
// time a second after the last one written (a poll sees every rewrite).
func (c testCert) write(t *testing.T, dir string, at time.Time) (certFile, keyFile string) {
	t.Helper()
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	for _, f := range []struct {
		path string
		b    []byte
	}{{certFile, c.certPEM}, {keyFile, c.keyPEM}} {
		if err := os.WriteFile(f.path, f.b, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(f.path, at, at); err != nil {
			t.Fatal(err)
		}
	}
	return certFile, keyFile
}

// startTLSHub runs a hub with TLS on both listeners from cert, its files
// polled every 10ms; it returns the hub and the files' directory.
func startTLSHub(t *testing.T, cert testCert) (*testHub, string) {
	t.Helper()
	dir := t.TempDir()
	certFile, keyFile := cert.write(t, dir, time.Now())
	th := startHub(t, func(c *Config, _ *Options) {
		c.TLS = TLSConfig{CertFile: certFile, KeyFile: keyFile, ReloadInterval: 10 * time.Millisecond}
	})
	return th, dir
}

// trusting returns a client TLS configuration for tlsName trusting certs.
func trusting(certs ...testCert) *tls.Config {
	pool := x509.NewCertPool()
	for _, c := range certs {
		pool.AddCert(c.cert)
	}
	return &tls.Config{RootCAs: pool, ServerName: tlsName}
}

// servedCN makes a fresh handshake (no ticket) with addr offering alpn
// and returns the common name of the certificate served.
func servedCN(t *testing.T, addr string, tc *tls.Config, alpn string) string {
	t.Helper()
	tc = tc.Clone()
	tc.NextProtos = []string{alpn}
	c, err := tls.DialWithDialer(&net.Dialer{Timeout: 10 * time.Second}, "tcp", addr, tc)
	if err != nil {
		t.Fatalf("TLS to %s: %v", addr, err)
	}
	defer c.Close()
	cs := c.ConnectionState()
	if cs.Version != tls.VersionTLS13 || cs.NegotiatedProtocol != alpn {
		t.Fatalf("TLS to %s: version %x, ALPN %q", addr, cs.Version, cs.NegotiatedProtocol)
	}
	return cs.PeerCertificates[0].Subject.CommonName
}

// TestTLSSessions: wss and grpcs through the Go client to a hub with TLS;
// the client's reconnects resume their TLS sessions; a certificate
// replaced on disk is served to new connections while the WebSocket
// session and the gRPC stream opened before keep working.
func TestTLSSessions(t *testing.T) {
	one, two := newTestCert(t, "one"), newTestCert(t, "two")
	th, dir := startTLSHub(t, one)
	_, wsPort, _ := net.SplitHostPort(th.Addr().String())
	_, grpcPort, _ := net.SplitHostPort(th.GRPCAddr().String())
	resolve := func(context.Context, string) ([]netip.Addr, error) {
		return []netip.Addr{netip.MustParseAddr("127.0.0.1")}, nil
	}
	ctx := context.Background()
	subs := map[string]*client.Client{}
	for _, tr := range []struct{ name, addr string }{
		{"wss", "wss://" + tlsName + ":" + wsPort + "/v1/ws"},
		{"grpcs", "grpcs://" + tlsName + ":" + grpcPort},
	} {
		c := dialClient(t, client.Config{Addrs: []string{tr.addr}, TLS: trusting(one, two), Resolve: resolve})
		if _, err := c.Subscribe(ctx, "room"); err != nil {
			t.Fatalf("%s: %v", tr.name, err)
		}
		subs[tr.name] = c
	}
	publish := func(data string) {
		t.Helper()
		if _, err := th.Publish(ctx, PublishRequest{Tenant: "acme", Channel: "room", Data: []byte(data)}); err != nil {
			t.Fatal(err)
		}
		for name, c := range subs {
			if got := collect(t, c, 1); got[0] != data {
				t.Fatalf("%s: got %q, want %q", name, got[0], data)
			}
		}
	}
	publish("m1")
	if n := th.metric("corral_hub_tls_handshakes_total", "kind", "full"); n != 2 {
		t.Fatalf("full handshakes %v, want 2", n)
	}

	// The clients reconnect and resume their TLS sessions.
	th.closeAll(wire.Close{Code: wire.CloseGoingAway, Text: "test"})
	for _, c := range subs {
		nextEvent(t, c, client.EventResumed)
	}
	testkit.WaitFor(t, 10*time.Second, "resumed handshakes", func() bool {
		return th.metric("corral_hub_tls_handshakes_total", "kind", "resumed") >= 2
	})
	if n := th.metric("corral_hub_tls_handshakes_total", "kind", "full"); n != 2 {
		t.Fatalf("full handshakes %v after the reconnects, want still 2", n)
	}
	publish("m2")

	// A new certificate on disk: new connections get it, the open
	// sessions carry on.
	if cn := servedCN(t, th.Addr().String(), trusting(one), "http/1.1"); cn != "one" {
		t.Fatalf("served %q before the change", cn)
	}
	two.write(t, dir, time.Now().Add(time.Minute))
	testkit.WaitFor(t, 10*time.Second, "the new certificate on both listeners", func() bool {
		return servedCN(t, th.Addr().String(), trusting(one, two), "http/1.1") == "two" &&
			servedCN(t, th.GRPCAddr().String(), trusting(one, two), "h2") == "two"
	})
	publish("m3")
	if n := th.metric("corral_hub_tls_reloads_total", "result", "ok"); n != 2 {
		t.Errorf("reloads %v, want 2 (start and change)", n)
	}

	// A broken pair: the second certificate stays.
	if err := os.WriteFile(filepath.Join(dir, "key.pem"), one.keyPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	_ = os.Chtimes(filepath.Join(dir, "key.pem"), time.Now().Add(2*time.Minute), time.Now().Add(2*time.Minute))
	testkit.WaitFor(t, 10*time.Second, "the reload error", func() bool {
		return th.metric("corral_hub_tls_reloads_total", "result", "error") == 1
	})
	if cn := servedCN(t, th.Addr().String(), trusting(one, two), "http/1.1"); cn != "two" {
		t.Fatalf("after a broken pair: served %q, want two", cn)
	}
	publish("m4")
}

// TestWSSFramingChecked: the hub's own frame checks apply to the
// plaintext of a wss connection: an unmasked frame is closed with 1002.
func TestWSSFramingChecked(t *testing.T) {
	one := newTestCert(t, "one")
	th, _ := startTLSHub(t, one)
	tc := trusting(one)
	tc.NextProtos = []string{"http/1.1"}
	c, err := tls.Dial("tcp", th.Addr().String(), tc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	_ = c.SetDeadline(time.Now().Add(20 * time.Second))
	req := "GET /v1/ws HTTP/1.1\r\nHost: corral\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n" +
		"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n" +
		"Sec-WebSocket-Protocol: " + wire.SubprotocolProto + "\r\n\r\n"
	if _, err := io.WriteString(c, req); err != nil {
		t.Fatal(err)
	}
	w := &rawTCPWS{c: c, r: bufio.NewReader(c)}
	resp, err := http.ReadResponse(w.r, nil)
	if err != nil || resp.StatusCode != http.StatusSwitchingProtocols {
		t.Fatalf("upgrade over TLS: %v %v", resp, err)
	}
	tok := token(t, tokenOpts{})
	if _, err := c.Write(clientFrame(2, true, true, helloFrame(t, tok))); err != nil {
		t.Fatal(err)
	}
	if op, _ := w.next(t); op != 2 {
		t.Fatalf("answer to Hello: opcode %d", op)
	}
	if _, err := c.Write(clientFrame(2, true, false, []byte("x"))); err != nil {
		t.Fatal(err)
	}
	code, reason := w.closeCode(t)
	if code != wire.CloseProtocolError || !strings.Contains(reason, "unmasked") {
		t.Fatalf("closed with %d %q, want 1002 unmasked", code, reason)
	}
}

// TestTLSConfigErrors: the hub names the tls key of a bad configuration:
// at Validate for the fields, at Run for the files.
func TestTLSConfigErrors(t *testing.T) {
	cfg := DefaultConfig()
	cfg.TLS = TLSConfig{KeyFile: "k.pem"}
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "tls.cert_file") {
		t.Fatalf("key without certificate: %v", err)
	}
	dir := t.TempDir()
	cfg = DefaultConfig()
	cfg.Listen, cfg.GRPCListen, cfg.Admin.Addr = "127.0.0.1:0", "", ""
	cfg.TLS = TLSConfig{CertFile: filepath.Join(dir, "missing.pem"), KeyFile: filepath.Join(dir, "k.pem")}
	h, err := New(cfg, Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err = h.Run(ctx)
	if err == nil || !strings.Contains(err.Error(), "tls.cert_file") || !strings.Contains(err.Error(), "missing.pem") {
		t.Fatalf("Run with a missing certificate file: %v", err)
	}
}
