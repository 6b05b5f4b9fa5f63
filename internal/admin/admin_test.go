package admin

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestAdminEndpoints(t *testing.T) {
	reg := NewRegistry()
	c := prometheus.NewCounter(prometheus.CounterOpts{Name: "corral_test_total", Help: "test"})
	reg.MustRegister(c)
	c.Add(3)
	var notReady atomic.Bool
	notReady.Store(true)
	s := New(Config{Addr: "127.0.0.1:0"}, Options{Gatherer: reg, Ready: func() error {
		if notReady.Load() {
			return errors.New("zones not loaded")
		}
		return nil
	}})
	s.Handle("GET /status", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "checks") }))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	<-s.Started()
	if s.Addr() == nil {
		t.Fatal("no address after start")
	}
	base := "http://" + s.Addr().String()

	tests := []struct {
		name     string
		path     string
		wantCode int
		wantBody string
	}{
		{"metrics carry registered series", "/metrics", 200, "corral_test_total 3"},
		{"metrics carry Go runtime", "/metrics", 200, "go_goroutines"},
		{"healthz", "/healthz", 200, "ok"},
		{"readyz while not ready", "/readyz", 503, "zones not loaded"},
		{"pprof index", "/debug/pprof/", 200, "goroutine"},
		{"extra page", "/status", 200, "checks"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			code, body := get(t, base+tc.path)
			if code != tc.wantCode || !strings.Contains(body, tc.wantBody) {
				t.Errorf("GET %s = %d %q, want %d with %q", tc.path, code, body, tc.wantCode, tc.wantBody)
			}
		})
	}
	notReady.Store(false)
	if code, _ := get(t, base+"/readyz"); code != 200 {
		t.Errorf("readyz = %d once ready", code)
	}
	// The process begins to shut down: readyz fails whatever the server
	// says, the other pages answer until Shutdown.
	s.Stopping()
	if code, body := get(t, base+"/readyz"); code != 503 || !strings.Contains(body, "shutting down") {
		t.Errorf("readyz while stopping = %d %q, want 503 shutting down", code, body)
	}
	if code, body := get(t, base+"/metrics"); code != 200 || !strings.Contains(body, "corral_test_total 3") {
		t.Errorf("metrics while stopping = %d", code)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}
	if _, err := http.Get(base + "/healthz"); err == nil {
		t.Error("listener still answers after shutdown")
	}
}

func TestAdminBadAddr(t *testing.T) {
	if err := (Config{Addr: "nonsense"}).Validate(); err == nil {
		t.Error("Validate accepted an address without a port")
	}
	s := New(Config{Addr: "127.0.0.1:99999"}, Options{})
	if err := s.Run(context.Background()); err == nil || !strings.HasPrefix(err.Error(), "admin: ") {
		t.Errorf("Run on a bad port: %v", err)
	}
}

// TestIdleConnectionsAreClosed: a keep-alive connection after a request,
// and one that sent a few bytes of the next, are closed after IdleTimeout.
func TestIdleConnectionsAreClosed(t *testing.T) {
	s := New(Config{Addr: "127.0.0.1:0", IdleTimeout: 200 * time.Millisecond, ReadHeaderTimeout: 200 * time.Millisecond}, Options{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = s.Run(ctx) }()
	<-s.Started()
	for _, next := range []string{"", "GET"} {
		c, err := net.Dial("tcp", s.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		_, _ = io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: admin\r\n\r\n")
		r := bufio.NewReader(c)
		resp, err := http.ReadResponse(r, nil)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		_, _ = io.WriteString(c, next)
		_ = c.SetReadDeadline(time.Now().Add(8 * time.Second)) // far above the bound
		_, err = r.ReadByte()
		if ne, ok := err.(net.Error); ok && ne.Timeout() {
			t.Fatalf("keep-alive connection (then %q) still open after 8s", next)
		}
	}
}
