package edge

import (
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
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/corralhq/corral/client"
	"github.com/corralhq/corral/internal/testkit"
)

// edgeTLSName is the server name of the edge's test certificates.
const edgeTLSName = "edge.corral.test"

// testPair is a self-signed certificate for a server name and its key, in
// PEM.
type testPair struct {
	cert            *x509.Certificate
	certPEM, keyPEM []byte
}

// newPair makes a self-signed ECDSA certificate for name with common
// name cn.
func newPair(t *testing.T, name, cn string) testPair {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	serial, _ := rand.Int(rand.Reader, big.NewInt(1<<62))
	tmpl := &x509.Certificate{
		SerialNumber: serial, Subject: pkix.Name{CommonName: cn}, DNSNames: []string{name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		BasicConstraintsValid: true, IsCA: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	return testPair{cert: cert,
		certPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		keyPEM:  pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder})}
}

// write puts p in dir as cert.pem and key.pem with modification time at
// (a check sees every rewrite) and returns the two paths.
func (p testPair) write(t *testing.T, dir string, at time.Time) (certFile, keyFile string) {
	t.Helper()
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	for _, f := range []struct {
		path string
		b    []byte
	}{{certFile, p.certPEM}, {keyFile, p.keyPEM}} {
		if err := os.WriteFile(f.path, f.b, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(f.path, at, at); err != nil {
			t.Fatal(err)
		}
	}
	return certFile, keyFile
}

// writeCA writes the certificates of pairs to dir/name as one PEM file.
func writeCA(t *testing.T, dir, name string, pairs ...testPair) string {
	t.Helper()
	var b []byte
	for _, p := range pairs {
		b = append(b, p.certPEM...)
	}
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// trust returns a client configuration for edgeTLSName trusting pairs.
func trust(pairs ...testPair) *tls.Config {
	pool := x509.NewCertPool()
	for _, p := range pairs {
		pool.AddCert(p.cert)
	}
	return &tls.Config{RootCAs: pool, ServerName: edgeTLSName}
}

// tlsExchange makes a TLS connection to addr offering alpn, sends the
// first bytes of that protocol and reads one byte of the answer (so that
// the session ticket, which TLS 1.3 sends after the handshake, has been
// read into tc's session cache), and returns the connection's state.
func tlsExchange(t *testing.T, addr, alpn string, tc *tls.Config) tls.ConnectionState {
	t.Helper()
	tc = tc.Clone()
	tc.NextProtos = []string{alpn}
	c, err := tls.DialWithDialer(&net.Dialer{Timeout: 10 * time.Second}, "tcp", addr, tc)
	if err != nil {
		t.Fatalf("TLS to %s (%s): %v", addr, alpn, err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	first := "GET /nothing HTTP/1.1\r\nHost: edge\r\n\r\n"
	if alpn == "h2" {
		first = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\x00\x00\x00\x04\x00\x00\x00\x00\x00" // preface, empty SETTINGS
	}
	if _, err := io.WriteString(c, first); err != nil {
		t.Fatalf("write to %s: %v", addr, err)
	}
	if _, err := io.ReadFull(c, make([]byte, 1)); err != nil {
		t.Fatalf("read from %s (%s): %v", addr, alpn, err)
	}
	cs := c.ConnectionState()
	if cs.Version != tls.VersionTLS13 || cs.NegotiatedProtocol != alpn {
		t.Fatalf("TLS to %s: version %x, ALPN %q, want TLS 1.3 and %q", addr, cs.Version, cs.NegotiatedProtocol, alpn)
	}
	return cs
}

// collectUp reads n messages of c and fails when its session ended
// meanwhile (a reconnect would hide that) or on a gap.
func collectUp(t *testing.T, c *client.Client, n int) []string {
	t.Helper()
	var out []string
	for len(out) < n {
		e := nextEvent(t, c, client.EventMessage, client.EventGap, client.EventDisconnected)
		switch e.Kind {
		case client.EventDisconnected:
			t.Fatalf("the session ended: %+v", e.Close)
		case client.EventGap:
			t.Fatalf("gap after %d messages: %+v", len(out), e.Gap)
		}
		out = append(out, string(e.Message.GetData()))
	}
	return out
}

// TestTLSOnBothListeners: wss and grpcs sessions through the edge (the Go
// client); on both listeners a second handshake with the ticket of the
// first is resumed; a certificate replaced on disk is served to new
// connections of both listeners while the sessions opened before carry
// on, on their first connections.
func TestTLSOnBothListeners(t *testing.T) {
	first, second := newPair(t, edgeTLSName, "first"), newPair(t, edgeTLSName, "second")
	dir := t.TempDir()
	certFile, keyFile := first.write(t, dir, time.Now())
	th := startHub(t, nil)
	te := startEdge(t, func(c *Config) {
		c.TLS = TLSConfig{CertFile: certFile, KeyFile: keyFile, ReloadInterval: time.Hour} // checked by hand below
	}, th)
	wsAddr, grpcAddr := te.Addr().String(), te.GRPCAddr().String()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	subs := map[string]*client.Client{}
	for _, tr := range []struct{ name, addr string }{
		{"wss", "wss://" + wsAddr + "/v1/ws"},
		{"grpcs", "grpcs://" + grpcAddr},
	} {
		c := dialClient(t, client.Config{Addrs: []string{tr.addr}, TLS: trust(first, second)})
		if _, err := c.Subscribe(ctx, "tls"); err != nil {
			t.Fatalf("%s: %v", tr.name, err)
		}
		subs[tr.name] = c
	}
	publish := func(data string) {
		t.Helper()
		if _, err := subs["wss"].Publish(ctx, "tls", client.PriorityP0, []byte(data), ""); err != nil {
			t.Fatalf("publish %q: %v", data, err)
		}
		for name, c := range subs {
			if got := collectUp(t, c, 1); got[0] != data {
				t.Fatalf("%s: got %q, want %q", name, got[0], data)
			}
		}
	}
	publish("m1")

	// A second handshake with the first one's ticket resumes, on each
	// listener.
	for _, l := range []struct{ addr, alpn string }{{wsAddr, "http/1.1"}, {grpcAddr, "h2"}} {
		tc := trust(first)
		tc.ClientSessionCache = tls.NewLRUClientSessionCache(4)
		if cs := tlsExchange(t, l.addr, l.alpn, tc); cs.DidResume {
			t.Fatalf("%s: the first handshake resumed", l.alpn)
		}
		if cs := tlsExchange(t, l.addr, l.alpn, tc); !cs.DidResume {
			t.Errorf("%s: a handshake with the ticket was not resumed", l.alpn)
		}
	}
	testkit.WaitFor(t, 5*time.Second, "two resumed handshakes counted", func() bool {
		return te.metric("corral_edge_tls_handshakes_total", "kind", "resumed") >= 2
	})

	// A new pair on disk: new connections of both listeners get it, the
	// sessions opened before carry on.
	second.write(t, dir, time.Now().Add(time.Minute))
	if err := te.tls.Check(); err != nil {
		t.Fatal(err)
	}
	for _, l := range []struct{ addr, alpn string }{{wsAddr, "http/1.1"}, {grpcAddr, "h2"}} {
		if cn := tlsExchange(t, l.addr, l.alpn, trust(first, second)).PeerCertificates[0].Subject.CommonName; cn != "second" {
			t.Errorf("%s after the change: served %q, want second", l.alpn, cn)
		}
	}
	publish("m2")
	if n := te.Sessions(); n != 2 {
		t.Errorf("%d sessions at the edge after the change, want the 2 opened before", n)
	}
	if n := th.metric("corral_hub_sessions_opened_total"); n > 2 {
		t.Errorf("%v sessions opened at the hub, want 2 (no reconnect)", n)
	}
}

// TestTLSFilesErrors: a missing key file and a certificate that does not
// match its key stop Run with an error that names the key and the files.
func TestTLSFilesErrors(t *testing.T) {
	dir := t.TempDir()
	certFile, _ := newPair(t, edgeTLSName, "one").write(t, dir, time.Now())
	other := newPair(t, edgeTLSName, "other")
	wrongKey := filepath.Join(dir, "other-key.pem")
	if err := os.WriteFile(wrongKey, other.keyPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, keyFile string
		want          []string
	}{
		{"missing key file", filepath.Join(dir, "missing.pem"), []string{"tls.key_file", "missing.pem", "no such file"}},
		{"key of another certificate", wrongKey, []string{"tls.key_file", "other-key.pem", "cert.pem", "does not match"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testConfig("127.0.0.1:1")
			cfg.TLS = TLSConfig{CertFile: certFile, KeyFile: tc.keyFile}
			e, err := New(cfg, Options{})
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			err = e.Run(ctx)
			if err == nil {
				t.Fatal("Run served")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
		})
	}
}
