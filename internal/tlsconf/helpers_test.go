package tlsconf_test

import (
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
	"sync"
	"testing"
	"time"
)

// testName is the server name of every test certificate.
const testName = "hub.corral.test"

// pair is a generated certificate and key (ECDSA P-256), PEM-encoded.
type pair struct {
	certPEM, keyPEM []byte
	cert            *x509.Certificate
	key             *ecdsa.PrivateKey
}

// newPair makes a self-signed certificate for testName with common name
// cn (tests tell certificates apart by it), usable as its own CA.
func newPair(t testing.TB, cn string) pair {
	t.Helper()
	p, err := makePair(cn)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// makePair is newPair without a test (for the example).
func makePair(cn string) (pair, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return pair{}, err
	}
	serial, _ := rand.Int(rand.Reader, big.NewInt(1<<62))
	tmpl := &x509.Certificate{
		SerialNumber: serial, Subject: pkix.Name{CommonName: cn}, DNSNames: []string{testName},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour).Truncate(time.Second),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		BasicConstraintsValid: true, IsCA: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return pair{}, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return pair{}, err
	}
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return pair{}, err
	}
	return pair{
		certPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		keyPEM:  pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder}),
		cert:    cert, key: key,
	}, nil
}

// tlsCert returns p for a tls.Config.
func (p pair) tlsCert() tls.Certificate {
	return tls.Certificate{Certificate: [][]byte{p.cert.Raw}, PrivateKey: p.key, Leaf: p.cert}
}

// stamp moves the modification time of the files forward by a second
// each time, so that a poll sees every rewrite even on a file system with
// coarse timestamps.
var stampMu sync.Mutex
var stampAt = time.Now()

// writeFile writes b to dir/name with a new modification time.
func writeFile(t testing.TB, dir, name string, b []byte) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	stampMu.Lock()
	stampAt = stampAt.Add(time.Second)
	at := stampAt
	stampMu.Unlock()
	if err := os.Chtimes(path, at, at); err != nil {
		t.Fatal(err)
	}
	return path
}

// writePair writes p as cert.pem and key.pem in dir.
func writePair(t testing.TB, dir string, p pair) (certFile, keyFile string) {
	t.Helper()
	return writeFile(t, dir, "cert.pem", p.certPEM), writeFile(t, dir, "key.pem", p.keyPEM)
}

// serve accepts TLS connections on a loopback listener with cfg; each
// connection completes its handshake, is sent "x", then echoes what it
// reads until EOF. It returns the address.
func serve(t testing.TB, cfg *tls.Config) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	tl := tls.NewListener(ln, cfg)
	var wg sync.WaitGroup
	t.Cleanup(func() { _ = ln.Close(); wg.Wait() })
	wg.Go(func() {
		for {
			c, err := tl.Accept()
			if err != nil {
				return
			}
			wg.Go(func() {
				defer c.Close()
				_ = c.SetDeadline(time.Now().Add(time.Minute))
				if _, err := c.Write([]byte("x")); err != nil {
					return
				}
				_, _ = io.Copy(c, c)
			})
		}
	})
	return ln.Addr().String()
}

// dial connects to addr trusting roots, reads the server's "x" (which
// also takes in the session ticket sent after the handshake) and returns
// the connection.
func dial(t testing.TB, addr string, cfg *tls.Config) *tls.Conn {
	t.Helper()
	c, err := tls.DialWithDialer(&net.Dialer{Timeout: time.Minute}, "tcp", addr, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	_ = c.SetDeadline(time.Now().Add(time.Minute))
	b := make([]byte, 1)
	if _, err := io.ReadFull(c, b); err != nil || b[0] != 'x' {
		t.Fatalf("first byte: %q, %v", b, err)
	}
	return c
}

// clientConfig trusts the given certificates, with a session cache.
func clientConfig(trust ...pair) *tls.Config {
	pool := x509.NewCertPool()
	for _, p := range trust {
		pool.AddCert(p.cert)
	}
	return &tls.Config{RootCAs: pool, ServerName: testName, ClientSessionCache: tls.NewLRUClientSessionCache(8)}
}

// echo checks that c still carries bytes both ways.
func echo(t testing.TB, c net.Conn) {
	t.Helper()
	if _, err := c.Write([]byte("ping")); err != nil {
		t.Fatalf("write on an open connection: %v", err)
	}
	b := make([]byte, 4)
	if _, err := io.ReadFull(c, b); err != nil || string(b) != "ping" {
		t.Fatalf("echo on an open connection: %q, %v", b, err)
	}
}
