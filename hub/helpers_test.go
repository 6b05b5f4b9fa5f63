package hub

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/corralhq/corral/client"
	"github.com/corralhq/corral/hub/auth"
	"github.com/corralhq/corral/internal/natsutil"
	"github.com/corralhq/corral/wire"
)

const (
	testSecret   = "test-secret-0123456789"
	testAPIKey   = "test-api-key-0123456789"
	testRelayKey = "test-relay-key-0123456789"
)

type testHub struct {
	*Hub
	reg  *prometheus.Registry
	errc chan error
}

// startHub runs a hub on loopback ports with the test keys; mod adjusts
// the config and options first.
func startHub(t *testing.T, mod func(*Config, *Options)) *testHub {
	t.Helper()
	return startHubSet(t, mod, nil)
}

// startHubSet is startHub with set applied to the hub before it runs (for
// test hooks).
func startHubSet(t *testing.T, mod func(*Config, *Options), set func(*Hub)) *testHub {
	t.Helper()
	cfg := DefaultConfig()
	cfg.Listen, cfg.GRPCListen, cfg.Admin.Addr = "127.0.0.1:0", "127.0.0.1:0", ""
	cfg.Auth = auth.Config{
		Keys:    []auth.KeyConfig{{Algorithm: "HS256", Secret: testSecret}},
		APIKeys: []auth.APIKeyConfig{{Name: "test", Key: testAPIKey, Tenants: []string{"*"}}},
	}
	cfg.Relay.Keys = []RelayKeyConfig{{Name: "test-edge", Key: testRelayKey}}
	cfg.Drain.Deadline = 5 * time.Second
	cfg.Session.PublishRate, cfg.Session.PublishBurst = 10000, 10000
	reg := prometheus.NewRegistry()
	opts := Options{Registerer: reg}
	if mod != nil {
		mod(&cfg, &opts)
	}
	h, err := New(cfg, opts)
	if err != nil {
		t.Fatal(err)
	}
	if set != nil {
		set(h)
	}
	th := &testHub{Hub: h, reg: reg, errc: make(chan error, 1)}
	go func() { th.errc <- h.Run(context.Background()) }()
	<-h.Started()
	if h.Ready() != nil {
		t.Fatalf("hub did not start: %v", <-th.errc)
	}
	t.Cleanup(func() { th.stop(t) })
	return th
}

func (th *testHub) stop(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = th.Shutdown(ctx)
}

func (th *testHub) wsAddr() string   { return "ws://" + th.Addr().String() + "/v1/ws" }
func (th *testHub) grpcAddr() string { return "grpc://" + th.GRPCAddr().String() }

// counter reads a counter or gauge of the hub's registry.
func (th *testHub) metric(name string, labels ...string) float64 {
	mfs, err := th.reg.Gather()
	if err != nil {
		return -1
	}
	total := 0.0
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	metrics:
		for _, m := range mf.GetMetric() {
			for i := 0; i+1 < len(labels); i += 2 {
				ok := false
				for _, lp := range m.GetLabel() {
					if lp.GetName() == labels[i] && lp.GetValue() == labels[i+1] {
						ok = true
					}
				}
				if !ok {
					continue metrics
				}
			}
			if m.GetCounter() != nil {
				total += m.GetCounter().GetValue()
			} else if m.GetGauge() != nil {
				total += m.GetGauge().GetValue()
			}
		}
	}
	return total
}

type tokenOpts struct {
	tenant   string
	channels []string
	publish  []string
	prio     int
	expires  time.Duration
	noExpiry bool // no exp claim at all
	secret   string
}

func token(t *testing.T, o tokenOpts) string {
	t.Helper()
	if o.tenant == "" {
		o.tenant = "acme"
	}
	if o.channels == nil {
		o.channels = []string{">"}
	}
	if o.publish == nil {
		o.publish = []string{">"}
	}
	if o.expires == 0 {
		o.expires = time.Hour
	}
	if o.secret == "" {
		o.secret = testSecret
	}
	p := o.prio
	exp := jwt.NewNumericDate(time.Now().Add(o.expires))
	if o.noExpiry {
		exp = nil
	}
	s, err := jwt.NewWithClaims(jwt.SigningMethodHS256, auth.Claims{
		Tenant: o.tenant, Channels: o.channels, Publish: o.publish, MaxPriority: &p,
		RegisteredClaims: jwt.RegisteredClaims{ExpiresAt: exp},
	}).SignedString([]byte(o.secret))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func dialClient(t *testing.T, cfg client.Config) *client.Client {
	t.Helper()
	if cfg.Token == "" {
		cfg.Token = token(t, tokenOpts{})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := client.Dial(ctx, cfg)
	if err != nil {
		t.Fatalf("dial %v: %v", cfg.Addrs, err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// nextEvent waits for the next event of one of kinds, skipping others.
func nextEvent(t *testing.T, c *client.Client, kinds ...client.EventKind) client.Event {
	t.Helper()
	e, err := awaitEvent(c, kinds...)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// awaitEvent is nextEvent for goroutines other than the test's.
func awaitEvent(c *client.Client, kinds ...client.EventKind) (client.Event, error) {
	timeout := time.After(15 * time.Second)
	for {
		select {
		case e, ok := <-c.Events():
			if !ok {
				return e, fmt.Errorf("events closed")
			}
			for _, k := range kinds {
				if e.Kind == k {
					return e, nil
				}
			}
		case <-timeout:
			return client.Event{}, fmt.Errorf("no event of kinds %v", kinds)
		}
	}
}

// collect reads n messages, failing on a gap.
func collect(t *testing.T, c *client.Client, n int) []string {
	t.Helper()
	var out []string
	for len(out) < n {
		e := nextEvent(t, c, client.EventMessage, client.EventGap)
		if e.Kind == client.EventGap {
			t.Fatalf("gap after %d messages: %+v", len(out), e.Gap)
		}
		out = append(out, string(e.Message.GetData()))
	}
	return out
}

func want(prefix string, from, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s%d", prefix, from+i)
	}
	return out
}

func httpPublish(t *testing.T, th *testHub, tenant, channel, prio, data string) {
	t.Helper()
	body := fmt.Sprintf(`{"tenant":%q,"channel":%q,"priority":%q,"data":%q}`, tenant, channel, prio, data)
	req, _ := http.NewRequest("POST", "http://"+th.Addr().String()+"/v1/publish", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+testAPIKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("publish: HTTP %d", resp.StatusCode)
	}
}

// sharedNATS is one embedded NATS server for the tests that need two hubs
// on the same NATS.
func sharedNATS(t *testing.T) *natsutil.Conn {
	t.Helper()
	c, err := natsutil.Connect(context.Background(), natsutil.Config{}, t.Name(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

var closeForTest = wire.Close{Code: wire.CloseGoingAway, Text: "test cut"}

// closeAll closes every session of the hub with c.
func (th *testHub) closeAll(c wire.Close) {
	for _, s := range th.snapshotSessions() {
		s.close(c, true)
	}
}
