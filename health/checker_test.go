package health

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/corralhq/corral/internal/testkit"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// origin is a test HTTP server whose status code can be switched.
type origin struct {
	*httptest.Server
	code    atomic.Int32
	body    atomic.Value // string
	served  atomic.Int64 // answers with a code >= 400
	answers atomic.Int64
}

func newOrigin(t *testing.T) *origin {
	o := &origin{}
	o.code.Store(http.StatusOK)
	o.body.Store("ok")
	o.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		code := int(o.code.Load())
		o.answers.Add(1)
		if code >= 400 {
			o.served.Add(1)
		}
		w.WriteHeader(code)
		_, _ = w.Write([]byte(o.body.Load().(string)))
	}))
	t.Cleanup(o.Close)
	return o
}

func mustNew(t *testing.T, cfg Config, opts Options) *Checker {
	t.Helper()
	c, err := New(cfg, opts)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func probe(t *testing.T, c *Checker, name string) Result {
	t.Helper()
	r, err := c.Probe(context.Background(), name)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestHTTPThresholdExactlyBothWays(t *testing.T) {
	o := newOrigin(t)
	reg := prometheus.NewRegistry()
	c := mustNew(t, Config{Checks: []CheckConfig{{
		Name: "web", Kind: KindHTTP, URL: o.URL + "/healthz", Interval: time.Hour, FailureThreshold: 3,
	}}}, Options{Registerer: reg})
	var mu sync.Mutex
	var changes []Change
	c.Subscribe(func(ch Change) { mu.Lock(); changes = append(changes, ch); mu.Unlock() })

	if r := probe(t, c, "web"); r.Err != nil || !r.Healthy {
		t.Fatalf("healthy origin: %+v", r)
	}
	o.code.Store(http.StatusServiceUnavailable)
	for i := 1; i <= 3; i++ {
		r := probe(t, c, "web")
		if r.Err == nil || !strings.Contains(r.Err.Error(), "status 503") {
			t.Fatalf("probe %d err = %v, want status 503", i, r.Err)
		}
		if want := i < 3; r.Healthy != want || c.Healthy("web") != want {
			t.Fatalf("after %d failures healthy = %v, want %v", i, r.Healthy, want)
		}
	}
	o.code.Store(http.StatusFound) // 3xx counts as healthy, not followed
	for i := 1; i <= 3; i++ {
		r := probe(t, c, "web")
		if r.Err != nil {
			t.Fatalf("probe %d of a 302: %v", i, r.Err)
		}
		if want := i == 3; r.Healthy != want {
			t.Fatalf("after %d successes healthy = %v, want %v", i, r.Healthy, want)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(changes) != 2 || changes[0].Healthy || !changes[1].Healthy || changes[0].Name != "web" {
		t.Fatalf("changes = %+v, want down then up", changes)
	}
	if !strings.Contains(changes[0].Reason, "3 consecutive failures") {
		t.Errorf("reason %q", changes[0].Reason)
	}
	if got := testutil.ToFloat64(c.m.transitions.WithLabelValues("web", "unhealthy")); got != 1 {
		t.Errorf("transitions to unhealthy = %v", got)
	}
	if got := testutil.ToFloat64(c.m.results.WithLabelValues("web", OutcomeFailure)); got != 3 {
		t.Errorf("failure results = %v", got)
	}
	if got := testutil.ToFloat64(c.m.results.WithLabelValues("web", OutcomeSuccess)); got != 4 {
		t.Errorf("success results = %v", got)
	}
	if got := testutil.ToFloat64(c.m.healthy.WithLabelValues("web")); got != 1 {
		t.Errorf("state gauge = %v", got)
	}
	if n, err := testutil.GatherAndCount(reg, "corral_health_check_duration_seconds"); err != nil || n != 1 {
		t.Errorf("latency histogram series = %d, %v", n, err)
	}
}

// TestRunLoopLeavesAfterThresholdAndReturns runs the real probe loop at a
// 20 ms interval against an origin that goes down and comes back.
func TestRunLoopLeavesAfterThresholdAndReturns(t *testing.T) {
	o := newOrigin(t)
	const threshold = 2
	c := mustNew(t, Config{Checks: []CheckConfig{{
		Name: "web", Kind: KindHTTP, URL: o.URL, Interval: 20 * time.Millisecond, FailureThreshold: threshold,
	}}}, Options{})
	failedAtChange := make(chan int64, 4)
	c.Subscribe(func(ch Change) {
		if !ch.Healthy {
			// The callback runs on the probe loop before its next probe,
			// so the count of failing answers is exact here.
			failedAtChange <- o.served.Load()
		}
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	runErr := make(chan error, 1)
	go func() { runErr <- c.Run(ctx) }()

	testkit.WaitFor(t, 5*time.Second, "first probes", func() bool { return o.answers.Load() >= 3 })
	if !c.Healthy("web") {
		t.Fatal("unhealthy while the origin answers 200")
	}
	o.code.Store(http.StatusInternalServerError)
	testkit.WaitFor(t, 5*time.Second, "the check to turn unhealthy", func() bool { return !c.Healthy("web") })
	if got := <-failedAtChange; got != threshold {
		t.Errorf("turned unhealthy after %d failed answers, want exactly %d", got, threshold)
	}
	o.code.Store(http.StatusOK)
	testkit.WaitFor(t, 5*time.Second, "the check to recover", func() bool { return c.Healthy("web") })
	st, _ := c.StatusOf("web")
	if st.Successes < threshold || st.Failures != 0 || st.LastError != "" {
		t.Errorf("status after recovery %+v", st)
	}

	sctx, scancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer scancel()
	if err := c.Shutdown(sctx); err != nil {
		t.Fatal(err)
	}
	if err := <-runErr; err != nil {
		t.Fatal(err)
	}
	if err := c.Run(context.Background()); err == nil {
		t.Error("second Run succeeded")
	}
}

func TestObserveAtIsDeterministic(t *testing.T) {
	c := mustNew(t, Config{Checks: []CheckConfig{{
		Name: "a", Kind: KindTCP, Address: "127.0.0.1:1", FailureThreshold: 2, SuccessThreshold: 4,
	}}}, Options{})
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	fail := errors.New("refused")
	steps := []struct {
		err  error
		want bool
	}{{fail, true}, {nil, true}, {fail, true}, {fail, false}, {nil, false}, {nil, false}, {nil, false}, {nil, true}}
	for i, s := range steps {
		got, err := c.ObserveAt("a", s.err, t0.Add(time.Duration(i)*time.Second))
		if err != nil || got != s.want {
			t.Fatalf("step %d: healthy = %v, %v; want %v", i, got, err, s.want)
		}
	}
	st, _ := c.StatusOf("a")
	if !st.Since.Equal(t0.Add(7*time.Second)) || st.Probes != 8 {
		t.Errorf("status %+v", st)
	}
	if _, err := c.ObserveAt("nope", nil, t0); err == nil {
		t.Error("ObserveAt of an unknown check succeeded")
	}
}

func TestInitialUnhealthyAndUnknownNames(t *testing.T) {
	c := mustNew(t, Config{Checks: []CheckConfig{
		{Name: "cold", Kind: KindTCP, Address: "127.0.0.1:1", Initial: InitialUnhealthy, FailureThreshold: 1},
		{Name: "warm", Kind: KindTCP, Address: "127.0.0.1:1"},
	}}, Options{})
	if c.Healthy("cold") || !c.Healthy("warm") {
		t.Fatalf("initial states cold=%v warm=%v", c.Healthy("cold"), c.Healthy("warm"))
	}
	if c.Healthy("missing") {
		t.Error("an unknown name is healthy")
	}
	if ok, _ := c.Observe("cold", nil); !ok {
		t.Error("cold did not turn healthy after one success with threshold 1")
	}
}

func TestTransitionsAreLogged(t *testing.T) {
	var buf testkit.SyncBuffer
	log := slog.New(slog.NewJSONHandler(&buf, nil))
	c := mustNew(t, Config{Checks: []CheckConfig{tcpCheck("db")}}, Options{Logger: log})
	_, _ = c.Observe("db", errors.New("connection refused"))
	_, _ = c.Observe("db", nil)
	_ = c.Update(Config{Checks: []CheckConfig{tcpCheck("db"), tcpCheck("db2")}})
	var lines []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("log line %q: %v", l, err)
		}
		lines = append(lines, m)
	}
	if len(lines) != 3 {
		t.Fatalf("log lines %v", lines)
	}
	down, up, reload := lines[0], lines[1], lines[2]
	if down["level"] != "WARN" || down["msg"] != "health check unhealthy" || down["check"] != "db" ||
		down["kind"] != "tcp" || down["target"] != "127.0.0.1:1" || !strings.Contains(down["reason"].(string), "connection refused") {
		t.Errorf("down line %v", down)
	}
	if up["level"] != "INFO" || up["msg"] != "health check healthy" || up["reason"] != "1 consecutive successes" {
		t.Errorf("up line %v", up)
	}
	if reload["msg"] != "health checks reloaded" || reload["added"] != 1.0 || reload["kept"] != 1.0 {
		t.Errorf("reload line %v", reload)
	}
}
