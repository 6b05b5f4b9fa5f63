package health

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/corralhq/corral/internal/testkit"
)

// startRun runs c until the returned cancel is called, and checks that Run
// returned nil by then.
func startRun(t *testing.T, c *Checker) (context.Context, func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			cancel()
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("Run: %v", err)
				}
			case <-time.After(10 * time.Second):
				t.Error("Run did not return after its context ended")
			}
		})
	}
	t.Cleanup(stop)
	return ctx, stop
}

func TestRunSpreadsFirstProbes(t *testing.T) {
	const n, interval = 50, time.Second
	var mu sync.Mutex
	first := map[string]time.Time{}
	dial := func(ctx context.Context, network, addr string) (net.Conn, error) {
		mu.Lock()
		if _, ok := first[addr]; !ok {
			first[addr] = time.Now()
		}
		mu.Unlock()
		return nil, errors.New("test dialer refuses")
	}
	cfg := Config{}
	for i := range n {
		cfg.Checks = append(cfg.Checks, CheckConfig{Name: fmt.Sprintf("c%d", i), Kind: KindTCP, Address: fmt.Sprintf("c%d:1", i), Interval: interval})
	}
	c := mustNew(t, cfg, Options{Dial: dial})
	_, stop := startRun(t, c)
	testkit.WaitFor(t, 10*time.Second, "every check's first probe", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(first) == n
	})
	stop()
	var lo, hi time.Time
	for _, at := range first {
		if lo.IsZero() || at.Before(lo) {
			lo = at
		}
		if at.After(hi) {
			hi = at
		}
	}
	// 50 uniform draws over 1 s span about 0.96 s; all of them within a
	// quarter of it has a probability below 1e-25.
	if span := hi.Sub(lo); span < interval/4 {
		t.Errorf("first probes of %d checks span only %v of a %v interval", n, span, interval)
	}
}

// TestRaceViewWhileChecksRun reads the view, the status and the page while
// probes run, flap and the checks are replaced.
func TestRaceViewWhileChecksRun(t *testing.T) {
	o := newOrigin(t)
	checks := func(extra int) Config {
		cfg := Config{Checks: []CheckConfig{
			{Name: "web", Kind: KindHTTP, URL: o.URL, Interval: 10 * time.Millisecond, FailureThreshold: 1},
			{Name: "web2", Kind: KindHTTP, URL: o.URL + "/2", Interval: 15 * time.Millisecond, FailureThreshold: 1},
			{Name: "either", Kind: KindCalculated, Children: []string{"web", "web2"}, MinHealthy: 1},
		}}
		for i := range extra {
			cfg.Checks = append(cfg.Checks, CheckConfig{Name: fmt.Sprintf("x%d", i), Kind: KindHTTP, URL: o.URL, Interval: 20 * time.Millisecond})
		}
		return cfg
	}
	c := mustNew(t, checks(0), Options{})
	var downs, ups atomic.Int32
	c.Subscribe(func(ch Change) {
		if ch.Name != "web" {
			return
		}
		if ch.Healthy {
			ups.Add(1)
		} else {
			downs.Add(1)
		}
	})
	_, stop := startRun(t, c)
	defer stop()

	done := make(chan struct{})
	var wg sync.WaitGroup
	var reads atomic.Int64
	for range 2 {
		wg.Go(func() {
			for {
				select {
				case <-done:
					return
				default:
				}
				for range 100 {
					_ = c.Healthy("web")
					_ = c.Healthy("either")
				}
				reads.Add(1)
				// Leave the two cores to the probes now and then.
				time.Sleep(50 * time.Microsecond)
			}
		})
	}
	wg.Go(func() {
		h := c.Handler()
		for {
			select {
			case <-done:
				return
			default:
			}
			_ = c.Status()
			h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/health?format=json", nil))
			time.Sleep(time.Millisecond)
		}
	})
	wg.Go(func() {
		for i := 0; ; i++ {
			select {
			case <-done:
				return
			default:
			}
			if err := c.Update(checks(i % 3)); err != nil {
				t.Error(err)
				return
			}
			time.Sleep(3 * time.Millisecond)
		}
	})
	for round := range 3 {
		o.code.Store(http.StatusBadGateway)
		testkit.WaitFor(t, 5*time.Second, fmt.Sprintf("round %d down", round), func() bool { return !c.Healthy("web") })
		o.code.Store(http.StatusOK)
		testkit.WaitFor(t, 5*time.Second, fmt.Sprintf("round %d up", round), func() bool { return c.Healthy("web") })
	}
	close(done)
	wg.Wait()
	if downs.Load() < 3 || ups.Load() < 3 || reads.Load() == 0 {
		t.Errorf("downs=%d ups=%d reads=%d", downs.Load(), ups.Load(), reads.Load())
	}
}

func TestShutdownBeforeRun(t *testing.T) {
	c := mustNew(t, Config{Checks: []CheckConfig{tcpCheck("a")}}, Options{})
	if err := c.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- c.Run(context.Background()) }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run after Shutdown did not return")
	}
}

func TestStatusPage(t *testing.T) {
	t0 := time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)
	now := t0
	c := mustNew(t, Config{Checks: []CheckConfig{
		{Name: "web-1", Kind: KindHTTP, URL: "http://10.0.0.1:8080/healthz", Match: "ok", FailureThreshold: 1},
		{Name: "db", Kind: KindTCP, Address: "10.0.0.2:5432"},
		{Name: "front", Kind: KindCalculated, Children: []string{"web-1", "db"}, MinHealthy: 2},
	}}, Options{Now: func() time.Time { return now }})
	now = t0.Add(time.Minute)
	if _, err := c.ObserveAt("web-1", errors.New("status <503>"), now); err != nil {
		t.Fatal(err)
	}
	h := c.Handler()

	get := func(target, accept string) *httptest.ResponseRecorder {
		r := httptest.NewRequest("GET", target, nil)
		if accept != "" {
			r.Header.Set("Accept", accept)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w
	}
	w := get("/health", "text/html,application/xhtml+xml")
	body := w.Body.String()
	if ct := w.Header().Get("Content-Type"); !strings.HasPrefix(ct, "text/html") {
		t.Errorf("content type %q", ct)
	}
	for _, want := range []string{
		"1 of 3 healthy", "web-1", "http://10.0.0.1:8080/healthz match &#34;ok&#34;", "10.0.0.2:5432",
		"2 of [web-1, db]", "status &lt;503&gt;", "1 of 2 children healthy, need 2",
		"2026-11-30 09:01:00.000Z", "2026-11-30 09:00:00.000Z",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("HTML page lacks %q", want)
		}
	}
	if strings.Contains(body, "<503>") {
		t.Error("HTML page does not escape the error text")
	}

	for _, tc := range []struct{ name, target, accept string }{
		{"query", "/health?format=json", ""},
		{"accept", "/health", "application/json"},
	} {
		t.Run("json by "+tc.name, func(t *testing.T) {
			w := get(tc.target, tc.accept)
			if ct := w.Header().Get("Content-Type"); ct != "application/json" {
				t.Errorf("content type %q", ct)
			}
			var out struct {
				Checks []StatusJSON `json:"checks"`
			}
			if err := json.Unmarshal(w.Body.Bytes(), &out); err != nil {
				t.Fatal(err)
			}
			if len(out.Checks) != 3 {
				t.Fatalf("checks = %+v", out.Checks)
			}
			web := out.Checks[0]
			if web.Name != "web-1" || web.Kind != KindHTTP || web.Healthy || web.LastError != "status <503>" ||
				web.Since != "2026-11-30T09:01:00Z" || web.LastProbe != "2026-11-30T09:01:00Z" || web.Failures != 1 {
				t.Errorf("web-1 = %+v", web)
			}
			if db := out.Checks[1]; !db.Healthy || db.LastProbe != "" || db.Since != "2026-11-30T09:00:00Z" {
				t.Errorf("db = %+v", db)
			}
			if f := out.Checks[2]; f.Healthy || f.Target != "2 of [web-1, db]" {
				t.Errorf("front = %+v", f)
			}
		})
	}
}
