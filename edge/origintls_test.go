package edge

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/corralhq/corral/client"
	"github.com/corralhq/corral/hub"
	"github.com/corralhq/corral/internal/config"
	"github.com/corralhq/corral/internal/testkit"
	"github.com/corralhq/corral/wire"
)

// hubTLSName is the name of the test hubs' certificates: the origins'
// DNS name.
const hubTLSName = "hubs.corral.test"

// logBuffer is a slog destination that tests read.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// startLoggedEdge is startEdge with the edge's logs kept.
func startLoggedEdge(t *testing.T, mod func(*Config), origins ...*testHub) (*testEdge, *logBuffer) {
	t.Helper()
	var addrs []string
	for _, h := range origins {
		addrs = append(addrs, h.GRPCAddr().String())
	}
	cfg := testConfig(addrs...)
	mod(&cfg)
	logs := &logBuffer{}
	reg := prometheus.NewRegistry()
	e, err := New(cfg, Options{Registerer: reg, Logger: slog.New(slog.NewTextHandler(logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	te := &testEdge{Edge: e, reg: reg, errc: make(chan error, 1)}
	go func() { te.errc <- e.Run(context.Background()) }()
	<-e.Started()
	if e.Ready() != nil {
		t.Fatalf("edge did not start: %v", <-te.errc)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = e.Shutdown(ctx)
	})
	return te, logs
}

// TestRelayOverTLS: an edge relays to a hub whose gRPC listener serves
// TLS and asks for client certificates. With the hub's CA, its name and
// the edge's client certificate, sessions go through. With another CA,
// another name, or no client certificate, a device's Hello is refused at
// once (1013, no hang), the origin is ejected, and the log says why.
func TestRelayOverTLS(t *testing.T) {
	hubPair, edgePair, stranger := newPair(t, hubTLSName, "hub"), newPair(t, "edge-1", "edge-1"), newPair(t, hubTLSName, "stranger")
	dir := t.TempDir()
	hubCert, hubKey := hubPair.write(t, t.TempDir(), time.Now())
	edgeCert, edgeKey := edgePair.write(t, t.TempDir(), time.Now())
	hubCA, strangerCA, edgeCA := writeCA(t, dir, "hub-ca.pem", hubPair), writeCA(t, dir, "stranger-ca.pem", stranger), writeCA(t, dir, "edge-ca.pem", edgePair)
	th := startHub(t, func(c *hub.Config) {
		c.TLS = hub.TLSConfig{CertFile: hubCert, KeyFile: hubKey, ClientCAFile: edgeCA}
	})

	t.Run("trusted", func(t *testing.T) {
		te, _ := startLoggedEdge(t, func(c *Config) {
			c.Origins.TLS = OriginTLSConfig{Enabled: true, CAFile: hubCA, ServerName: hubTLSName, CertFile: edgeCert, KeyFile: edgeKey}
		}, th)
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		c := dialClient(t, client.Config{Addrs: []string{te.wsAddr()}})
		if _, err := c.Subscribe(ctx, "over-tls"); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Publish(ctx, "over-tls", client.PriorityP0, []byte("m1"), ""); err != nil {
			t.Fatal(err)
		}
		if got := collect(t, c, 1); got[0] != "m1" {
			t.Fatalf("got %q", got)
		}
		if n := te.metric("corral_edge_origin_tls_handshakes_total", "kind", "full"); n < 1 {
			t.Errorf("%v full handshakes to the hub counted", n)
		}
		if n := th.metric("corral_hub_tls_handshakes_total", "kind", "full"); n < 1 {
			t.Errorf("the hub counted %v TLS handshakes", n)
		}
	})

	for _, tc := range []struct {
		name string
		tls  OriginTLSConfig
		logs []string // what the edge's log must say
	}{
		{"another CA", OriginTLSConfig{Enabled: true, CAFile: strangerCA, ServerName: hubTLSName, CertFile: edgeCert, KeyFile: edgeKey},
			[]string{"not trusted", "stranger-ca.pem", "unknown authority"}},
		{"another name", OriginTLSConfig{Enabled: true, CAFile: hubCA, ServerName: "other.corral.test", CertFile: edgeCert, KeyFile: edgeKey},
			[]string{"other.corral.test", "not trusted"}},
		{"no client certificate", OriginTLSConfig{Enabled: true, CAFile: hubCA, ServerName: hubTLSName},
			[]string{"relay stream failed to open", "asked for a client certificate and none is configured"}},
		{"plaintext to a TLS hub", OriginTLSConfig{}, []string{"relay stream failed to open"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			te, logs := startLoggedEdge(t, func(c *Config) {
				c.Origins.TLS = tc.tls
			}, th)
			for i := range 2 {
				r := dialRawGRPC(t, te)
				r.send(t, helloFrame(token(t, tokenOpts{})))
				frames, err := r.end(t) // the test's deadline would fail it
				for _, f := range frames {
					if f.GetWelcome() != nil {
						t.Fatalf("Hello %d: welcomed through an origin the edge must not trust", i)
					}
				}
				if c := wire.CloseFromStatus(err); c.Code != wire.CloseTryAgainLater || c.RetryAfter <= 0 {
					t.Fatalf("Hello %d: ended with %v (%v), want 1013 with a retry hint", i, err, c)
				}
			}
			o := te.Origins().List()[0]
			// A handshake refused is a transport that is down: the origin
			// is no candidate (no ejection needed, none counted).
			testkit.WaitFor(t, 5*time.Second, "the origin's transport down", o.TransportDown)
			for _, want := range tc.logs {
				if !strings.Contains(logs.String(), want) {
					t.Errorf("the edge's log does not say %q:\n%s", want, logs)
				}
			}
			if n := th.metric("corral_hub_relay_sessions"); n != 0 {
				t.Errorf("%v relayed sessions at the hub", n)
			}
		})
	}
}

// TestOriginTLSFilesErrors: the keys of origins.tls as the README spells
// them decode; a missing ca_file stops Run with an error naming
// origins.tls.ca_file and the file.
func TestOriginTLSFilesErrors(t *testing.T) {
	var doc struct {
		Origins OriginsConfig `yaml:"origins"`
	}
	text := "origins:\n  static: [127.0.0.1:1]\n  tls:\n    enabled: true\n    ca_file: " + t.TempDir() + "/missing-ca.pem\n" +
		"    server_name: hubs.corral.test\n    cert_file: c.pem\n    key_file: k.pem\n    min_version: \"1.3\"\n    reload_interval: 5s\n"
	if err := config.Decode("test.yaml", []byte(text), &doc, config.Options{}); err != nil {
		t.Fatal(err)
	}
	cfg := testConfig()
	cfg.Origins = doc.Origins
	e, err := New(cfg, Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err = e.Run(ctx)
	if err == nil || !strings.Contains(err.Error(), "origins.tls.ca_file") || !strings.Contains(err.Error(), "missing-ca.pem") {
		t.Fatalf("Run with a missing ca_file: %v", err)
	}
}

// TestRelayTLSServerName: the name the hubs' certificates must hold is
// server_name, else the origins' DNS name (without its final dot), else
// the IP of a static address.
func TestRelayTLSServerName(t *testing.T) {
	for _, tc := range []struct {
		name    string
		origins OriginsConfig
		addr    string
		want    string
	}{
		{"the origins' name", OriginsConfig{Name: "hubs.corral.test.", Port: 7401, Resolver: "127.0.0.1:5353"}, "127.0.0.7:7401", "hubs.corral.test"},
		{"a static address", OriginsConfig{Static: []string{"127.0.0.7:7401"}}, "127.0.0.7:7401", "127.0.0.7"},
		{"a static IPv6 address", OriginsConfig{Static: []string{"[::1]:7401"}}, "[::1]:7401", "::1"},
		{"server_name over the name", OriginsConfig{Name: "hubs.corral.test", Port: 7401, Resolver: "127.0.0.1:5353",
			TLS: OriginTLSConfig{ServerName: "hub.internal"}}, "127.0.0.7:7401", "hub.internal"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testConfig()
			cfg.Origins = tc.origins
			cfg.Origins.TLS.Enabled = true
			e, err := New(cfg, Options{})
			if err != nil {
				t.Fatal(err)
			}
			//lint:ignore SA1019 ServerName is the name of the TLS configuration, what this checks
			if got := e.up.credentials(tc.addr).Info().ServerName; got != tc.want {
				t.Fatalf("server name %q, want %q", got, tc.want)
			}
		})
	}
}
