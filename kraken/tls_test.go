package kraken

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/corralhq/corral/hub"
)

// tlsName is the server name of the test certificate.
const tlsName = "hub.corral.test"

// writeCert makes a self-signed ECDSA certificate for tlsName in dir and
// returns its certificate and key files (the certificate is its own CA).
func writeCert(t *testing.T, dir string) (certFile, keyFile string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: tlsName}, DNSNames: []string{tlsName}, IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true, IsCA: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder}), 0o600); err != nil {
		t.Fatal(err)
	}
	return certFile, keyFile
}

const tlsScenario = `
name: tls
duration: 20s
population:
  devices: 20
  initial: 20
  protocol: PROTOCOL
dns: {policy: multivalue}
origins: [{name: hub, headroom: 2, max_new_per_second: 1000}]
client:
  backoff: {policy: full, base: 50ms, cap: 500ms}
traffic:
  publish:
    - {at: 0s, for: 500ms, priority: P0, per_second: 10}
  disconnects:
    - {at: 1s, share: 0.5}
stop: {on_recovery: true}
`

// TestTLSDevicesMatchTheHub: 20 devices over wss, then over grpcs, to a
// hub with TLS on both listeners, its certificate trusted through
// Config.CAFile and checked against the URL's host (the name, resolved
// to 127.0.0.1 by Config.Resolve: SNI from the URL); half the sessions
// cut at 1 s. Kraken's TLS handshakes, full and resumed, match the hub's
// corral_hub_tls_handshakes_total: the 20 first ones full, the 10
// reconnects resumed (each device kept its server's ticket), the hub's
// full ones those plus the publishers' few connections; each is in
// latency.tls; the sessions held match the hub's of that transport; P0
// published over https (the publish API on the hub's TLS listener,
// checked against the same CA) reaches every device.
// With a CA that did not sign the hub's certificate, every attempt that
// ends fails for "tls" and none is held.
func TestTLSDevicesMatchTheHub(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile := writeCert(t, dir)
	resolve := func(_ context.Context, host string) ([]netip.Addr, error) {
		if host != tlsName {
			t.Errorf("resolving %q, want %q", host, tlsName)
		}
		return []netip.Addr{netip.MustParseAddr("127.0.0.1")}, nil
	}
	for _, tc := range []struct {
		name, protocol, scheme, path, transport string
	}{
		{"wss", "websocket", "wss", "/v1/ws", "ws"},
		{"grpcs", "grpc", "grpcs", "", "grpc"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := startHubWith(t, "hub-t", hub.Options{}, func(c *hub.Config) {
				c.GRPCListen = "127.0.0.1:0"
				c.TLS = hub.TLSConfig{CertFile: certFile, KeyFile: keyFile}
			})
			addr := h.Addr()
			if tc.transport == "grpc" {
				addr = h.GRPCAddr()
			}
			_, port, _ := net.SplitHostPort(addr.String())
			var full, resumed, sessions float64
			cfg := Config{
				Targets: []string{tc.scheme + "://" + tlsName + ":" + port + tc.path}, Resolve: resolve,
				CAFile: certFile, Token: testToken(testSecret),
				PublishURL: "https://" + h.Addr().String(), APIKey: testAPIKey,
				AtEnd: func() {
					full = metricWith(t, h.reg, "corral_hub_tls_handshakes_total", "kind", "full")
					resumed = metricWith(t, h.reg, "corral_hub_tls_handshakes_total", "kind", "resumed")
					sessions = metricWith(t, h.reg, "corral_hub_sessions", "transport", tc.transport)
				},
			}
			sc := loadScenario(t, "tls.yaml", strings.Replace(tlsScenario, "PROTOCOL", tc.protocol, 1))
			res := runScenario(t, sc, cfg)
			// The hub's full handshakes are the devices' and those of the
			// publishers' connections (one to publishWorkers), which
			// reach the same listener over https.
			got := res.TLSHandshakes
			extra := full - float64(got["full"])
			if float64(got["resumed"]) != resumed || got["full"] != 20 || got["resumed"] != 10 || extra < 1 || extra > publishWorkers {
				t.Errorf("kraken's TLS handshakes %v, the hub's %v full, %v resumed; want 20 full and 10 resumed, the hub 1 to %d full more (the publishers')",
					got, full, resumed, publishWorkers)
			}
			if n := res.Latency.TLS.Count(); n != 30 {
				t.Errorf("%d TLS handshakes timed, want 30", n)
			}
			if m := res.Messages; m.Published["p0"] != 5 || m.P0Expected != 100 || m.P0Lost != 0 {
				t.Errorf("published %v over https, P0 expected %d, lost %d; want 5, 100 (5 to each of 20), 0", m.Published, m.P0Expected, m.P0Lost)
			}
			if res.Stopped != "on_recovery" || res.Held != 20 || float64(res.Held) != sessions || res.Storms[0].Back != 10 {
				t.Errorf("stopped by %s, kraken holds %d, the hub %v %s sessions, %d back; want on_recovery, 20, 20, 10",
					res.Stopped, res.Held, sessions, tc.transport, res.Storms[0].Back)
			}

			// Another CA: the hub's certificate is refused.
			otherCA, _ := writeCert(t, t.TempDir())
			cfg.CAFile, cfg.AtEnd = otherCA, nil
			sc = loadScenario(t, "untrusted.yaml", strings.Replace(strings.Replace(tlsScenario, "PROTOCOL", tc.protocol, 1), "duration: 20s", "duration: 1500ms", 1))
			res = runScenario(t, sc, cfg)
			// (Attempts still in flight at the end have not failed yet.)
			if res.Held != 0 || len(res.Failures) != 1 || res.Failures["tls"].Total() < 20 || res.Welcomes["hub-t"].Total() != 0 {
				t.Errorf("with another CA: held %d, welcomes %v, failures %v of %d attempts; want none held, every failure tls (20 at least)",
					res.Held, res.Welcomes, res.Failures, res.Attempts)
			}
		})
	}
}

// TestCAFileRefused: a CA file that is missing or holds no certificate
// stops New.
func TestCAFileRefused(t *testing.T) {
	sc := loadScenario(t, "ok.yaml", `
name: ok
duration: 1s
population: {devices: 1, protocol: websocket}
dns: {policy: multivalue}
origins: [{name: hub, headroom: 2, max_new_per_second: 100}]
`)
	empty := filepath.Join(t.TempDir(), "empty.pem")
	if err := os.WriteFile(empty, []byte("not a certificate\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ name, file, want string }{
		{"missing", filepath.Join(t.TempDir(), "none.pem"), "kraken: CA file: open"},
		{"no certificate", empty, "no PEM certificate in it"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := New(sc, Config{Targets: []string{"wss://127.0.0.1:1"}, Token: testToken(testSecret), CAFile: tc.file})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("New = %v, want an error with %q", err, tc.want)
			}
		})
	}
}

// TestTargetSchemes: each scheme is its transport, with TLS for wss and
// grpcs only.
func TestTargetSchemes(t *testing.T) {
	for _, tc := range []struct {
		url, protocol, path string
		tls                 bool
	}{
		{"ws://127.0.0.1:1", "websocket", "/v1/ws", false},
		{"wss://h.test:2/x", "websocket", "/x", true},
		{"grpc://127.0.0.1:3", "grpc", "", false},
		{"grpcs://h.test:4", "grpc", "", true},
	} {
		t.Run(tc.url, func(t *testing.T) {
			got, err := parseTarget(tc.url)
			if err != nil || got.protocol() != tc.protocol || got.tls != tc.tls || got.path != tc.path {
				t.Errorf("parseTarget = %+v, %v; want %s, tls %v, path %q", got, err, tc.protocol, tc.tls, tc.path)
			}
		})
	}
}
