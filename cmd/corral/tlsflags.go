package main

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"
)

// tlsFlags are the TLS flags of the client commands (sub, pub): a private
// CA to trust and the name the server's certificate must hold.
type tlsFlags struct {
	caFile     string
	serverName string
}

// add puts the flags on cmd.
func (f *tlsFlags) add(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.StringVar(&f.caFile, "ca-file", "", "PEM CA certificates that a wss, grpcs or https server's certificate must chain to (default: the system's roots)")
	fl.StringVar(&f.serverName, "server-name", "", "name the server's certificate must hold, and the SNI sent (default: the host of the URL)")
}

// config returns the TLS configuration the flags ask for, nil when none
// is set (the system's roots, the URL's host). The errors name the flag.
func (f *tlsFlags) config() (*tls.Config, error) {
	if f.caFile == "" && f.serverName == "" {
		return nil, nil
	}
	c := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: f.serverName}
	if f.caFile != "" {
		b, err := os.ReadFile(f.caFile)
		if err != nil {
			return nil, fmt.Errorf("--ca-file: %w", err)
		}
		c.RootCAs = x509.NewCertPool()
		if !c.RootCAs.AppendCertsFromPEM(b) {
			return nil, fmt.Errorf("--ca-file %s holds no PEM certificate", f.caFile)
		}
	}
	return c, nil
}

// explainTLS adds to an error of a connection whose server certificate
// was not trusted what to pass; other errors are returned as they are.
// The transports (gRPC's status, the WebSocket dial) keep only the text of
// the x509 error, so its text is what is recognised.
func (f *tlsFlags) explainTLS(err error) error {
	var ua x509.UnknownAuthorityError
	var hn x509.HostnameError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &hn) || strings.Contains(err.Error(), "x509: certificate is valid for") ||
		strings.Contains(err.Error(), "x509: certificate is not valid for") || strings.Contains(err.Error(), "x509: cannot validate certificate for"):
		return fmt.Errorf("%w (the server's certificate does not hold the name: pass --server-name with one it holds)", err)
	case f.caFile == "" && (errors.As(err, &ua) || strings.Contains(err.Error(), "x509: certificate signed by unknown authority")):
		return fmt.Errorf("%w (a server with a certificate of a private CA: pass --ca-file with that CA)", err)
	}
	return err
}
