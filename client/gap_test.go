package client_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/corralhq/corral/client"
	"github.com/corralhq/corral/hub"
)

// TestSubscribeFromGapOnce: the application's own SubscribeFrom from a
// position the hub can no longer serve (channel a: beyond its two kept
// messages; channel b: an epoch that is gone) raises one gap event for the
// channel, as a resume in Hello does, naming what was lost; the reconnects
// that follow resume from the new position and raise none.
func TestSubscribeFromGapOnce(t *testing.T) {
	h := startHub(t, "127.0.0.1:0", func(c *hub.Config) { c.History.MaxMessages = 2 })
	p := startProxy(t, h.Addr().String())
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	tok := newToken(t, []string{">"}, time.Now().Add(time.Hour))
	pub, err := client.Dial(ctx, client.Config{Addrs: []string{"ws://" + h.Addr().String()}, Token: tok})
	if err != nil {
		t.Fatal(err)
	}
	defer pub.Close()
	go func() {
		for range pub.Events() {
		}
	}()
	epochs := map[string]string{}
	for _, ch := range []string{"a", "b"} {
		for i := 1; i <= 5; i++ {
			r, err := pub.Publish(ctx, ch, client.PriorityP2, fmt.Append(nil, i), "")
			if err != nil {
				t.Fatal(err)
			}
			epochs[ch] = r.GetEpoch()
		}
	}

	c, err := client.Dial(ctx, client.Config{Addrs: []string{p.url()}, Token: tok, ReconnectMin: time.Millisecond, ReconnectMax: 5 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	gaps := map[string][]client.Event{}
	seen := func(e client.Event) {
		if e.Kind == client.EventGap {
			gaps[e.Channel] = append(gaps[e.Channel], e)
		}
	}
	for _, sub := range []struct{ ch, epoch string }{{"a", epochs["a"]}, {"b", "an-epoch-long-gone"}} {
		s, err := c.SubscribeFrom(ctx, sub.ch, sub.epoch, 1)
		if err != nil {
			t.Fatal(err)
		}
		if !s.GetResumed() || s.GetRecovered() {
			t.Fatalf("SubscribeFrom %s: %v, want resumed and not recovered", sub.ch, s)
		}
		next(t, c, client.EventGap, seen)
	}
	for range 2 {
		p.cut()
		next(t, c, client.EventConnected, seen)
		for range 2 {
			if r := next(t, c, client.EventResumed, seen); !r.Subscribed.GetRecovered() {
				t.Fatalf("%v: not recovered with nothing missed", r)
			}
		}
	}
	for _, ch := range []string{"a", "b"} {
		if _, err := pub.Publish(ctx, ch, client.PriorityP2, []byte("6"), ""); err != nil {
			t.Fatal(err)
		}
		if m := next(t, c, client.EventMessage, seen); m.Channel != ch || m.Message.GetOffset() != 6 {
			t.Fatalf("after the gap: %v, want %s #6", m, ch)
		}
	}
	want := map[string][2]uint64{"a": {2, 5}, "b": {1, 5}}
	for _, ch := range []string{"a", "b"} {
		g := gaps[ch]
		if len(g) != 1 {
			t.Fatalf("channel %s: %d gap events %v, want exactly one", ch, len(g), g)
		}
		if w := want[ch]; g[0].Gap.GetFromOffset() != w[0] || g[0].Gap.GetToOffset() != w[1] || g[0].Gap.GetReason() != "resume" {
			t.Fatalf("channel %s: %v, want offsets %d to %d lost (resume)", ch, g[0], w[0], w[1])
		}
	}
}
