package health

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// DialFunc opens a connection, with the signature of net.Dialer.DialContext.
type DialFunc func(ctx context.Context, network, address string) (net.Conn, error)

// prober runs one probe of a check and returns nil when it passed.
type prober interface {
	probe(ctx context.Context) error
	close()
}

func newProber(cc CheckConfig, dial DialFunc) prober {
	switch cc.Kind {
	case KindHTTP:
		return newHTTPProber(cc, dial)
	case KindTCP:
		return &tcpProber{address: cc.Address, dial: dial}
	case KindGRPC:
		return &grpcProber{cc: cc, dial: dial}
	}
	return nil
}

// httpProber sends GET requests on a fresh connection each time, so that a
// dead listener is noticed even when an old keep-alive connection survives.
type httpProber struct {
	cc     CheckConfig
	client *http.Client
	tr     *http.Transport
}

func newHTTPProber(cc CheckConfig, dial DialFunc) *httpProber {
	tlsCfg := &tls.Config{InsecureSkipVerify: cc.InsecureSkipVerify} //nolint:gosec // opt-in, for tests and self-signed origins
	if cc.Host != "" {
		h, _, err := net.SplitHostPort(cc.Host)
		if err != nil {
			h = cc.Host
		}
		tlsCfg.ServerName = h
	}
	tr := &http.Transport{
		DialContext:        dial,
		TLSClientConfig:    tlsCfg,
		DisableKeepAlives:  true,
		DisableCompression: true,
		Proxy:              nil,
	}
	return &httpProber{
		cc: cc,
		tr: tr,
		client: &http.Client{
			Transport: tr,
			CheckRedirect: func(*http.Request, []*http.Request) error {
				return http.ErrUseLastResponse
			},
		},
	}
}

func (p *httpProber) probe(ctx context.Context) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.cc.URL, nil)
	if err != nil {
		return err
	}
	if p.cc.Host != "" {
		req.Host = p.cc.Host
	}
	req.Header.Set("User-Agent", "corral-health/1")
	resp, err := p.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 399 {
		return fmt.Errorf("status %d", resp.StatusCode)
	}
	if p.cc.Match == "" {
		return nil
	}
	buf := make([]byte, BodyMatchLimit)
	n, err := io.ReadFull(resp.Body, buf)
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
		return fmt.Errorf("reading body: %w", err)
	}
	if !bytes.Contains(buf[:n], []byte(p.cc.Match)) {
		return fmt.Errorf("%q not in the first %d bytes of the body", p.cc.Match, BodyMatchLimit)
	}
	return nil
}

func (p *httpProber) close() { p.tr.CloseIdleConnections() }

// tcpProber passes when a connection opens.
type tcpProber struct {
	address string
	dial    DialFunc
}

func (p *tcpProber) probe(ctx context.Context) error {
	c, err := p.dial(ctx, "tcp", p.address)
	if err != nil {
		return err
	}
	return c.Close()
}

func (p *tcpProber) close() {}

// grpcProber asks grpc.health.v1.Health/Check on a fresh connection.
type grpcProber struct {
	cc   CheckConfig
	dial DialFunc
}

func (p *grpcProber) probe(ctx context.Context) error {
	creds := insecure.NewCredentials()
	if p.cc.TLS {
		creds = credentials.NewTLS(&tls.Config{InsecureSkipVerify: p.cc.InsecureSkipVerify}) //nolint:gosec // opt-in
	}
	conn, err := grpc.NewClient("passthrough:///"+p.cc.Address,
		grpc.WithTransportCredentials(creds),
		grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) {
			return p.dial(ctx, "tcp", addr)
		}),
	)
	if err != nil {
		return err
	}
	defer conn.Close()
	resp, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{Service: p.cc.Service})
	if err != nil {
		return err
	}
	if s := resp.GetStatus(); s != healthpb.HealthCheckResponse_SERVING {
		return fmt.Errorf("status %s", s)
	}
	return nil
}

func (p *grpcProber) close() {}
