package tlsconf_test

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"os"
	"path/filepath"

	"github.com/corralhq/corral/internal/tlsconf"
)

// A listener that serves the certificate of two files, reloaded when they
// change, with rotating session ticket keys.
func ExampleServer() {
	dir, _ := os.MkdirTemp("", "tlsconf")
	defer os.RemoveAll(dir)
	p, err := makePair("example") // a self-signed ECDSA P-256 certificate in PEM
	if err != nil {
		panic(err)
	}
	certFile, keyFile := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	_ = os.WriteFile(certFile, p.certPEM, 0o600)
	_ = os.WriteFile(keyFile, p.keyPEM, 0o600)

	s, err := tlsconf.New(tlsconf.Config{CertFile: certFile, KeyFile: keyFile}, tlsconf.Options{})
	if err != nil {
		panic(err)
	}
	if err := s.Load(); err != nil {
		panic(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = s.Run(ctx) }() // reloads and rotations

	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	defer ln.Close()
	tl := tls.NewListener(ln, s.ServerConfig("http/1.1"))
	go func() {
		c, err := tl.Accept()
		if err == nil {
			_ = c.(*tls.Conn).Handshake()
			_ = c.Close()
		}
	}()

	c, err := tls.Dial("tcp", ln.Addr().String(), clientConfig(p))
	if err != nil {
		panic(err)
	}
	defer c.Close()
	cs := c.ConnectionState()
	fmt.Println(cs.Version == tls.VersionTLS13, cs.PeerCertificates[0].Subject.CommonName)
	// Output: true example
}
