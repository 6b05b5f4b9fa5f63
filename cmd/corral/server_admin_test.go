package main

import (
	"context"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/corralhq/corral/internal/admin"
	"github.com/corralhq/corral/internal/lifecycle"
	"github.com/corralhq/corral/internal/testkit"
)

// slowServer is a server part whose Shutdown (its drain) blocks until
// release is closed; its Ready is always nil, like a server that does not
// track its own drain.
type slowServer struct {
	draining, release, stopped chan struct{}
}

func (s *slowServer) Run(ctx context.Context) error {
	select {
	case <-s.stopped:
	case <-ctx.Done():
	}
	return nil
}

func (s *slowServer) Shutdown(context.Context) error {
	close(s.draining)
	<-s.release
	close(s.stopped)
	return nil
}

// TestServeWithAdminStopsAdminLast is the mechanism of every server
// subcommand (hub, dns): while the server shuts down, /readyz answers 503
// (even though the server itself still says ready) and /metrics answers;
// after, the admin listener is down.
func TestServeWithAdminStopsAdminLast(t *testing.T) {
	addr := "127.0.0.1:" + freePort(t)
	reg := prometheus.NewRegistry()
	g := prometheus.NewGauge(prometheus.GaugeOpts{Name: "corral_test_draining", Help: "test"})
	reg.MustRegister(g)
	adm := admin.New(admin.Config{Addr: addr}, admin.Options{Gatherer: reg, Ready: func() error { return nil }})
	srv := &slowServer{draining: make(chan struct{}), release: make(chan struct{}), stopped: make(chan struct{})}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- serveWithAdmin(ctx, nil, time.Minute, adm, lifecycle.Named{Name: "server", Part: srv}) }()
	get := func(path string) (int, error) {
		resp, err := http.Get("http://" + addr + path)
		if err != nil {
			return 0, err
		}
		defer resp.Body.Close()
		_, _ = io.Copy(io.Discard, resp.Body)
		return resp.StatusCode, nil
	}
	testkit.WaitFor(t, 10*time.Second, "the admin listener up", func() bool {
		code, err := get("/readyz")
		return err == nil && code == 200
	})
	cancel()
	<-srv.draining
	if code, err := get("/readyz"); err != nil || code != http.StatusServiceUnavailable {
		t.Errorf("/readyz while the server shuts down: %d, %v; want 503", code, err)
	}
	if code, err := get("/metrics"); err != nil || code != 200 {
		t.Errorf("/metrics while the server shuts down: %d, %v; want 200", code, err)
	}
	close(srv.release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err == nil {
		c.Close()
		t.Fatal("the admin listener still accepts after the server stopped")
	}
}
