package kraken

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/corralhq/corral/hub"
	"github.com/corralhq/corral/hub/auth"
	"github.com/corralhq/corral/internal/testkit"
	"github.com/corralhq/corral/scenario"
)

const (
	testSecret = "kraken-test-secret-0123456789abcdef"
	testAPIKey = "kraken-test-api-key-0123456789"
)

// testToken mints session tokens as a backend would: every channel,
// priorities up to the rank asked.
func testToken(secret string) func(string, int) (string, error) {
	return func(tenant string, rank int) (string, error) {
		now := time.Now()
		c := auth.Claims{
			Tenant: tenant, Channels: []string{">"}, Publish: []string{">"}, MaxPriority: &rank,
			RegisteredClaims: jwt.RegisteredClaims{IssuedAt: jwt.NewNumericDate(now), ExpiresAt: jwt.NewNumericDate(now.Add(time.Hour))},
		}
		return jwt.NewWithClaims(jwt.SigningMethodHS256, c).SignedString([]byte(secret))
	}
}

type testHub struct {
	*hub.Hub
	reg *prometheus.Registry
}

// startHub runs one hub on loopback (port 0) for a test.
func startHub(t *testing.T, opts hub.Options) *testHub {
	t.Helper()
	return startHubID(t, "hub-a", opts)
}

// startHubID is startHub with the hub's node id.
func startHubID(t *testing.T, id string, opts hub.Options) *testHub {
	t.Helper()
	return startHubWith(t, id, opts, nil)
}

// startHubWith is startHubID with edit applied to the hub's test
// configuration (nil: none).
func startHubWith(t *testing.T, id string, opts hub.Options, edit func(*hub.Config)) *testHub {
	t.Helper()
	cfg := hub.DefaultConfig()
	cfg.Listen, cfg.GRPCListen, cfg.Admin.Addr = "127.0.0.1:0", "", ""
	cfg.NodeID = id
	cfg.Auth = auth.Config{
		Keys:    []auth.KeyConfig{{Algorithm: "HS256", Secret: testSecret}},
		APIKeys: []auth.APIKeyConfig{{Name: "test", Key: testAPIKey, Tenants: []string{"*"}}},
	}
	cfg.Drain.Deadline = 5 * time.Second
	if edit != nil {
		edit(&cfg)
	}
	reg := prometheus.NewRegistry()
	opts.Registerer = reg
	h, err := hub.New(cfg, opts)
	if err != nil {
		t.Fatal(err)
	}
	errc := make(chan error, 1)
	go func() { errc <- h.Run(context.Background()) }()
	<-h.Started()
	if err := h.Ready(); err != nil {
		t.Fatalf("hub did not start: %v (%v)", err, <-errc)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = h.Shutdown(ctx)
	})
	return &testHub{Hub: h, reg: reg}
}

func (h *testHub) url() string { return "ws://" + h.Addr().String() + "/v1/ws" }

// metric sums the values of a metric family of reg (a counter, a gauge, or
// a histogram's count).
func metric(t *testing.T, reg prometheus.Gatherer, name string) float64 {
	t.Helper()
	var sum float64
	for _, m := range testkit.Metrics(t, reg, name) {
		switch {
		case m.Counter != nil:
			sum += m.GetCounter().GetValue()
		case m.Gauge != nil:
			sum += m.GetGauge().GetValue()
		case m.Histogram != nil:
			sum += float64(m.GetHistogram().GetSampleCount())
		}
	}
	return sum
}

// metricWith sums the values of a metric family of reg whose label has
// value.
func metricWith(t *testing.T, reg prometheus.Gatherer, name, label, value string) float64 {
	t.Helper()
	var sum float64
	for _, m := range testkit.Metrics(t, reg, name) {
		for _, l := range m.GetLabel() {
			if l.GetName() == label && l.GetValue() == value {
				sum += m.GetCounter().GetValue() + m.GetGauge().GetValue()
			}
		}
	}
	return sum
}

// loadScenario decodes a scenario text for a test.
func loadScenario(t *testing.T, name, text string) *scenario.Scenario {
	t.Helper()
	sc, err := scenario.Decode(name, []byte(strings.TrimLeft(text, "\n")))
	if err != nil {
		t.Fatal(err)
	}
	return sc
}

// runScenario runs sc with cfg, bounded by a minute.
func runScenario(t *testing.T, sc *scenario.Scenario, cfg Config) *Result {
	t.Helper()
	return runScenarioWithin(t, sc, cfg, time.Minute)
}

// runScenarioWithin runs sc with cfg, bounded by d.
func runScenarioWithin(t *testing.T, sc *scenario.Scenario, cfg Config, d time.Duration) *Result {
	t.Helper()
	k, err := New(sc, cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	res, err := k.Run(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return res
}
