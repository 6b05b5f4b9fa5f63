package kraken

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"sync/atomic"
	"time"

	"google.golang.org/grpc/credentials"

	"github.com/corralhq/corral/internal/tlssession"
)

// TLS devices: wss:// and grpcs:// targets. Each attempt makes a TLS
// client handshake with the URL's host as the server name (SNI, and the
// name the certificate must carry; an address as host is checked against
// the certificate's addresses and sends no SNI), trusting the CAs of
// Config.CAFile (default: the system roots). Each device keeps the
// session ticket of its last server (its address and name): a reconnect
// to the same server resumes its TLS session, one to another server of
// the name makes a full handshake, as the client SDK's per-address cache
// does. Every handshake is timed (latency.tls) and counted full or
// resumed (tls_handshakes); a failed one is an attempt failed for "tls".
//
// wss is kraken's own WebSocket client over crypto/tls, which the poller
// cannot drive: a wss session costs a goroutine reading its connection
// (into a 4 KiB buffer) and crypto/tls's record buffers on top of a ws
// one, as the hub's wss listener does (internal/wsserve/tls.go).

// loadCA reads the PEM CAs of file (or pemBytes when set): nil pool and
// bytes for neither.
func loadCA(file string, pemBytes []byte) (*x509.CertPool, []byte, error) {
	if pemBytes == nil && file == "" {
		return nil, nil, nil
	}
	if pemBytes == nil {
		b, err := os.ReadFile(file)
		if err != nil {
			return nil, nil, fmt.Errorf("kraken: CA file: %w", err)
		}
		pemBytes = b
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pemBytes) {
		return nil, nil, fmt.Errorf("kraken: CA file %s: no PEM certificate in it", file)
	}
	return pool, pemBytes, nil
}

// ticket is the one TLS session a device keeps (crypto/tls's key for it,
// under tlssession's per-address prefix).
type ticket struct {
	key string
	cs  *tls.ClientSessionState
}

// tickets is a device's TLS session cache: its last server's session.
// crypto/tls puts a new one from the connection's reader, which may
// outlive the attempt, so it is an atomic pointer. The zero value is
// empty.
type tickets struct{ last atomic.Pointer[ticket] }

var _ tls.ClientSessionCache = (*tickets)(nil)

func (t *tickets) Get(key string) (*tls.ClientSessionState, bool) {
	if e := t.last.Load(); e != nil && e.key == key {
		return e.cs, true
	}
	return nil, false
}

func (t *tickets) Put(key string, cs *tls.ClientSessionState) {
	if cs == nil {
		if e := t.last.Load(); e != nil && e.key == key {
			t.last.CompareAndSwap(e, nil)
		}
		return
	}
	t.last.Store(&ticket{key: key, cs: cs})
}

// tlsConfig is the TLS configuration of one attempt of d to ep.
func (r *runner) tlsConfig(d *device, ep endpoint, alpn string) *tls.Config {
	return &tls.Config{
		MinVersion:         tls.VersionTLS12,
		RootCAs:            r.roots,
		ServerName:         ep.name,
		NextProtos:         []string{alpn},
		ClientSessionCache: tlssession.PerAddress(&d.tickets, ep.addr),
	}
}

// handshake makes the TLS handshake of a wss attempt over nc, bounded by
// ctx; the failure's reason, or "" and the connection.
func (r *runner) handshake(ctx context.Context, d *device, ep endpoint, nc net.Conn) (*tls.Conn, string) {
	tc := tls.Client(nc, r.tlsConfig(d, ep, "http/1.1"))
	start := time.Now()
	if err := tc.HandshakeContext(ctx); err != nil {
		_ = nc.Close()
		return nil, tlsReason(ctx, err)
	}
	r.rec.tlsHandshake(time.Since(start), tc.ConnectionState().DidResume)
	return tc, ""
}

// tlsReason names a failed handshake: "tls", or the dial's timeout.
func tlsReason(ctx context.Context, err error) string {
	if ctx.Err() != nil {
		return dialReason(ctx.Err())
	}
	var nerr net.Error
	if errors.As(err, &nerr) && nerr.Timeout() {
		return "dial_timeout"
	}
	return "tls"
}

// timedCreds are grpc-go's TLS credentials for a grpcs attempt, with its
// handshake timed and counted, and its failure kept for the device.
type timedCreds struct {
	credentials.TransportCredentials
	r      *runner
	failed *atomic.Bool
}

func (c timedCreds) ClientHandshake(ctx context.Context, authority string, raw net.Conn) (net.Conn, credentials.AuthInfo, error) {
	start := time.Now()
	conn, info, err := c.TransportCredentials.ClientHandshake(ctx, authority, raw)
	if err != nil {
		c.failed.Store(true)
		return nil, nil, err
	}
	resumed := false
	if ti, ok := info.(credentials.TLSInfo); ok {
		resumed = ti.State.DidResume
	}
	c.r.rec.tlsHandshake(time.Since(start), resumed)
	return conn, info, nil
}

func (c timedCreds) Clone() credentials.TransportCredentials {
	return timedCreds{TransportCredentials: c.TransportCredentials.Clone(), r: c.r, failed: c.failed}
}
