package hub

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/corralhq/corral/client"
	"github.com/corralhq/corral/internal/natsutil"
)

// TestThreeHubsOnANATSCluster joins three hubs through a three-node
// in-process NATS cluster (clustered JetStream holds the history), checks
// that a message published on hub A reaches a subscriber on hub C, then
// kills hub B while P0 messages are being published: once B's sessions have
// resumed on A or C, every subscriber has every offset exactly once, in
// order.
func TestThreeHubsOnANATSCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a NATS cluster")
	}
	cl, err := natsutil.StartCluster("corral-test", 3, 30*time.Second, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Shutdown()
	hubs := make([]*testHub, 3)
	for i := range hubs {
		nc, err := natsutil.ConnectEmbedded(cl.Members[i].Server, fmt.Sprintf("hub-%d", i), false)
		if err != nil {
			t.Fatal(err)
		}
		defer nc.Close()
		hubs[i] = startHub(t, func(c *Config, o *Options) {
			c.NodeID = fmt.Sprintf("hub-%c", 'A'+i)
			c.Session.PublishRate, c.Session.PublishBurst = 10000, 10000
			o.NATS = nc.NC
		})
	}
	a, b, c := hubs[0], hubs[1], hubs[2]
	ctx := context.Background()

	// history.replicas is not set: on a cluster the history is replicated.
	for _, name := range []string{"CORRAL_HISTORY", "CORRAL_HISTORY_META"} {
		s, err := a.js.Stream(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		if r := s.CachedInfo().Config.Replicas; r != 3 {
			t.Errorf("stream %s has %d replicas on a three-node cluster, want 3", name, r)
		}
	}

	// A message published on A reaches a subscriber on C.
	onC := dialClient(t, client.Config{Addrs: []string{c.wsAddr()}})
	if _, err := onC.Subscribe(ctx, "hello"); err != nil {
		t.Fatal(err)
	}
	pub := dialClient(t, client.Config{Addrs: []string{a.grpcAddr()}, Token: token(t, tokenOpts{prio: 0}), Priority: client.PriorityP0})
	if _, err := pub.Publish(ctx, "hello", client.PriorityP1, []byte("from A"), ""); err != nil {
		t.Fatal(err)
	}
	if got := collect(t, onC, 1); got[0] != "from A" {
		t.Fatalf("C got %q", got)
	}

	// P0 subscribers: four on B (they will move), one on A, one on C.
	p0 := token(t, tokenOpts{prio: 0})
	var subs []*client.Client
	for i := range 4 {
		tr := []string{b.wsAddr(), a.wsAddr(), c.wsAddr()}
		if i%2 == 1 {
			tr = []string{b.grpcAddr(), c.grpcAddr(), a.grpcAddr()}
		}
		subs = append(subs, dialClient(t, client.Config{Addrs: tr, InOrder: true, Token: p0, Priority: client.PriorityP0, ReconnectMin: 20 * time.Millisecond}))
	}
	subs = append(subs,
		dialClient(t, client.Config{Addrs: []string{a.wsAddr()}, Token: p0, Priority: client.PriorityP0}),
		dialClient(t, client.Config{Addrs: []string{c.grpcAddr()}, Token: p0, Priority: client.PriorityP0}))
	for _, s := range subs {
		if _, err := s.Subscribe(ctx, "orders"); err != nil {
			t.Fatal(err)
		}
	}
	if b.Sessions() < 4 {
		t.Fatalf("hub B holds %d sessions, want 4", b.Sessions())
	}

	const total = 300
	var wg sync.WaitGroup
	got := make([][]uint64, len(subs))
	for i, s := range subs {
		wg.Go(func() {
			for len(got[i]) < total {
				e, err := awaitEvent(s, client.EventMessage, client.EventGap, client.EventResumed)
				if err != nil {
					t.Errorf("subscriber %d after %d messages: %v", i, len(got[i]), err)
					return
				}
				switch e.Kind {
				case client.EventGap:
					t.Errorf("subscriber %d: gap %+v", i, e.Gap)
					return
				case client.EventResumed:
					if !e.Subscribed.GetRecovered() {
						t.Errorf("subscriber %d: resume on %s not recovered: %+v", i, s.Addr(), e.Subscribed)
						return
					}
				case client.EventMessage:
					got[i] = append(got[i], e.Message.GetOffset())
				}
			}
		})
	}
	for n := 1; n <= total; n++ {
		if n == total/3 {
			b.abort()
		}
		if _, err := pub.Publish(ctx, "orders", client.PriorityP0, fmt.Appendf(nil, "o%d", n), fmt.Sprint(n)); err != nil {
			t.Fatalf("publish %d: %v", n, err)
		}
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	for i := range subs {
		if len(got[i]) != total {
			t.Fatalf("subscriber %d got %d messages", i, len(got[i]))
		}
		for j, off := range got[i] {
			if off != uint64(j+1) {
				t.Fatalf("subscriber %d: message %d has offset %d: lost or duplicated", i, j, off)
			}
		}
	}
	for i := range 4 {
		if addr := subs[i].Addr(); addr == "" || addr == b.wsAddr() || addr == b.grpcAddr() {
			t.Errorf("subscriber %d is on %q, want A or C", i, addr)
		}
	}
}
