package hub

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/corralhq/corral/client"
	"github.com/corralhq/corral/internal/testkit"
)

// TestP0AtLeastOnceAcrossHubs: a client acknowledges P0 messages by offset
// (ManualAck); when its hub dies, the resume on another hub brings every
// unacknowledged P0 message again, the client drops them as already
// delivered, and the application sees each offset exactly once. After an
// acknowledgement nothing is sent again.
func TestP0AtLeastOnceAcrossHubs(t *testing.T) {
	nc := sharedNATS(t)
	mod := func(c *Config, o *Options) { o.NATS = nc.NC }
	a, b := startHub(t, mod), startHub(t, mod)
	ctx := context.Background()
	p0 := token(t, tokenOpts{prio: 0})
	c := dialClient(t, client.Config{
		Addrs: []string{a.wsAddr(), b.wsAddr()}, InOrder: true, Token: p0, Priority: client.PriorityP0,
		ManualAck: true, ReconnectMin: 20 * time.Millisecond,
	})
	if _, err := c.Subscribe(ctx, "orders"); err != nil {
		t.Fatal(err)
	}
	publish := func(from, to int) {
		for n := from; n <= to; n++ {
			httpPublish(t, b, "acme", "orders", "p0", fmt.Sprintf("o%d", n))
		}
	}
	var seen []uint64
	receive := func(n int) {
		for range n {
			e := nextEvent(t, c, client.EventMessage, client.EventGap)
			if e.Kind == client.EventGap {
				t.Fatalf("gap after offsets %v: %+v", seen, e.Gap)
			}
			seen = append(seen, e.Message.GetOffset())
		}
	}

	publish(1, 10)
	receive(10)
	epoch, _ := c.Position("orders")
	if err := c.Ack("orders", epoch, 4); err != nil {
		t.Fatal(err)
	}
	a.abort() // the hub dies: 5..10 are delivered but not acknowledged
	e := nextEvent(t, c, client.EventResumed)
	if !e.Subscribed.GetRecovered() || c.Addr() != b.wsAddr() {
		t.Fatalf("resume on %s: %+v, want recovered on B", c.Addr(), e.Subscribed)
	}
	testkit.WaitFor(t, 15*time.Second, "B to send the six unacknowledged P0 messages again", func() bool {
		return c.Duplicates() == 6
	})
	publish(11, 15)
	receive(5)
	if err := c.Ack("orders", epoch, 15); err != nil {
		t.Fatal(err)
	}
	// The acknowledgement moved the resume position: a second cut brings
	// nothing again.
	testkit.WaitFor(t, 15*time.Second, "B to take the ack", func() bool {
		return b.metric("corral_hub_frames_received_total", "type", "ack") >= 1
	})
	b.closeAll(closeForTest)
	if e := nextEvent(t, c, client.EventResumed); !e.Subscribed.GetRecovered() {
		t.Fatalf("second resume: %+v", e.Subscribed)
	}
	publish(16, 16)
	receive(1)
	if d := c.Duplicates(); d != 6 {
		t.Errorf("after acknowledging 15, %d duplicates, want still 6", d)
	}
	for i, off := range seen {
		if off != uint64(i+1) {
			t.Fatalf("the application saw offsets %v, want 1..16 once each", seen)
		}
	}
}
