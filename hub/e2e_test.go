package hub

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/corralhq/corral/client"
	"github.com/corralhq/corral/internal/testkit"
	"github.com/corralhq/corral/wire/corralv1"
)

var transports = []struct {
	name string
	addr func(*testHub) string
	json bool
}{
	{"ws-proto", (*testHub).wsAddr, false},
	{"ws-json", (*testHub).wsAddr, true},
	{"grpc", (*testHub).grpcAddr, false},
}

func TestEndToEnd(t *testing.T) {
	th := startHub(t, nil)
	for _, tr := range transports {
		t.Run(tr.name, func(t *testing.T) {
			ctx := context.Background()
			ch := "room." + tr.name
			sub := dialClient(t, client.Config{Addrs: []string{tr.addr(th)}, JSON: tr.json})
			if _, err := sub.Subscribe(ctx, ch); err != nil {
				t.Fatal(err)
			}
			pub := dialClient(t, client.Config{Addrs: []string{tr.addr(th)}, JSON: tr.json})
			res, err := pub.Publish(ctx, ch, client.PriorityP1, []byte("m0"), "")
			if err != nil {
				t.Fatal(err)
			}
			if res.GetOffset() != 1 || res.GetEpoch() == "" {
				t.Fatalf("published %+v", res)
			}
			if got := collect(t, sub, 1); got[0] != "m0" {
				t.Fatalf("got %q", got)
			}
			epoch, off := sub.Position(ch)
			if err := sub.Close(); err != nil {
				t.Fatal(err)
			}

			// Disconnected: 100 messages go by.
			for i := 1; i <= 100; i++ {
				if _, err := pub.Publish(ctx, ch, client.PriorityP1, fmt.Appendf(nil, "m%d", i), ""); err != nil {
					t.Fatal(err)
				}
			}
			back := dialClient(t, client.Config{Addrs: []string{tr.addr(th)}, JSON: tr.json})
			s, err := back.SubscribeFrom(ctx, ch, epoch, off)
			if err != nil {
				t.Fatal(err)
			}
			if !s.GetResumed() || !s.GetRecovered() || s.GetPosition().GetOffset() != 101 {
				t.Fatalf("resume answer %+v", s)
			}
			got := collect(t, back, 100)
			for i, w := range want("m", 1, 100) {
				if got[i] != w {
					t.Fatalf("message %d = %q, want %q", i, got[i], w)
				}
			}
			// Exactly those: the next message is the next publish.
			if _, err := pub.Publish(ctx, ch, client.PriorityP1, []byte("after"), ""); err != nil {
				t.Fatal(err)
			}
			if got := collect(t, back, 1); got[0] != "after" {
				t.Fatalf("after the resume got %q, want only the new message", got)
			}
		})
	}
}

func TestReconnectResumesBySelf(t *testing.T) {
	th := startHub(t, nil)
	ctx := context.Background()
	sub := dialClient(t, client.Config{Addrs: []string{th.wsAddr()}})
	if _, err := sub.Subscribe(ctx, "news"); err != nil {
		t.Fatal(err)
	}
	nextEvent(t, sub, client.EventConnected)
	for i := range 10 {
		httpPublish(t, th, "acme", "news", "p1", fmt.Sprintf("a%d", i))
	}
	collect(t, sub, 10)
	// Every session is cut; the client reconnects and resumes.
	th.closeAll(closeForTest)
	nextEvent(t, sub, client.EventDisconnected)
	for i := range 20 {
		httpPublish(t, th, "acme", "news", "p1", fmt.Sprintf("b%d", i))
	}
	got := collect(t, sub, 20)
	for i, w := range want("b", 0, 20) {
		if got[i] != w {
			t.Fatalf("message %d = %q, want %q", i, got[i], w)
		}
	}
}

func TestResumeBeyondWindowIsGap(t *testing.T) {
	clk := testkit.NewClock(time.Now())
	th := startHub(t, func(c *Config, o *Options) {
		c.History.Store = "memory"
		c.History.Window = 30 * time.Second
		o.Now = clk.Now
	})
	ctx := context.Background()
	pub := dialClient(t, client.Config{Addrs: []string{th.grpcAddr()}})
	first, err := pub.Publish(ctx, "c", client.PriorityP1, []byte("x"), "")
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if _, err := pub.Publish(ctx, "c", client.PriorityP1, []byte("y"), ""); err != nil {
			t.Fatal(err)
		}
	}
	clk.Advance(20 * time.Second)
	if _, err := pub.Publish(ctx, "c", client.PriorityP1, []byte("z"), ""); err != nil {
		t.Fatal(err)
	}
	clk.Advance(15 * time.Second) // the first four are out of the window, the fifth is not

	c := dialClient(t, client.Config{Addrs: []string{th.grpcAddr()}})
	s, err := c.SubscribeFrom(ctx, "c", first.GetEpoch(), first.GetOffset())
	if err != nil {
		t.Fatal(err)
	}
	if !s.GetResumed() || s.GetRecovered() {
		t.Fatalf("resume beyond the window: %+v, want resumed without recovery (a gap)", s)
	}
	if s.GetPosition().GetOffset() != 5 {
		t.Fatalf("position %+v, want offset 5", s.GetPosition())
	}
	if e := nextEvent(t, c, client.EventGap); e.Gap.GetFromOffset() != 2 || e.Gap.GetToOffset() != 5 { // the client's one gap event for it
		t.Fatalf("gap event %v, want offsets 2 to 5", e)
	}
	s, err = c.SubscribeFrom(ctx, "c", first.GetEpoch(), 4)
	if err != nil || !s.GetRecovered() {
		t.Fatalf("resume inside the window: %+v, %v", s, err)
	}
	if got := collect(t, c, 1); got[0] != "z" {
		t.Fatalf("got %q", got)
	}
	if th.metric("corral_hub_resumes_total", "result", "gap") != 1 {
		t.Errorf("gap resumes = %v, want 1", th.metric("corral_hub_resumes_total", "result", "gap"))
	}
}

// TestIdleChannelKeepsEpoch: a channel silent for longer than the replay
// window keeps its epoch, so a client that saw its last message resumes
// recovered with nothing to replay, and the next message continues the
// offsets (memory store with an injected clock, and JetStream with a 1 s
// window, seen from a second hub that never served the channel).
func TestIdleChannelKeepsEpoch(t *testing.T) {
	ctx := context.Background()
	check := func(t *testing.T, pubHub, subHub *testHub, idle func()) {
		pub := dialClient(t, client.Config{Addrs: []string{pubHub.grpcAddr()}})
		var last *corralv1.Published
		for range 3 {
			r, err := pub.Publish(ctx, "quiet", client.PriorityP1, []byte("x"), "")
			if err != nil {
				t.Fatal(err)
			}
			last = r
		}
		idle()
		c := dialClient(t, client.Config{Addrs: []string{subHub.wsAddr()}})
		s, err := c.SubscribeFrom(ctx, "quiet", last.GetEpoch(), last.GetOffset())
		if err != nil {
			t.Fatal(err)
		}
		if !s.GetResumed() || !s.GetRecovered() || s.GetPosition().GetEpoch() != last.GetEpoch() || s.GetPosition().GetOffset() != 3 {
			t.Fatalf("resume of the idle channel: %+v, want recovered at %s/3", s, last.GetEpoch())
		}
		r, err := pub.Publish(ctx, "quiet", client.PriorityP1, []byte("next"), "")
		if err != nil {
			t.Fatal(err)
		}
		if r.GetEpoch() != last.GetEpoch() || r.GetOffset() != 4 {
			t.Fatalf("publish after the idle time: %s/%d, want %s/4", r.GetEpoch(), r.GetOffset(), last.GetEpoch())
		}
		ev := nextEvent(t, c, client.EventMessage)
		if ev.Message.GetOffset() != 4 || string(ev.Message.GetData()) != "next" {
			t.Fatalf("after the resume got %+v, want offset 4 %q", ev.Message, "next")
		}
	}
	t.Run("memory store, injected clock", func(t *testing.T) {
		clk := testkit.NewClock(time.Now())
		th := startHub(t, func(c *Config, o *Options) {
			c.History.Store = "memory"
			c.History.Window = 30 * time.Second
			o.Now = clk.Now
		})
		check(t, th, th, func() { clk.Advance(time.Minute) })
	})
	t.Run("jetstream, second hub", func(t *testing.T) {
		nc := sharedNATS(t)
		mod := func(c *Config, o *Options) {
			c.History.Window = time.Second
			c.History.MetaTTL = time.Hour
			o.NATS = nc.NC
		}
		a, b := startHub(t, mod), startHub(t, mod)
		check(t, a, b, func() {
			stream, err := nc.JS.Stream(ctx, "CORRAL_HISTORY")
			if err != nil {
				t.Fatal(err)
			}
			testkit.WaitFor(t, 30*time.Second, "the messages to age out", func() bool {
				_, err := stream.GetLastMsgForSubject(ctx, "corral.history.acme.quiet")
				return errors.Is(err, jetstream.ErrMsgNotFound)
			})
		})
	})
}
