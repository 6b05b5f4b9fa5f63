package tlsconf_test

import (
	"context"
	"crypto/tls"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/corralhq/corral/internal/testkit"
	"github.com/corralhq/corral/internal/tlsconf"
)

// newServer writes p to a temporary directory and returns a loaded Server
// for it, its registry and the directory.
func newServer(t *testing.T, p pair, cfg tlsconf.Config, log *slog.Logger) (*tlsconf.Server, *prometheus.Registry, string) {
	t.Helper()
	dir := t.TempDir()
	cfg.CertFile, cfg.KeyFile = writePair(t, dir, p)
	reg := prometheus.NewRegistry()
	s, err := tlsconf.New(cfg, tlsconf.Options{Registerer: reg, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Load(); err != nil {
		t.Fatal(err)
	}
	return s, reg, dir
}

func handshakes(t *testing.T, reg *prometheus.Registry, kind string) float64 {
	t.Helper()
	for _, m := range testkit.Metrics(t, reg, "corral_tls_handshakes_total") {
		if m.GetLabel()[0].GetValue() == kind {
			return m.GetCounter().GetValue()
		}
	}
	t.Fatalf("no corral_tls_handshakes_total{kind=%q}", kind)
	return 0
}

// TestResumption: a second handshake with the ticket of the first is
// resumed, TLS 1.3; a ticket from before a key rotation still resumes;
// one sealed with a key that rotated out does not.
func TestResumption(t *testing.T) {
	p := newPair(t, "one")
	s, reg, _ := newServer(t, p, tlsconf.Config{TicketKeys: 2}, nil)
	addr := serve(t, s.ServerConfig("http/1.1"))
	cc := clientConfig(p)
	cc.NextProtos = []string{"http/1.1"}

	steps := []struct {
		name   string
		rotate int // rotations before the dial
		resume bool
	}{
		{"first handshake is full", 0, false},
		{"second handshake resumes with the first's ticket", 0, true},
		{"a ticket from before one rotation still resumes", 1, true},
		{"a ticket whose key rotated out does not resume", 2, false},
		{"the new full handshake's ticket resumes again", 0, true},
	}
	full, resumed := 0, 0
	for _, st := range steps {
		for range st.rotate {
			s.RotateTicketKeys()
		}
		c := dial(t, addr, cc)
		cs := c.ConnectionState()
		if cs.DidResume != st.resume {
			t.Errorf("%s: DidResume = %v", st.name, cs.DidResume)
		}
		if cs.Version != tls.VersionTLS13 {
			t.Errorf("%s: version %x, want TLS 1.3", st.name, cs.Version)
		}
		if cs.NegotiatedProtocol != "http/1.1" {
			t.Errorf("%s: ALPN %q", st.name, cs.NegotiatedProtocol)
		}
		if st.resume {
			resumed++
		} else {
			full++
		}
		_ = c.Close()
	}
	// The counters are written before the server's last handshake
	// message, so they may trail the client's view by an instant.
	testkit.WaitFor(t, 10*time.Second, "handshake counters", func() bool {
		return handshakes(t, reg, "full") == float64(full) && handshakes(t, reg, "resumed") == float64(resumed)
	})
	if got := testutil.ToFloat64(prometheusCounter(t, reg, "corral_tls_ticket_key_rotations_total")); got != 3 {
		t.Errorf("rotations = %v, want 3", got)
	}
}

// prometheusCounter returns a gatherer's single-series metric as a
// collector for testutil.
func prometheusCounter(t *testing.T, reg *prometheus.Registry, name string) prometheus.Collector {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name && len(mf.GetMetric()) == 1 {
			m := mf.GetMetric()[0]
			v := m.GetCounter().GetValue() + m.GetGauge().GetValue()
			g := prometheus.NewGauge(prometheus.GaugeOpts{Name: name})
			g.Set(v)
			return g
		}
	}
	t.Fatalf("no metric %s", name)
	return nil
}

// TestMinVersion: TLS 1.2 is refused by default and accepted with
// min_version 1.2.
func TestMinVersion(t *testing.T) {
	p := newPair(t, "one")
	for _, tc := range []struct {
		name string
		min  string
		ok   bool
	}{
		{"default refuses a TLS 1.2 client", "", false},
		{"1.2 accepts it", "1.2", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, _, _ := newServer(t, p, tlsconf.Config{MinVersion: tc.min}, nil)
			addr := serve(t, s.ServerConfig())
			cc := clientConfig(p)
			cc.MaxVersion = tls.VersionTLS12
			c, err := tls.Dial("tcp", addr, cc)
			if err == nil {
				err = c.Handshake()
				_ = c.Close()
			}
			if (err == nil) != tc.ok {
				t.Fatalf("TLS 1.2 handshake: %v", err)
			}
		})
	}
}

// TestReload: a certificate replaced on disk is served to new
// connections while a connection made before keeps working; a bad new
// pair keeps the old certificate, is counted and logged, and a later
// good pair is taken.
func TestReload(t *testing.T) {
	one, two, three := newPair(t, "one"), newPair(t, "two"), newPair(t, "three")
	var logs testkit.SyncBuffer
	s, reg, dir := newServer(t, one, tlsconf.Config{}, slog.New(slog.NewTextHandler(&logs, nil)))
	addr := serve(t, s.ServerConfig("http/1.1"))
	cc := clientConfig(one, two, three)
	served := func() string {
		fresh := cc.Clone()
		fresh.ClientSessionCache = nil // a resumed session shows the certificate of its first handshake
		c := dial(t, addr, fresh)
		defer c.Close()
		return c.ConnectionState().PeerCertificates[0].Subject.CommonName
	}
	old := dial(t, addr, cc)
	if cn := old.ConnectionState().PeerCertificates[0].Subject.CommonName; cn != "one" {
		t.Fatalf("served %q, want one", cn)
	}
	if err := s.Check(); err != nil { // nothing changed
		t.Fatal(err)
	}

	writePair(t, dir, two)
	if err := s.Check(); err != nil {
		t.Fatal(err)
	}
	if cn := served(); cn != "two" {
		t.Fatalf("after the replacement: served %q, want two", cn)
	}
	echo(t, old)

	// A key that does not match the certificate: the old pair stays.
	writeFile(t, dir, "key.pem", three.keyPEM)
	err := s.Check()
	if err == nil || !strings.Contains(err.Error(), "key_file") || !strings.Contains(err.Error(), filepath.Join(dir, "key.pem")) {
		t.Fatalf("mismatched key: error %v, want one naming key_file and the file", err)
	}
	if cn := served(); cn != "two" {
		t.Fatalf("after a bad pair: served %q, want two", cn)
	}
	if !strings.Contains(logs.String(), "tls reload failed") {
		t.Errorf("the failed reload was not logged: %s", logs.String())
	}
	// The unchanged broken pair is not read again at every poll.
	if err := s.Check(); err != nil {
		t.Fatalf("second check of the same bad pair: %v", err)
	}
	if got := testutil.ToFloat64(prometheusCounterLabel(t, reg, "corral_tls_reloads_total", "error")); got != 1 {
		t.Errorf("reload errors = %v, want 1", got)
	}
	// Garbage in place of the certificate: the same.
	writeFile(t, dir, "cert.pem", []byte("not a certificate"))
	if err := s.Check(); err == nil || !strings.Contains(err.Error(), "key_file") {
		t.Fatalf("garbage certificate: error %v", err)
	}
	if cn := served(); cn != "two" {
		t.Fatalf("after garbage: served %q, want two", cn)
	}
	// The certificate that matches the key arrives: taken.
	writeFile(t, dir, "cert.pem", three.certPEM)
	if err := s.Check(); err != nil {
		t.Fatal(err)
	}
	if cn := served(); cn != "three" {
		t.Fatalf("after the matching certificate: served %q, want three", cn)
	}
	echo(t, old)
	if got := testutil.ToFloat64(prometheusCounter(t, reg, "corral_tls_certificate_expiry_timestamp_seconds")); got != float64(three.cert.NotAfter.Unix()) {
		t.Errorf("expiry gauge %v, want %v", got, three.cert.NotAfter.Unix())
	}
}

func prometheusCounterLabel(t *testing.T, reg *prometheus.Registry, name, value string) prometheus.Collector {
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
				g := prometheus.NewGauge(prometheus.GaugeOpts{Name: name})
				g.Set(m.GetCounter().GetValue())
				return g
			}
		}
	}
	t.Fatalf("no metric %s{%s}", name, value)
	return nil
}

// TestRunReloadsAndRotates: Run polls the files and rotates the keys on
// its own, and returns when its context ends.
func TestRunReloadsAndRotates(t *testing.T) {
	one, two := newPair(t, "one"), newPair(t, "two")
	s, reg, dir := newServer(t, one, tlsconf.Config{ReloadInterval: 10 * time.Millisecond, TicketKeyRotation: 10 * time.Millisecond}, nil)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := s.Run(ctx); err != nil {
			t.Error(err)
		}
	})
	writePair(t, dir, two)
	testkit.WaitFor(t, 10*time.Second, "the new certificate", func() bool {
		return s.Certificate().Leaf.Subject.CommonName == "two"
	})
	testkit.WaitFor(t, 10*time.Second, "a rotation", func() bool {
		return testutil.ToFloat64(prometheusCounter(t, reg, "corral_tls_ticket_key_rotations_total")) > 0
	})
	cancel()
	wg.Wait()
}

// TestClientCA: with client_ca_file a client without a certificate is
// refused and one with a certificate of the CA is taken.
func TestClientCA(t *testing.T) {
	srv, ca, other := newPair(t, "server"), newPair(t, "client-ca"), newPair(t, "other")
	dir := t.TempDir()
	cfg := tlsconf.Config{ClientCAFile: writeFile(t, dir, "ca.pem", ca.certPEM)}
	cfg.CertFile, cfg.KeyFile = writePair(t, dir, srv)
	s, err := tlsconf.New(cfg, tlsconf.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Load(); err != nil {
		t.Fatal(err)
	}
	addr := serve(t, s.ServerConfig())
	try := func(cert *pair) error {
		cc := clientConfig(srv)
		if cert != nil {
			cc.Certificates = []tls.Certificate{cert.tlsCert()}
		}
		c, err := tls.Dial("tcp", addr, cc)
		if err != nil {
			return err
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(time.Minute))
		b := make([]byte, 1)
		_, err = c.Read(b) // TLS 1.3: the server's refusal comes after the client's Finished
		return err
	}
	if err := try(nil); err == nil {
		t.Error("a client without a certificate was taken")
	}
	if err := try(&other); err == nil {
		t.Error("a client with a certificate of another CA was taken")
	}
	if err := try(&ca); err != nil {
		t.Errorf("a client with the CA's certificate: %v", err)
	}
}

// TestConfigErrors: Validate and Load name the key (and the file).
func TestConfigErrors(t *testing.T) {
	dir := t.TempDir()
	p := newPair(t, "one")
	cert, key := writePair(t, dir, p)
	for _, tc := range []struct {
		name string
		cfg  tlsconf.Config
		want string // in the error of New, or of Load
	}{
		{"key without certificate", tlsconf.Config{KeyFile: key}, "cert_file: tlsconf: must be set with key_file"},
		{"certificate without key", tlsconf.Config{CertFile: cert}, "key_file: tlsconf: must be set with cert_file"},
		{"unknown version", tlsconf.Config{CertFile: cert, KeyFile: key, MinVersion: "1.1"}, `min_version: tlsconf: "1.1" is not`},
		{"negative interval", tlsconf.Config{CertFile: cert, KeyFile: key, ReloadInterval: -time.Second}, "reload_interval: tlsconf: must not be negative"},
		{"negative rotation", tlsconf.Config{CertFile: cert, KeyFile: key, TicketKeyRotation: -time.Second}, "ticket_key_rotation: tlsconf: must not be negative"},
		{"too many keys", tlsconf.Config{CertFile: cert, KeyFile: key, TicketKeys: 65}, "ticket_keys: tlsconf: must be 1 to 64"},
		{"missing certificate file", tlsconf.Config{CertFile: filepath.Join(dir, "nope.pem"), KeyFile: key}, "cert_file: tlsconf: open " + filepath.Join(dir, "nope.pem")},
		{"missing key file", tlsconf.Config{CertFile: cert, KeyFile: filepath.Join(dir, "nope.pem")}, "key_file: tlsconf: open " + filepath.Join(dir, "nope.pem")},
		{"certificate as key", tlsconf.Config{CertFile: cert, KeyFile: cert}, "key_file: tlsconf: " + cert + " with " + cert},
		{"key as client CA", tlsconf.Config{CertFile: cert, KeyFile: key, ClientCAFile: key}, "client_ca_file: tlsconf: " + key + " holds no PEM certificate"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := tlsconf.New(tc.cfg, tlsconf.Options{})
			if err == nil {
				err = s.Load()
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want %q", err, tc.want)
			}
		})
	}
	if err := (tlsconf.Config{}).Validate(); err != nil {
		t.Errorf("the zero Config (plaintext) is invalid: %v", err)
	}
	if _, err := tlsconf.New(tlsconf.Config{}, tlsconf.Options{}); err == nil {
		t.Error("New without files succeeded")
	}
}

// TestNoCertificateBeforeLoad: a handshake before Load fails; Run loads
// first and returns Load's error.
func TestNoCertificateBeforeLoad(t *testing.T) {
	dir := t.TempDir()
	s, err := tlsconf.New(tlsconf.Config{CertFile: filepath.Join(dir, "c.pem"), KeyFile: filepath.Join(dir, "k.pem")}, tlsconf.Options{})
	if err != nil {
		t.Fatal(err)
	}
	addr := serve(t, s.ServerConfig())
	c, err := tls.Dial("tcp", addr, &tls.Config{InsecureSkipVerify: true})
	if err == nil {
		_ = c.Close()
		t.Fatal("a handshake succeeded without a certificate")
	}
	if err := s.Run(context.Background()); err == nil || !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("Run without files: %v", err)
	}
}

// TestDuplicateRegistration: a second Server on the same registry with
// the same prefix is an error, not a panic.
func TestDuplicateRegistration(t *testing.T) {
	reg := prometheus.NewRegistry()
	cfg := tlsconf.Config{CertFile: "c", KeyFile: "k"}
	if _, err := tlsconf.New(cfg, tlsconf.Options{Registerer: reg}); err != nil {
		t.Fatal(err)
	}
	if _, err := tlsconf.New(cfg, tlsconf.Options{Registerer: reg}); err == nil || !strings.HasPrefix(err.Error(), "tlsconf: metrics") {
		t.Fatalf("second registration: %v", err)
	}
	if _, err := tlsconf.New(cfg, tlsconf.Options{Registerer: reg, MetricPrefix: "corral_edge_tls"}); err != nil {
		t.Fatalf("another prefix: %v", err)
	}
}
