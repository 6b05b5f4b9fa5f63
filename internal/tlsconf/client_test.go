package tlsconf_test

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/corralhq/corral/internal/config"
	"github.com/corralhq/corral/internal/tlsconf"
)

// dialErr makes a TLS connection to addr with cfg and reads the server's
// first byte; it returns the connection or the error.
func dialErr(addr string, cfg *tls.Config) (*tls.Conn, error) {
	c, err := tls.DialWithDialer(&net.Dialer{Timeout: time.Minute}, "tcp", addr, cfg)
	if err != nil {
		return nil, err
	}
	_ = c.SetDeadline(time.Now().Add(time.Minute))
	b := make([]byte, 1)
	if _, err := c.Read(b); err != nil {
		_ = c.Close()
		return nil, err
	}
	return c, nil
}

// refused is dialErr's error; a connection made is closed.
func refused(addr string, cfg *tls.Config) error {
	c, err := dialErr(addr, cfg)
	if err == nil {
		_ = c.Close()
	}
	return err
}

func newClient(t *testing.T, cfg tlsconf.ClientConfig, reg prometheus.Registerer) *tlsconf.Client {
	t.Helper()
	cfg.Enabled = true
	c, err := tlsconf.NewClient(cfg, tlsconf.Options{Registerer: reg, MetricPrefix: "test_client_tls"})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Load(); err != nil {
		t.Fatal(err)
	}
	return c
}

// TestClientVerifies: a server whose certificate chains to ca_file and
// holds the name is accepted, and the second connection resumes; another
// CA or another name is refused with an error that says why and which
// ca_file; a changed ca_file applies to the next handshakes, not to the
// open connection.
func TestClientVerifies(t *testing.T) {
	good, other := newPair(t, "good"), newPair(t, "other")
	addr := serve(t, &tls.Config{Certificates: []tls.Certificate{good.tlsCert()}, MinVersion: tls.VersionTLS13})
	dir := t.TempDir()
	ca := writeFile(t, dir, "ca.pem", good.certPEM)
	reg := prometheus.NewRegistry()
	c := newClient(t, tlsconf.ClientConfig{CAFile: ca, ReloadInterval: time.Hour}, reg)

	first, err := dialErr(addr, c.Config(addr, testName))
	if err != nil {
		t.Fatalf("a server of ca_file: %v", err)
	}
	defer first.Close()
	if first.ConnectionState().DidResume {
		t.Fatal("the first handshake resumed")
	}
	second, err := dialErr(addr, c.Config(addr, testName))
	if err != nil {
		t.Fatal(err)
	}
	if !second.ConnectionState().DidResume {
		t.Error("the second handshake did not resume")
	}
	second.Close()
	if n := counter(t, reg, "test_client_tls_handshakes_total", "resumed"); n != 1 {
		t.Errorf("resumed handshakes %v, want 1", n)
	}

	if err := refused(addr, c.Config(addr, "elsewhere.corral.test")); err == nil || !strings.Contains(err.Error(), "elsewhere.corral.test") ||
		!strings.Contains(err.Error(), "not trusted") {
		t.Errorf("another name: %v, want an error naming it", err)
	}

	// ca_file now holds another CA: new handshakes, resumed ones too, are
	// refused; the open connection carries on.
	writeFile(t, dir, "ca.pem", other.certPEM)
	if err := c.Check(); err != nil {
		t.Fatal(err)
	}
	err = refused(addr, c.Config(addr, testName))
	if err == nil || !strings.Contains(err.Error(), "ca_file "+ca) || !strings.Contains(err.Error(), "unknown authority") {
		t.Errorf("a server of another CA: %v, want an error naming ca_file and the unknown authority", err)
	}
	echo(t, first)
	if n := counter(t, reg, "test_client_tls_handshakes_total", "rejected"); n != 2 {
		t.Errorf("rejected handshakes %v, want 2", n)
	}

	// A broken ca_file is counted and the last good one kept.
	writeFile(t, dir, "ca.pem", []byte("garbage"))
	if err := c.Check(); err == nil || !strings.Contains(err.Error(), "ca_file") {
		t.Errorf("a ca_file without a certificate: %v", err)
	}
	if n := counter(t, reg, "test_client_tls_reloads_total", "error"); n != 1 {
		t.Errorf("reload errors %v, want 1", n)
	}
	if err := refused(addr, c.Config(addr, testName)); err == nil {
		t.Error("after a broken ca_file the good CA came back")
	}
}

// TestClientResumesPerServer: two servers behind one name, each with
// ticket keys of its own: after a connection to the second, a connection
// to the first still resumes with the first one's ticket.
func TestClientResumesPerServer(t *testing.T) {
	p := newPair(t, "both")
	a := serve(t, &tls.Config{Certificates: []tls.Certificate{p.tlsCert()}, MinVersion: tls.VersionTLS13})
	b := serve(t, &tls.Config{Certificates: []tls.Certificate{p.tlsCert()}, MinVersion: tls.VersionTLS13})
	c := newClient(t, tlsconf.ClientConfig{CAFile: writeFile(t, t.TempDir(), "ca.pem", p.certPEM)}, nil)
	for i, step := range []struct {
		addr   string
		resume bool
	}{{a, false}, {b, false}, {a, true}, {b, true}} {
		conn, err := dialErr(step.addr, c.Config(step.addr, testName))
		if err != nil {
			t.Fatal(err)
		}
		if got := conn.ConnectionState().DidResume; got != step.resume {
			t.Errorf("connection %d: resumed %v, want %v", i, got, step.resume)
		}
		conn.Close()
	}
}

// TestClientCertificate: a server that requires a client certificate of
// its CA takes the Client's, and refuses a Client without one; a new
// client pair on disk is presented by the next handshakes.
func TestClientCertificate(t *testing.T) {
	srv, one, two := newPair(t, "server"), newPair(t, "one"), newPair(t, "two")
	cas := x509.NewCertPool()
	cas.AddCert(one.cert)
	seen := make(chan string, 4)
	addr := serve(t, &tls.Config{Certificates: []tls.Certificate{srv.tlsCert()}, MinVersion: tls.VersionTLS13,
		ClientCAs: cas, ClientAuth: tls.RequireAndVerifyClientCert,
		VerifyConnection: func(cs tls.ConnectionState) error {
			if len(cs.PeerCertificates) > 0 {
				seen <- cs.PeerCertificates[0].Subject.CommonName
			}
			return nil
		}})
	dir := t.TempDir()
	ca := writeFile(t, dir, "ca.pem", srv.certPEM)

	none := newClient(t, tlsconf.ClientConfig{CAFile: ca}, nil)
	if err := refused(addr, none.Config(addr, testName)); err == nil {
		t.Fatal("a client without a certificate was let in")
	}

	certFile, keyFile := writePair(t, dir, one)
	c := newClient(t, tlsconf.ClientConfig{CAFile: ca, CertFile: certFile, KeyFile: keyFile, ReloadInterval: time.Hour}, nil)
	conn, err := dialErr(addr, c.Config(addr, testName))
	if err != nil {
		t.Fatalf("with the client certificate: %v", err)
	}
	conn.Close()
	if cn := <-seen; cn != "one" {
		t.Fatalf("the server saw %q", cn)
	}

	cas.AddCert(two.cert) // the server's pool is read at each handshake
	writePair(t, dir, two)
	if err := c.Check(); err != nil {
		t.Fatal(err)
	}
	cfg := c.Config(addr, testName)
	cfg.ClientSessionCache = nil // a full handshake: a resumed one sends no certificate
	conn, err = dialErr(addr, cfg)
	if err != nil {
		t.Fatal(err)
	}
	conn.Close()
	if cn := <-seen; cn != "two" {
		t.Fatalf("after the change the server saw %q, want two", cn)
	}
}

// TestClientConfigErrors: Validate and Load name the key of a bad
// configuration.
func TestClientConfigErrors(t *testing.T) {
	dir := t.TempDir()
	one, two := newPair(t, "one"), newPair(t, "two")
	certFile := writeFile(t, dir, "one.pem", one.certPEM)
	twoKey := writeFile(t, dir, "two-key.pem", two.keyPEM)
	for _, tc := range []struct {
		name string
		cfg  tlsconf.ClientConfig
		key  string // of the error of Validate, or of Load
		text string
	}{
		{"a CA without enabled", tlsconf.ClientConfig{CAFile: "ca.pem"}, "ca_file", "enabled: true"},
		{"a certificate without its key", tlsconf.ClientConfig{Enabled: true, CertFile: certFile}, "key_file", "needs its key_file"},
		{"a key without its certificate", tlsconf.ClientConfig{Enabled: true, KeyFile: twoKey}, "cert_file", "needs its cert_file"},
		{"an old version", tlsconf.ClientConfig{Enabled: true, MinVersion: "1.0"}, "min_version", "1.0"},
		{"a missing CA file", tlsconf.ClientConfig{Enabled: true, CAFile: dir + "/missing.pem"}, "ca_file", "missing.pem"},
		{"a key of another certificate", tlsconf.ClientConfig{Enabled: true, CertFile: certFile, KeyFile: twoKey}, "key_file", "does not match"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.cfg.Validate()
			if err == nil {
				c, nerr := tlsconf.NewClient(tc.cfg, tlsconf.Options{})
				if nerr != nil {
					t.Fatal(nerr)
				}
				err = c.Load()
			}
			var fe *config.FieldError
			if !errors.As(err, &fe) || fe.Path != tc.key || !strings.Contains(err.Error(), tc.text) || !strings.Contains(err.Error(), "tlsconf: ") {
				t.Fatalf("error %v, want one of key %s saying %q", err, tc.key, tc.text)
			}
		})
	}
}

// counter returns the counter name{<its one label>=value} of reg.
func counter(t *testing.T, reg *prometheus.Registry, name, value string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			if m.GetLabel()[0].GetValue() == value {
				return m.GetCounter().GetValue()
			}
		}
	}
	t.Fatalf("no %s{%q}", name, value)
	return 0
}
