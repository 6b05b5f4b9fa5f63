package edge

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/corralhq/corral/hub"
	"github.com/corralhq/corral/internal/testkit"
	"github.com/corralhq/corral/wire"
	"github.com/corralhq/corral/wire/corralv1"
)

// goAwayOf returns the GoAway among frames, nil when there is none.
func goAwayOf(frames []*corralv1.ServerFrame) *corralv1.GoAway {
	for _, f := range frames {
		if g := f.GetGoAway(); g != nil {
			return g
		}
	}
	return nil
}

// TestDrainSendsJitteredGoAways: Shutdown sends every session a GoAway
// marked drain with a hint of drain.retry_after plus up to 100 % jitter,
// then 1001, at drain.rate; Ready fails and grpc.health.v1 answers
// NOT_SERVING from the start of the drain.
func TestDrainSendsJitteredGoAways(t *testing.T) {
	th := startHub(t, nil)
	te := startEdge(t, func(c *Config) { c.Drain.RetryAfter, c.Drain.Rate = 2*time.Second, 10 }, th)
	var rs []*rawGRPC
	for range 8 {
		rs = append(rs, welcomed(t, te, 2))
	}
	cc, err := grpc.NewClient("passthrough:///"+te.GRPCAddr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	hc := healthpb.NewHealthClient(cc)
	health := func() healthpb.HealthCheckResponse_ServingStatus {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		res, err := hc.Check(ctx, &healthpb.HealthCheckRequest{})
		if err != nil {
			t.Fatalf("health: %v", err)
		}
		return res.GetStatus()
	}
	if st := health(); st != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("health before the drain: %v", st)
	}
	done := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		done <- te.Shutdown(ctx)
	}()
	// Once the first session has its GoAway, the other seven are still
	// open (at 10 a second): the gRPC port is still served.
	testkit.WaitFor(t, 5*time.Second, "the first GoAway", func() bool { return te.Sessions() < 8 })
	if st := health(); st != healthpb.HealthCheckResponse_NOT_SERVING {
		t.Errorf("health while draining: %v", st)
	}
	hints := map[uint32]bool{}
	for i, r := range rs {
		frames, err := r.end(t)
		g := goAwayOf(frames)
		if g == nil || !g.GetDrain() {
			t.Fatalf("session %d: frames %v: want a drain GoAway", i, frames)
		}
		if ms := g.GetRetryAfterMs(); ms < 2000 || ms > 4000 {
			t.Errorf("session %d: hint %d ms, want 2 s plus up to 100 %%", i, ms)
		}
		hints[g.GetRetryAfterMs()] = true
		if c := wire.CloseFromStatus(err); c.Code != wire.CloseGoingAway {
			t.Errorf("session %d: closed with %v, want 1001", i, c.Code)
		}
		if te.Ready() == nil {
			t.Error("Ready while draining")
		}
	}
	if len(hints) < 2 {
		t.Errorf("every hint is the same (%v): want them jittered", hints)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// TestMaxSessionAge: a session ends at max_session_age (+-10 %) with a
// GoAway and a retry hint; the hub's session ends with it.
func TestMaxSessionAge(t *testing.T) {
	th := startHub(t, nil)
	te := startEdge(t, func(c *Config) {
		c.MaxSessionAge = time.Second
		c.Session.PingInterval = 2 * time.Second // ticks every 500 ms; the raw device answers no ping
	}, th)
	start := time.Now()
	r := welcomed(t, te, 2)
	frames, err := r.end(t)
	age := time.Since(start)
	g := goAwayOf(frames)
	if g == nil || g.GetRetryAfterMs() == 0 || wire.CloseFromStatus(err).Code != wire.CloseGoingAway {
		t.Fatalf("frames %v, end %v: want a GoAway with a hint, then 1001", frames, err)
	}
	if age < 900*time.Millisecond {
		t.Errorf("ended after %v, before max_session_age -10 %%", age)
	}
	noHubSessions(t, th)
}

// noHubSessions waits until the hub has no session left.
func noHubSessions(t *testing.T, th *testHub) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for th.Sessions() > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("the hub still holds %d sessions", th.Sessions())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestSlowDeviceDoesNotHoldTheStream: a device that reads nothing is
// closed with 4000 when its queue overflows, while a device on the same
// Relay stream gets every message.
func TestSlowDeviceDoesNotHoldTheStream(t *testing.T) {
	th := startHub(t, func(c *hub.Config) { c.Session.OutboundBytes = 1 << 20 })
	te := startEdge(t, func(c *Config) {
		c.Session.OutboundBytes = 64 << 10
		c.Relay.Streams = 1
	}, th)
	slow := welcomed(t, te, 0)
	slow.send(t, &corralv1.ClientFrame{Id: 2, Frame: &corralv1.ClientFrame_Subscribe{Subscribe: &corralv1.Subscribe{Channel: "firehose"}}})
	if f, err := slow.stream.Recv(); err != nil || f.GetSubscribed() == nil {
		t.Fatalf("slow: %v %v", f, err)
	}
	fast := welcomed(t, te, 0)
	fast.send(t, &corralv1.ClientFrame{Id: 2, Frame: &corralv1.ClientFrame_Subscribe{Subscribe: &corralv1.Subscribe{Channel: "firehose"}}})
	if f, err := fast.stream.Recv(); err != nil || f.GetSubscribed() == nil {
		t.Fatalf("fast: %v %v", f, err)
	}
	// One message at a time, each received by the fast device before the
	// next: the slow device's HTTP/2 window (64 KiB) and its queue at the
	// edge (64 KiB) fill after about 130 of them.
	ctx := context.Background()
	const n = 400
	for i := range n {
		if _, err := th.Publish(ctx, hub.PublishRequest{Tenant: "acme", Channel: "firehose", Priority: corralv1.Priority_PRIORITY_P0, Data: make([]byte, 1024)}); err != nil {
			t.Fatal(err)
		}
		f, err := fast.stream.Recv()
		if err != nil || f.GetMessage() == nil {
			t.Fatalf("fast device, message %d: %v %v", i, f, err)
		}
	}
	_, err := slow.end(t)
	if c := wire.CloseFromStatus(err); c.Code != wire.CloseSlowConsumer {
		t.Fatalf("slow device closed with %v (%v), want 4000", c.Code, err)
	}
}

// TestJitterAge: max_session_age is jittered uniformly over +-10 %.
func TestJitterAge(t *testing.T) {
	lo, hi := time.Duration(1<<62), time.Duration(0)
	for range 2000 {
		d := jitterAge(time.Hour)
		if d < 54*time.Minute || d > 66*time.Minute {
			t.Fatalf("jitterAge(1h) = %v, outside +-10 %%", d)
		}
		lo, hi = min(lo, d), max(hi, d)
	}
	if lo > 55*time.Minute || hi < 65*time.Minute {
		t.Errorf("2000 draws span %v to %v: want nearly the whole +-10 %%", lo, hi)
	}
}

// TestHubDrainRelayed: a hub's drain reaches the device through the edge
// as the hub sends it: its GoAway (drain, with its hint), then 1001 with
// the same hint.
func TestHubDrainRelayed(t *testing.T) {
	th := startHub(t, func(c *hub.Config) { c.Drain.RetryAfter = 3 * time.Second })
	te := startEdge(t, nil, th)
	r := welcomed(t, te, 2)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = th.Shutdown(ctx)
	}()
	frames, err := r.end(t)
	g := goAwayOf(frames)
	if g == nil || !g.GetDrain() || g.GetRetryAfterMs() < 3000 || g.GetRetryAfterMs() > 6000 {
		t.Fatalf("frames %v: want the hub's drain GoAway with its 3 s hint plus jitter", frames)
	}
	c := wire.CloseFromStatus(err)
	if c.Code != wire.CloseGoingAway || c.RetryAfter != time.Duration(g.GetRetryAfterMs())*time.Millisecond {
		t.Fatalf("closed with %v, want 1001 with the GoAway's hint %d ms", c, g.GetRetryAfterMs())
	}
}

// TestSlowDeviceP2GetsGaps: P1 and P2 messages that do not fit a slow
// device's queue are dropped and told as Gap frames (the hub's policy);
// the session stays open, and every offset is either delivered or in a
// Gap, once.
func TestSlowDeviceP2GetsGaps(t *testing.T) {
	th := startHub(t, func(c *hub.Config) { c.Session.OutboundBytes = 1 << 20 })
	te := startEdge(t, func(c *Config) {
		c.Session.OutboundBytes = 64 << 10
		c.Session.PingInterval = time.Minute
	}, th)
	sub := func(r *rawGRPC) {
		r.send(t, &corralv1.ClientFrame{Id: 2, Frame: &corralv1.ClientFrame_Subscribe{Subscribe: &corralv1.Subscribe{Channel: "p2hose"}}})
		if f, err := r.stream.Recv(); err != nil || f.GetSubscribed() == nil {
			t.Fatalf("subscribe: %v %v", f, err)
		}
	}
	slow, fast := welcomed(t, te, 2), welcomed(t, te, 2)
	sub(slow)
	sub(fast)
	ctx := context.Background()
	const n = 400
	for i := range n {
		if _, err := th.Publish(ctx, hub.PublishRequest{Tenant: "acme", Channel: "p2hose", Priority: corralv1.Priority_PRIORITY_P2, Data: make([]byte, 1024)}); err != nil {
			t.Fatal(err)
		}
		if f, err := fast.stream.Recv(); err != nil || f.GetMessage() == nil {
			t.Fatalf("fast device, message %d: %v %v", i, f, err)
		}
	}
	seen := make([]int, n+1)
	gaps := 0
	for covered := 0; covered < n; {
		f, err := slow.stream.Recv()
		if err != nil {
			t.Fatalf("slow device after %d offsets: %v", covered, err)
		}
		switch {
		case f.GetMessage() != nil:
			seen[f.GetMessage().GetOffset()]++
			covered++
		case f.GetGap() != nil:
			g := f.GetGap()
			gaps++
			for o := g.GetFromOffset(); o <= g.GetToOffset(); o++ {
				seen[o]++
				covered++
			}
		}
	}
	for o := 1; o <= n; o++ {
		if seen[o] != 1 {
			t.Fatalf("offset %d delivered or in a gap %d times, want once", o, seen[o])
		}
	}
	if gaps == 0 {
		t.Fatal("no Gap: the queue never overflowed")
	}
	slow.send(t, &corralv1.ClientFrame{Id: 9, Frame: &corralv1.ClientFrame_Ping{Ping: &corralv1.Ping{}}})
	if f, err := slow.stream.Recv(); err != nil || f.GetPong() == nil {
		t.Fatalf("the slow session after its gaps: %v %v, want it open", f, err)
	}
	if te.metric("corral_edge_messages_dropped_total", "priority", "p2") == 0 {
		t.Error("no drop counted")
	}
}
