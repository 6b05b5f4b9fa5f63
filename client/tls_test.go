package client_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"io"
	"math/big"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/corralhq/corral/client"
)

// tlsProxy terminates TLS for the name hub.corral.test (ALPN h2 and
// http/1.1) and forwards the plaintext to to; it returns its port and the
// pool that trusts its certificate.
func tlsProxy(t *testing.T, to string) (string, *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "hub.corral.test"}, DNSNames: []string{"hub.corral.test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{
		Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}},
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
