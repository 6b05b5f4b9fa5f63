package client_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/corralhq/corral/client"
	"github.com/corralhq/corral/internal/testkit"
)

// tlsProxy terminates TLS for the name hub.corral.test (ALPN h2 and
// http/1.1) and forwards the plaintext to to; it returns its port and the
// pool that trusts its certificate.
func tlsProxy(t *testing.T, to string) (string, *x509.CertPool) {
	t.Helper()
	crt, pool := testkit.SelfSignedCert(t, "hub.corral.test")
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{
		Certificates: []tls.Certificate{crt},
		NextProtos:   []string{"h2", "http/1.1"},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				up, err := net.Dial("tcp", to)
				if err != nil {
					return
				}
				defer up.Close()
				go func() { _, _ = io.Copy(up, c); up.Close() }()
				_, _ = io.Copy(c, up)
			}()
		}
	}()
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	return port, pool
}

// TestTLS: wss:// and grpcs:// to a name, verified against a private CA
// with the name as the server name; without the CA the dial fails.
func TestTLS(t *testing.T) {
	h := startHub(t, "127.0.0.1:0", nil)
	resolve := func(context.Context, string) ([]netip.Addr, error) {
		return []netip.Addr{netip.MustParseAddr("127.0.0.1")}, nil
	}
	token := newToken(t, []string{">"}, time.Now().Add(time.Hour))
	wsPort, pool := tlsProxy(t, h.Addr().String())
	grpcPort, grpcPool := tlsProxy(t, h.GRPCAddr().String())
	for _, tc := range []struct {
		url  string
		pool *x509.CertPool
	}{
		{"wss://hub.corral.test:" + wsPort, pool},
		{"grpcs://hub.corral.test:" + grpcPort, grpcPool},
	} {
		scheme, _, _ := strings.Cut(tc.url, "://")
		t.Run(scheme, func(t *testing.T) {
			ctx := context.Background()
			cfg := client.Config{Addrs: []string{tc.url}, Token: token, Resolve: resolve, TLS: &tls.Config{RootCAs: tc.pool}}
			c, err := client.Dial(ctx, cfg)
			if err != nil {
				t.Fatalf("dial %s: %v", tc.url, err)
			}
			if _, err := c.Subscribe(ctx, "news"); err != nil {
				t.Fatal(err)
			}
			if _, err := c.Publish(ctx, "news", client.PriorityP2, []byte("over tls"), ""); err != nil {
				t.Fatal(err)
			}
			if m := next(t, c, client.EventMessage, nil); string(m.Message.GetData()) != "over tls" {
				t.Fatalf("got %v", m)
			}
			_ = c.Close()
			cfg.TLS = nil // the system roots do not know the test CA
			if c, err := client.Dial(ctx, cfg); err == nil {
				_ = c.Close()
				t.Fatal("a certificate of an unknown CA was accepted")
			}
		})
	}
}
