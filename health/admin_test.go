package health

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/corralhq/corral/internal/admin"
	"github.com/prometheus/client_golang/prometheus"
)

// TestStatusPageOnTheAdminListener mounts the page and the metrics on a
// real admin listener, as the servers do, and reads both over HTTP.
func TestStatusPageOnTheAdminListener(t *testing.T) {
	reg := prometheus.NewRegistry()
	c := mustNew(t, Config{Checks: []CheckConfig{tcpCheck("db")}}, Options{Registerer: reg})
	_, _ = c.Observe("db", errDown)
	srv := admin.New(admin.Config{Addr: "127.0.0.1:0"}, admin.Options{Gatherer: reg})
	srv.Handle("GET /health", c.Handler())
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()
	select {
	case <-srv.Started():
	case <-time.After(10 * time.Second):
		t.Fatal("admin listener did not start")
	}
	if srv.Addr() == nil {
		t.Fatal("admin listener has no address")
	}
	base := "http://" + srv.Addr().String()
	get := func(path string) string {
		resp, err := http.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: %s", path, resp.Status)
		}
		return string(b)
	}
	var page struct {
		Checks []StatusJSON `json:"checks"`
	}
	if err := json.Unmarshal([]byte(get("/health?format=json")), &page); err != nil {
		t.Fatal(err)
	}
	if len(page.Checks) != 1 || page.Checks[0].Name != "db" || page.Checks[0].Healthy {
		t.Errorf("page %+v", page)
	}
	metrics := get("/metrics")
	for _, want := range []string{
		`corral_health_check_healthy{check="db"} 0`,
		`corral_health_check_transitions_total{check="db",to="unhealthy"} 1`,
		`corral_health_check_results_total{check="db",outcome="failure"} 1`,
	} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}
