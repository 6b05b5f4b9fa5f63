package health_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"time"

	"github.com/corralhq/corral/health"
)

// A Static view fixes states for tests and the cohort simulator; a name it
// does not hold is unhealthy, so callers ask only about records that have a
// check.
func ExampleStatic() {
	view := health.Static{"web-1": true, "web-2": false}
	for _, name := range []string{"web-1", "web-2", "web-3"} {
		fmt.Println(name, view.Healthy(name))
	}
	// Output:
	// web-1 true
	// web-2 false
	// web-3 false
}

// A Checker probing a test origin: it turns unhealthy after the failure
// threshold of consecutive failed probes and healthy again after as many
// passed ones. Probe runs one probe now; Run would probe every interval.
func ExampleChecker() {
	var down atomic.Bool
	origin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if down.Load() {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
		fmt.Fprintln(w, "ok")
	}))
	defer origin.Close()

	c, err := health.New(health.Config{Checks: []health.CheckConfig{{
		Name: "web", Kind: health.KindHTTP, URL: origin.URL + "/healthz",
		Match: "ok", Interval: 10 * time.Second, FailureThreshold: 2,
	}}}, health.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	c.Subscribe(func(ch health.Change) { fmt.Println("  change:", ch.Name, "healthy =", ch.Healthy) })

	ctx := context.Background()
	for _, d := range []bool{true, true, false, false} {
		down.Store(d)
		r, _ := c.Probe(ctx, "web")
		fmt.Printf("origin down=%v probe error=%v healthy=%v\n", d, r.Err, c.Healthy("web"))
	}
	// Output:
	// origin down=true probe error=status 503 healthy=true
	//   change: web healthy = false
	// origin down=true probe error=status 503 healthy=false
	// origin down=false probe error=<nil> healthy=false
	//   change: web healthy = true
	// origin down=false probe error=<nil> healthy=true
}

// Validation errors name the key path, so that config.Load can name the
// line of the file.
func ExampleConfig_Validate() {
	cfg := health.Config{Checks: []health.CheckConfig{
		{Name: "db", Kind: health.KindTCP, Address: "10.0.0.2:5432", FailureThreshold: 11},
		{Name: "front", Kind: health.KindCalculated, Children: []string{"db", "web"}},
	}}
	fmt.Println(cfg.Validate())
	// Output:
	// health: checks[0].failure_threshold: must be between 1 and 10, got 11
	// health: checks[1].children[1]: unknown check "web"
}

// A calculated check is healthy while at least MinHealthy of its children
// are. Observe feeds outcomes measured elsewhere, without I/O.
func ExampleChecker_Observe() {
	c, _ := health.New(health.Config{Checks: []health.CheckConfig{
		{Name: "a", Kind: health.KindTCP, Address: "10.0.0.1:443", FailureThreshold: 1},
		{Name: "b", Kind: health.KindTCP, Address: "10.0.0.2:443", FailureThreshold: 1},
		{Name: "c", Kind: health.KindTCP, Address: "10.0.0.3:443", FailureThreshold: 1},
		{Name: "quorum", Kind: health.KindCalculated, Children: []string{"a", "b", "c"}, MinHealthy: 2},
	}}, health.Options{})
	refused := errors.New("connection refused")
	for _, name := range []string{"a", "b"} {
		_, _ = c.Observe(name, refused)
		st, _ := c.StatusOf("quorum")
		fmt.Printf("%s down: quorum healthy=%v (%d of 3 up)\n", name, st.Healthy, st.Successes)
	}
	// Output:
	// a down: quorum healthy=true (2 of 3 up)
	// b down: quorum healthy=false (1 of 3 up)
}
