package client_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/corralhq/corral/client"
	"github.com/corralhq/corral/wire/corralv1"
)

// TestChanSubscribe: a channel subscribed with ChanSubscribe gets its
// events (messages, and the gap of a resume from a gone epoch) on its own
// Go channel and none on Events, which keeps the other channels'; after
// Unsubscribe nothing more comes on the Go channel.
func TestChanSubscribe(t *testing.T) {
	h := startHub(t, "127.0.0.1:0", nil)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	tok := newToken(t, []string{">"}, time.Now().Add(time.Hour))
	addrs := []string{"ws://" + h.Addr().String()}
	pub, err := client.Dial(ctx, client.Config{Addrs: addrs, Token: tok})
	if err != nil {
		t.Fatal(err)
	}
	defer pub.Close()
	go func() {
		for range pub.Events() {
		}
	}()
	publish := func(ch string, i int) {
		t.Helper()
		if _, err := pub.Publish(ctx, ch, client.PriorityP2, fmt.Append(nil, i), ""); err != nil {
			t.Fatal(err)
		}
	}
	publish("a", 1)

	c, err := client.Dial(ctx, client.Config{Addrs: addrs, Token: tok})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ach := make(chan client.Event, 16)
	sub, err := c.ChanSubscribe(ctx, "a", &corralv1.Position{Epoch: "gone", Offset: 3}, ach)
	if err != nil {
		t.Fatal(err)
	}
	if sub.Channel != "a" || sub.Subscribed.GetRecovered() {
		t.Fatalf("subscription %v, want channel a not recovered", sub.Subscribed)
	}
	if _, err := c.Subscribe(ctx, "b"); err != nil {
		t.Fatal(err)
	}
	recv := func(from <-chan client.Event, kind client.EventKind) client.Event {
		t.Helper()
		for {
			select {
			case e := <-from:
				if e.Kind == kind {
					return e
				}
				if e.Channel == "a" && from == c.Events() {
					t.Fatalf("an event of channel a on Events: %v", e)
				}
			case <-ctx.Done():
				t.Fatalf("no %v event", kind)
			}
		}
	}
	if g := recv(ach, client.EventGap); g.Channel != "a" {
		t.Fatalf("gap %v, want channel a", g)
	}
	for i := 2; i <= 3; i++ {
		publish("a", i)
		publish("b", i)
		if m := recv(ach, client.EventMessage); m.Channel != "a" || m.Message.GetOffset() != uint64(i) {
			t.Fatalf("on the subscription's channel: %v, want a #%d", m, i)
		}
		if m := recv(c.Events(), client.EventMessage); m.Channel != "b" {
			t.Fatalf("on Events: %v, want b", m)
		}
	}
	if epoch, off := sub.Position(); epoch == "" || off != 3 {
		t.Fatalf("position %s:%d, want offset 3", epoch, off)
	}
	if err := sub.Unsubscribe(ctx); err != nil {
		t.Fatal(err)
	}
	publish("a", 4)
	publish("b", 4)
	recv(c.Events(), client.EventMessage) // b #4: a #4, published first, came before it if at all
	select {
	case e := <-ach:
		t.Fatalf("after Unsubscribe: %v", e)
	default:
	}
}
