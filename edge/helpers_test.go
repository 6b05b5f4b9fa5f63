package edge

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/corralhq/corral/client"
	"github.com/corralhq/corral/hub"
	"github.com/corralhq/corral/hub/auth"
	"github.com/corralhq/corral/wire/corralv1"
)

const (
	testSecret   = "test-secret-0123456789"
	testAPIKey   = "test-api-key-0123456789"
	testRelayKey = "test-relay-key-0123456789"
)

// testHub is an in-process hub with relay keys and the memory history.
type testHub struct {
	*hub.Hub
	reg  *prometheus.Registry
	errc chan error
}

func startHub(t *testing.T, mod func(*hub.Config)) *testHub {
	t.Helper()
	cfg := hub.DefaultConfig()
	cfg.Listen, cfg.GRPCListen, cfg.Admin.Addr = "127.0.0.1:0", "127.0.0.1:0", ""
	cfg.Auth = auth.Config{
		Keys:    []auth.KeyConfig{{Algorithm: "HS256", Secret: testSecret}},
		APIKeys: []auth.APIKeyConfig{{Name: "test", Key: testAPIKey, Tenants: []string{"*"}}},
	}
	cfg.Relay.Keys = []hub.RelayKeyConfig{{Name: "edges", Key: testRelayKey}}
	cfg.History.Store = "memory"
	cfg.Drain.Deadline = 5 * time.Second
	cfg.Session.PublishRate, cfg.Session.PublishBurst = 10000, 10000
	if mod != nil {
		mod(&cfg)
	}
	reg := prometheus.NewRegistry()
	h, err := hub.New(cfg, hub.Options{Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	th := &testHub{Hub: h, reg: reg, errc: make(chan error, 1)}
	go func() { th.errc <- h.Run(context.Background()) }()
	<-h.Started()
	if h.Ready() != nil {
		t.Fatalf("hub did not start: %v", <-th.errc)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = h.Shutdown(ctx)
	})
	return th
}

func (th *testHub) metric(name string, labels ...string) float64 {
	return gather(th.reg, name, labels...)
}

// testEdge is an in-process edge in front of origins.
type testEdge struct {
	*Edge
	reg  *prometheus.Registry
	errc chan error
}

func testConfig(origins ...string) Config {
	cfg := DefaultConfig()
	cfg.Listen, cfg.GRPCListen, cfg.Admin.Addr = "127.0.0.1:0", "127.0.0.1:0", ""
	cfg.NodeID = "edge-test"
	cfg.Origins.Static = origins
	cfg.Relay.Key = testRelayKey
	cfg.Drain.Deadline = 5 * time.Second
	cfg.Session.PublishRate, cfg.Session.PublishBurst = 10000, 10000
	return cfg
}

func startEdge(t *testing.T, mod func(*Config), origins ...*testHub) *testEdge {
	t.Helper()
	var addrs []string
	for _, h := range origins {
		addrs = append(addrs, h.GRPCAddr().String())
	}
	cfg := testConfig(addrs...)
	if mod != nil {
		mod(&cfg)
	}
	reg := prometheus.NewRegistry()
	e, err := New(cfg, Options{Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	te := &testEdge{Edge: e, reg: reg, errc: make(chan error, 1)}
	go func() { te.errc <- e.Run(context.Background()) }()
	<-e.Started()
	if e.Ready() != nil {
		t.Fatalf("edge did not start: %v", <-te.errc)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = e.Shutdown(ctx)
	})
	return te
}

func (te *testEdge) wsAddr() string   { return "ws://" + te.Addr().String() + "/v1/ws" }
func (te *testEdge) grpcAddr() string { return "grpc://" + te.GRPCAddr().String() }

func (te *testEdge) metric(name string, labels ...string) float64 {
	return gather(te.reg, name, labels...)
}

// gather sums the counters or gauges of name whose labels match (a
// histogram's count of samples).
func gather(reg *prometheus.Registry, name string, labels ...string) float64 {
	ms, err := series(reg, name, labels...)
	if err != nil {
		return -1
	}
	total := 0.0
	for _, m := range ms {
		switch {
		case m.GetCounter() != nil:
			total += m.GetCounter().GetValue()
		case m.GetGauge() != nil:
			total += m.GetGauge().GetValue()
		case m.GetHistogram() != nil:
			total += float64(m.GetHistogram().GetSampleCount())
		}
	}
	return total
}

// histogramSum is the sum of the samples of the histograms of name.
func histogramSum(reg *prometheus.Registry, name string) float64 {
	ms, err := series(reg, name)
	if err != nil {
		return -1
	}
	sum := 0.0
	for _, m := range ms {
		sum += m.GetHistogram().GetSampleSum()
	}
	return sum
}

// series returns the series of the family name whose labels match labels
// (name, value pairs).
func series(reg *prometheus.Registry, name string, labels ...string) ([]*dto.Metric, error) {
	mfs, err := reg.Gather()
	if err != nil {
		return nil, err
	}
	var out []*dto.Metric
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
			out = append(out, m)
		}
	}
	return out, nil
}

type tokenOpts struct {
	tenant   string
	channels []string
	prio     int
}

func token(t *testing.T, o tokenOpts) string {
	t.Helper()
	if o.tenant == "" {
		o.tenant = "acme"
	}
	if o.channels == nil {
		o.channels = []string{">"}
	}
	p := o.prio
	s, err := jwt.NewWithClaims(jwt.SigningMethodHS256, auth.Claims{
		Tenant: o.tenant, Channels: o.channels, Publish: []string{">"}, MaxPriority: &p,
		RegisteredClaims: jwt.RegisteredClaims{ExpiresAt: jwt.NewNumericDate(time.Now().Add(time.Hour))},
	}).SignedString([]byte(testSecret))
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

func nextEvent(t *testing.T, c *client.Client, kinds ...client.EventKind) client.Event {
	t.Helper()
	timeout := time.After(15 * time.Second)
	for {
		select {
		case e, ok := <-c.Events():
			if !ok {
				t.Fatalf("events closed while waiting for %v", kinds)
			}
			for _, k := range kinds {
				if e.Kind == k {
					return e
				}
			}
		case <-timeout:
			t.Fatalf("no event of kinds %v", kinds)
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

func seq(prefix string, from, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s%d", prefix, from+i)
	}
	return out
}

// rawGRPC is a device gRPC stream that sends whatever it is told.
type rawGRPC struct {
	stream corralv1.Corral_ConnectClient
	ctx    context.Context // the test's deadline
	cancel context.CancelFunc
}

func dialRawGRPC(t *testing.T, te *testEdge) *rawGRPC {
	t.Helper()
	cc, err := grpc.NewClient("passthrough:///"+te.GRPCAddr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cc.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	st, err := corralv1.NewCorralClient(cc).Connect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return &rawGRPC{stream: st, ctx: ctx, cancel: cancel}
}

func (r *rawGRPC) send(t *testing.T, f *corralv1.ClientFrame) {
	t.Helper()
	if err := r.stream.Send(f); err != nil {
		t.Fatalf("send: %v", err)
	}
}

// end reads until the stream ends and returns the frames read and the
// final error.
func (r *rawGRPC) end(t *testing.T) ([]*corralv1.ServerFrame, error) {
	t.Helper()
	var frames []*corralv1.ServerFrame
	for {
		f, err := r.stream.Recv()
		if err != nil {
			if r.ctx.Err() != nil {
				t.Fatalf("the edge did not end the stream (the test's deadline did): %v; %d frames read", err, len(frames))
			}
			return frames, err
		}
		frames = append(frames, f)
	}
}

func helloFrame(tok string, subs ...string) *corralv1.ClientFrame {
	h := &corralv1.Hello{Token: tok}
	for _, s := range subs {
		h.Subscribe = append(h.Subscribe, &corralv1.Subscribe{Channel: s})
	}
	return &corralv1.ClientFrame{Id: 1, Frame: &corralv1.ClientFrame_Hello{Hello: h}}
}
