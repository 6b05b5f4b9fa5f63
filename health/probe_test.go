package health

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	grpchealth "google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

func TestHTTPBodyMatchWithinFirst5120Bytes(t *testing.T) {
	const mark = "ALIVE"
	tests := []struct {
		name    string
		padding int
		pass    bool
	}{
		{name: "mark at the start", padding: 0, pass: true},
		{name: "mark ends at byte 5120", padding: BodyMatchLimit - len(mark), pass: true},
		{name: "mark crosses byte 5120", padding: BodyMatchLimit - len(mark) + 1, pass: false},
		{name: "mark far beyond", padding: 64 << 10, pass: false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			o := newOrigin(t)
			o.body.Store(strings.Repeat("x", tc.padding) + mark + strings.Repeat("y", 100))
			c := mustNew(t, Config{Checks: []CheckConfig{{
				Name: "m", Kind: KindHTTP, URL: o.URL, Match: mark, FailureThreshold: 1,
			}}}, Options{})
			r := probe(t, c, "m")
			if (r.Err == nil) != tc.pass {
				t.Fatalf("padding %d: err = %v, want pass=%v", tc.padding, r.Err, tc.pass)
			}
			if !tc.pass && !strings.Contains(r.Err.Error(), "first 5120 bytes") {
				t.Errorf("err %q does not say where it looked", r.Err)
			}
		})
	}
}

func TestHTTPSHostHeaderAndSkipVerify(t *testing.T) {
	var host atomic.Value
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		host.Store(r.Host)
		_, _ = w.Write([]byte("fine"))
	}))
	defer srv.Close()
	c := mustNew(t, Config{Checks: []CheckConfig{
		{Name: "verify", Kind: KindHTTP, URL: srv.URL, FailureThreshold: 1},
		{Name: "skip", Kind: KindHTTP, URL: srv.URL + "/x", Host: "origin.corral.test", InsecureSkipVerify: true, FailureThreshold: 1},
	}}, Options{})
	if r := probe(t, c, "verify"); r.Err == nil {
		t.Error("a self-signed certificate passed verification")
	}
	if r := probe(t, c, "skip"); r.Err != nil {
		t.Fatalf("skip-verify probe: %v", r.Err)
	}
	if got := host.Load(); got != "origin.corral.test" {
		t.Errorf("Host header = %v", got)
	}
}

func TestHTTPTimeout(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	defer close(release)
	c := mustNew(t, Config{Checks: []CheckConfig{{
		Name: "slow", Kind: KindHTTP, URL: srv.URL, Interval: time.Second, Timeout: 50 * time.Millisecond, FailureThreshold: 1,
	}}}, Options{})
	r := probe(t, c, "slow")
	if r.Err == nil || !strings.Contains(r.Err.Error(), "timeout after 50ms") || r.Healthy {
		t.Fatalf("result %+v, want a timeout and unhealthy", r)
	}
}

func TestTCPListenerOpenedAndClosed(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	c := mustNew(t, Config{Checks: []CheckConfig{{
		Name: "db", Kind: KindTCP, Address: ln.Addr().String(), FailureThreshold: 1,
	}}}, Options{})
	if r := probe(t, c, "db"); r.Err != nil || !r.Healthy {
		t.Fatalf("open listener: %+v", r)
	}
	ln.Close()
	if r := probe(t, c, "db"); r.Err == nil || r.Healthy {
		t.Fatalf("closed listener: %+v", r)
	}
}

func TestDialOverride(t *testing.T) {
	var dials atomic.Int32
	dial := func(ctx context.Context, network, addr string) (net.Conn, error) {
		dials.Add(1)
		return (&net.Dialer{}).DialContext(ctx, network, addr)
	}
	o := newOrigin(t)
	c := mustNew(t, Config{Checks: []CheckConfig{{Name: "w", Kind: KindHTTP, URL: o.URL}}}, Options{Dial: dial})
	probe(t, c, "w")
	probe(t, c, "w")
	if got := dials.Load(); got != 2 {
		t.Errorf("dials = %d, want a fresh connection per probe (2)", got)
	}
}

func TestGRPCHealthProtocol(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	hs := grpchealth.NewServer()
	healthpb.RegisterHealthServer(srv, hs)
	go func() { _ = srv.Serve(ln) }()
	defer srv.Stop()
	hs.SetServingStatus("hub", healthpb.HealthCheckResponse_SERVING)

	c := mustNew(t, Config{Checks: []CheckConfig{
		{Name: "hub", Kind: KindGRPC, Address: ln.Addr().String(), Service: "hub", FailureThreshold: 1},
		{Name: "server", Kind: KindGRPC, Address: ln.Addr().String(), FailureThreshold: 1},
		{Name: "nosuch", Kind: KindGRPC, Address: ln.Addr().String(), Service: "nosuch", FailureThreshold: 1},
	}}, Options{})
	if r := probe(t, c, "hub"); r.Err != nil || !r.Healthy {
		t.Fatalf("SERVING: %+v", r)
	}
	if r := probe(t, c, "server"); r.Err != nil {
		t.Fatalf("whole server: %+v", r)
	}
	if r := probe(t, c, "nosuch"); r.Err == nil {
		t.Fatalf("unknown service passed")
	}
	hs.SetServingStatus("hub", healthpb.HealthCheckResponse_NOT_SERVING)
	r := probe(t, c, "hub")
	if r.Err == nil || !strings.Contains(r.Err.Error(), "NOT_SERVING") || r.Healthy {
		t.Fatalf("NOT_SERVING: %+v", r)
	}
	hs.SetServingStatus("hub", healthpb.HealthCheckResponse_SERVING)
	if r := probe(t, c, "hub"); r.Err != nil || !r.Healthy {
		t.Fatalf("SERVING again: %+v", r)
	}
	srv.Stop()
	if r := probe(t, c, "hub"); r.Err == nil || r.Healthy {
		t.Fatalf("stopped server: %+v", r)
	}
}

func TestGRPCOverTLS(t *testing.T) {
	// Borrow httptest's self-signed certificate for the gRPC server.
	hs := httptest.NewTLSServer(http.NotFoundHandler())
	cert := hs.TLS.Certificates[0]
	hs.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer(grpc.Creds(credentials.NewServerTLSFromCert(&cert)))
	healthpb.RegisterHealthServer(srv, grpchealth.NewServer())
	go func() { _ = srv.Serve(ln) }()
	defer srv.Stop()
	c := mustNew(t, Config{Checks: []CheckConfig{
		{Name: "tls", Kind: KindGRPC, Address: ln.Addr().String(), TLS: true, InsecureSkipVerify: true, FailureThreshold: 1},
		{Name: "verify", Kind: KindGRPC, Address: ln.Addr().String(), TLS: true, FailureThreshold: 1},
		{Name: "plain", Kind: KindGRPC, Address: ln.Addr().String(), FailureThreshold: 1},
	}}, Options{})
	if r := probe(t, c, "tls"); r.Err != nil {
		t.Fatalf("TLS with skip-verify: %v", r.Err)
	}
	if r := probe(t, c, "verify"); r.Err == nil {
		t.Error("a self-signed certificate passed verification")
	}
	if r := probe(t, c, "plain"); r.Err == nil {
		t.Error("a plaintext probe passed against a TLS server")
	}
}
