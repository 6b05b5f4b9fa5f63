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
	"math/big"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/corralhq/corral/client"
	"github.com/corralhq/corral/internal/testkit"
)

// writePair writes a self-signed certificate for "edge.corral.test" with
// common name cn, and its key, to dir; it returns the certificate.
func writePair(t *testing.T, dir, cn string) *x509.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	serial, _ := rand.Int(rand.Reader, big.NewInt(1<<62))
	tmpl := &x509.Certificate{
		SerialNumber: serial, Subject: pkix.Name{CommonName: cn}, DNSNames: []string{"edge.corral.test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
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
	if err := os.WriteFile(filepath.Join(dir, "cert.pem"), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "key.pem"), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), 0o600); err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	return cert
}

// TestTLSOnTheGRPCListener: grpcs sessions through the edge; a second
// connection resumes with its ticket; a certificate replaced on disk is
// served to new connections while the open session goes on.
func TestTLSOnTheGRPCListener(t *testing.T) {
	dir := t.TempDir()
	first := writePair(t, dir, "first")
	th := startHub(t, nil)
	te := startEdge(t, func(c *Config) {
		c.TLS = TLSConfig{CertFile: filepath.Join(dir, "cert.pem"), KeyFile: filepath.Join(dir, "key.pem"), ReloadInterval: time.Hour}
		c.Listen = "" // no wss yet
	}, th)
	roots := x509.NewCertPool()
	roots.AddCert(first)
	cache := tls.NewLRUClientSessionCache(8)
	tlsCfg := &tls.Config{RootCAs: roots, ServerName: "edge.corral.test", ClientSessionCache: cache}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	open := dialClient(t, client.Config{Addrs: []string{"grpcs://" + te.GRPCAddr().String()}, TLS: tlsCfg})
	if _, err := open.Subscribe(ctx, "tls"); err != nil {
		t.Fatal(err)
	}
	// A bare TLS connection with the cached ticket resumes.
	conn, err := tls.Dial("tcp", te.GRPCAddr().String(), &tls.Config{RootCAs: roots, ServerName: "edge.corral.test", ClientSessionCache: cache, NextProtos: []string{"h2"}})
	if err != nil {
		t.Fatal(err)
	}
	resumed := conn.ConnectionState().DidResume
	conn.Close()
	if !resumed {
		conn2, err := tls.Dial("tcp", te.GRPCAddr().String(), &tls.Config{RootCAs: roots, ServerName: "edge.corral.test", ClientSessionCache: cache, NextProtos: []string{"h2"}})
		if err != nil {
			t.Fatal(err)
		}
		resumed = conn2.ConnectionState().DidResume
		conn2.Close()
	}
	if !resumed {
		t.Error("a handshake with the ticket was not resumed")
	}
	testkit.WaitFor(t, 5*time.Second, "a resumed handshake counted", func() bool {
		return te.metric("corral_edge_tls_handshakes_total", "kind", "resumed") >= 1
	})

	writePair(t, dir, "second")
	if err := te.tls.Check(); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, 5*time.Second, "the new certificate served", func() bool {
		conn, err := tls.Dial("tcp", te.GRPCAddr().String(), &tls.Config{InsecureSkipVerify: true, NextProtos: []string{"h2"}})
		if err != nil {
			return false
		}
		defer conn.Close()
		return conn.ConnectionState().PeerCertificates[0].Subject.CommonName == "second"
	})
	if _, err := open.Publish(ctx, "tls", client.PriorityP0, []byte("still here"), ""); err != nil {
		t.Fatalf("the open session after the reload: %v", err)
	}
	if got := collect(t, open, 1); got[0] != "still here" {
		t.Fatalf("message %v", got)
	}
}
