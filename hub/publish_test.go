package hub

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/corralhq/corral/client"
	"github.com/corralhq/corral/hub/history"
	"github.com/corralhq/corral/internal/natsutil"
	"github.com/corralhq/corral/wire"
	"github.com/corralhq/corral/wire/corralv1"
)

func TestPublishAPIs(t *testing.T) {
	nc := sharedNATS(t)
	th := startHub(t, func(_ *Config, o *Options) { o.NATS = nc.NC })
	ctx := context.Background()
	sub := dialClient(t, client.Config{Addrs: []string{th.wsAddr()}})
	if _, err := sub.Subscribe(ctx, "feed"); err != nil {
		t.Fatal(err)
	}

	// HTTP.
	httpPublish(t, th, "acme", "feed", "p1", "via http")

	// gRPC with the API key.
	cc, err := grpc.NewClient(th.GRPCAddr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	api := corralv1.NewCorralClient(cc)
	req := &corralv1.PublishRequest{Tenant: "acme", Publish: &corralv1.Publish{Channel: "feed", Data: []byte("via grpc"), ClientMessageId: "g1"}}
	if _, err := api.Publish(ctx, req); status.Code(err) != codes.Unauthenticated {
		t.Fatalf("gRPC publish without a key: %v, want Unauthenticated", err)
	}
	actx := metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+testAPIKey)
	first, err := api.Publish(actx, req)
	if err != nil {
		t.Fatal(err)
	}
	again, err := api.Publish(actx, req)
	if err != nil || !again.GetDuplicate() || again.GetOffset() != first.GetOffset() {
		t.Fatalf("retried publish: %+v, %v; want a duplicate of offset %d", again, err, first.GetOffset())
	}

	// Plain NATS, as a request to get the reply.
	m := nats.NewMsg("corral.publish.acme.feed")
	m.Data = []byte("via nats")
	m.Header.Set(history.HeaderPriority, "0")
	r, err := nc.NC.RequestMsg(m, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	var rep publishReply
	if err := json.Unmarshal(r.Data, &rep); err != nil || rep.Offset != 3 {
		t.Fatalf("NATS publish reply %s (%v), want offset 3", r.Data, err)
	}
	got := collect(t, sub, 3)
	if got[0] != "via http" || got[1] != "via grpc" || got[2] != "via nats" {
		t.Fatalf("got %q", got)
	}
}

func TestIngestChannelsLandInJetStream(t *testing.T) {
	nc := sharedNATS(t)
	th := startHub(t, func(c *Config, o *Options) {
		o.NATS = nc.NC
		c.Ingest.Prefixes = []string{"telemetry."}
	})
	ctx := context.Background()
	dev := dialClient(t, client.Config{Addrs: []string{th.grpcAddr()}})
	if _, err := dev.Subscribe(ctx, "telemetry.temp"); err == nil {
		t.Fatal("subscribing to an ingest channel was allowed")
	}
	for i, v := range []string{"21.5", "21.7", "21.7"} {
		id := []string{"a", "b", "b"}[i] // the third is a retry of the second
		if _, err := dev.Publish(ctx, "telemetry.temp", client.PriorityP2, []byte(v), id); err != nil {
			t.Fatal(err)
		}
	}
	s, err := nc.JS.Stream(ctx, "CORRAL_INGEST")
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(ctx)
	if err != nil || info.State.Msgs != 2 {
		t.Fatalf("ingest stream holds %d messages (%v), want 2", info.State.Msgs, err)
	}
	cons, err := s.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	msg, err := cons.Next(jetstream.FetchMaxWait(5 * time.Second))
	if err != nil || msg.Subject() != "corral.ingest.acme.telemetry.temp" || string(msg.Data()) != "21.5" {
		t.Fatalf("first ingested: %v %v", msg, err)
	}
}

func TestDrainSendsPacedGoAway(t *testing.T) {
	th := startHub(t, func(c *Config, _ *Options) {
		c.Drain.Rate = 50
		c.Drain.RetryAfter = 2 * time.Second
	})
	var cs []*client.Client
	for i := range 6 {
		addr := th.wsAddr()
		if i%2 == 1 {
			addr = th.grpcAddr()
		}
		cs = append(cs, dialClient(t, client.Config{Addrs: []string{addr}, ReconnectMin: time.Hour, ReconnectMax: time.Hour}))
	}
	done := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		done <- th.Shutdown(ctx)
	}()
	for i, c := range cs {
		e := nextEvent(t, c, client.EventDisconnected)
		if e.Close.Code != wire.CloseGoingAway || e.Close.RetryAfter < 2*time.Second || e.Close.RetryAfter > 4*time.Second {
			t.Fatalf("client %d: %+v, want 1001 with a hint in [2s, 4s]", i, e.Close)
		}
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if th.Ready() == nil {
		t.Fatal("drained hub reports ready")
	}
	if err := <-th.errc; err != nil {
		t.Fatalf("Run: %v", err)
	}
	// A new session is refused.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if _, err := client.Dial(ctx, client.Config{Addrs: []string{th.wsAddr()}, Token: token(t, tokenOpts{})}); err == nil {
		t.Fatal("a drained hub took a session")
	}
	_ = errors.New
	_ = natsutil.Config{}
}

// TestPublishDedupeAcrossHubs: a publish retried on another hub of the
// fleet with the same client message id is recognised as a duplicate
// (JetStream's message-id dedupe): same offset, stored and delivered once.
func TestPublishDedupeAcrossHubs(t *testing.T) {
	nc := sharedNATS(t)
	mod := func(c *Config, o *Options) { o.NATS = nc.NC }
	a, b := startHub(t, mod), startHub(t, mod)
	ctx := context.Background()
	sub := dialClient(t, client.Config{Addrs: []string{b.wsAddr()}})
	if _, err := sub.Subscribe(ctx, "orders"); err != nil {
		t.Fatal(err)
	}
	onA := dialClient(t, client.Config{Addrs: []string{a.grpcAddr()}})
	onB := dialClient(t, client.Config{Addrs: []string{b.grpcAddr()}})
	first, err := onA.Publish(ctx, "orders", client.PriorityP1, []byte("once"), "retry-1")
	if err != nil || first.GetDuplicate() {
		t.Fatalf("first publish: %+v, %v", first, err)
	}
	again, err := onB.Publish(ctx, "orders", client.PriorityP1, []byte("once"), "retry-1")
	if err != nil || !again.GetDuplicate() || again.GetOffset() != first.GetOffset() || again.GetEpoch() != first.GetEpoch() {
		t.Fatalf("retry on the other hub: %+v, %v; want a duplicate of offset %d", again, err, first.GetOffset())
	}
	next, err := onB.Publish(ctx, "orders", client.PriorityP1, []byte("next"), "retry-2")
	if err != nil || next.GetDuplicate() || next.GetOffset() != first.GetOffset()+1 {
		t.Fatalf("next publish: %+v, %v; want offset %d", next, err, first.GetOffset()+1)
	}
	if got := collect(t, sub, 2); got[0] != "once" || got[1] != "next" {
		t.Fatalf("subscriber got %q, want [once next]", got)
	}
}
