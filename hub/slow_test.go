package hub

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"testing"

	"github.com/corralhq/corral/client"
	"github.com/corralhq/corral/hub/history"
	"github.com/corralhq/corral/wire"
)

// TestOutboundQueueDropsLowPriorityFirst exercises the queue directly:
// P2 goes first, then P1, never P0; every drop becomes a Gap.
func TestOutboundQueueDropsLowPriorityFirst(t *testing.T) {
	msg := func(off uint64, p uint8) *delivery {
		return newDelivery("c", history.Message{Offset: off, Epoch: "e", Priority: p, Data: make([]byte, 100-len("c")-len("e")-24)})
	}
	var dropped [3]int
	count := func(p int8) { dropped[p]++ }
	var q outQueue
	const limit = 500 // five 100-byte messages
	for i, p := range []uint8{2, 1, 2, 0, 2} {
		if !q.pushMessage(msg(uint64(i+1), p), limit, count) {
			t.Fatal("queue refused a message with room")
		}
	}
	// A P1 displaces the oldest P2 first.
	if !q.pushMessage(msg(6, 1), limit, count) || dropped[0] != 0 || dropped[1] != 0 || dropped[2] == 0 {
		t.Fatalf("dropped %v, want only P2", dropped)
	}
	// A P2 that finds no P2 to displace (beyond what frees room) is dropped itself
	// only once every older P2 is gone.
	for off := uint64(7); off <= 9; off++ {
		q.pushMessage(msg(off, 0), limit, count)
	}
	if dropped[0] != 0 {
		t.Fatalf("a P0 was dropped: %v", dropped)
	}
	// The queue now holds P0 and P1 messages and gaps; another P0 must
	// displace P1, and once only P0 are left, a P0 is refused.
	for off := uint64(10); ; off++ {
		if !q.pushMessage(msg(off, 0), limit, count) {
			break
		}
		if off > 100 {
			t.Fatal("a full queue of P0 kept accepting")
		}
	}
	var offsets []string
	for {
		it, ok := q.pop()
		if !ok {
			break
		}
		if it.d != nil {
			if it.prio != 0 {
				t.Errorf("a P%d message survived a queue full of P0", it.prio)
			}
			offsets = append(offsets, fmt.Sprint(it.d.msg.Offset))
			continue
		}
		g := it.frame.GetGap()
		offsets = append(offsets, fmt.Sprintf("gap%d-%d", g.FromOffset, g.ToOffset))
	}
	if dropped[1] == 0 || dropped[2] != 3 || dropped[0] != 0 {
		t.Fatalf("dropped %v: want every P2 and some P1", dropped)
	}
	t.Logf("queue: %s", strings.Join(offsets, " "))
}

// TestSlowConsumer stops a client from reading: P2 messages are dropped
// (the client sees gaps that, with what it received, cover every offset),
// then a P0 that cannot be queued closes the session with 4000, and the
// client resumes the P0 messages from history.
func TestSlowConsumer(t *testing.T) {
	th := startHub(t, func(c *Config, _ *Options) {
		c.Session.OutboundBytes = 64 << 10
		c.History.MaxMessages = 10000
	})
	ctx := context.Background()
	slow := dialClient(t, client.Config{Addrs: []string{th.wsAddr()}, EventBuffer: 1, Token: token(t, tokenOpts{prio: 0}), Priority: client.PriorityP0})
	if _, err := slow.Subscribe(ctx, "firehose"); err != nil {
		t.Fatal(err)
	}
	pub := dialClient(t, client.Config{Addrs: []string{th.grpcAddr()}, Token: token(t, tokenOpts{prio: 0}), Priority: client.PriorityP0})
	payload := strings.Repeat("x", 16<<10)
	n := uint64(0)
	publish := func(p client.Priority) {
		t.Helper()
		r, err := pub.Publish(ctx, "firehose", p, []byte(payload), "")
		if err != nil {
			t.Fatal(err)
		}
		n = r.GetOffset()
	}
	// The client reads nothing (its event buffer holds one event); the
	// socket buffers fill, then the hub's queue, then P2 drops start.
	for th.metric("corral_hub_messages_dropped_total", "priority", "p2") == 0 {
		publish(client.PriorityP2)
		if n > 5000 {
			t.Fatal("no P2 dropped after 5000 messages of 16 KiB")
		}
	}
	lastP2 := n
	for th.metric("corral_hub_session_closes_total", "code", "4000") == 0 {
		publish(client.PriorityP0)
		if n > lastP2+5000 {
			t.Fatal("the session survived 5000 P0 messages it could not take")
		}
	}
	lastP0 := n

	seen := make(map[uint64]string)
	sawClose := false
	for {
		e, err := awaitEvent(slow, client.EventMessage, client.EventGap, client.EventDisconnected, client.EventResumed)
		if err != nil {
			t.Logf("seen %d of %d (last P2 %d), closed %v, sessions %d: %v", len(seen), lastP0, lastP2, sawClose, th.Sessions(), seen)
			buf := make([]byte, 1<<20)
			t.Fatalf("%v\n%s", err, buf[:runtime.Stack(buf, true)])
		}
		switch e.Kind {
		case client.EventMessage:
			if prev, dup := seen[e.Message.GetOffset()]; dup {
				t.Fatalf("offset %d delivered after %s", e.Message.GetOffset(), prev)
			}
			seen[e.Message.GetOffset()] = "message"
		case client.EventGap:
			for o := e.Gap.GetFromOffset(); o <= e.Gap.GetToOffset(); o++ {
				if prev, dup := seen[o]; dup {
					t.Fatalf("gap covers offset %d already seen as %s", o, prev)
				}
				seen[o] = "gap"
			}
		case client.EventDisconnected:
			// The peer does not read: it may see 4000 or only the cut
			// connection. The hub counts the close as 4000.
			sawClose = true
		case client.EventResumed:
			if !e.Subscribed.GetRecovered() {
				t.Fatalf("resume after the slow-consumer close not recovered: %+v", e.Subscribed)
			}
		}
		if sawClose && uint64(len(seen)) == lastP0 {
			break
		}
	}
	for o := uint64(1); o <= lastP0; o++ {
		if seen[o] == "" {
			t.Fatalf("offset %d neither delivered nor reported in a gap", o)
		}
		if o > lastP2 && seen[o] != "message" {
			t.Fatalf("P0 offset %d was %s", o, seen[o])
		}
	}
	if got := th.metric("corral_hub_session_closes_total", "code", "4000"); got < 1 {
		t.Fatalf("slow-consumer closes = %v", got)
	}
	_ = wire.CloseSlowConsumer
}

// queueOrder pops the whole queue and renders it: message offsets with
// their priority ("3p2"), gaps as "gap<from>-<to>".
func queueOrder(q *outQueue) string {
	var out []string
	for {
		it, ok := q.pop()
		if !ok {
			return strings.Join(out, " ")
		}
		if it.d != nil {
			out = append(out, fmt.Sprintf("%dp%d", it.d.msg.Offset, it.prio))
			continue
		}
		g := it.frame.GetGap()
		out = append(out, fmt.Sprintf("gap%d-%d", g.FromOffset, g.ToOffset))
	}
}

// TestOutboundQueueMergesGaps checks the exact queue after drops: the
// messages dropped one after the other become one Gap, whether they were
// displaced from the queue (makeRoom) or refused on arrival (appendGap),
// and a Gap never merges across a message still queued or another channel.
func TestOutboundQueueMergesGaps(t *testing.T) {
	msg := func(ch string, off uint64, p uint8) *delivery {
		return newDelivery(ch, history.Message{Offset: off, Epoch: "e", Priority: p, Data: make([]byte, 100-len(ch)-len("e")-24)})
	}
	nop := func(int8) {}
	const limit = 500 // five 100-byte messages
	tests := []struct {
		name string
		push []*delivery
		want string
	}{
		{
			name: "displaced P2 in a row become one gap",
			push: []*delivery{msg("c", 1, 2), msg("c", 2, 2), msg("c", 3, 2), msg("c", 4, 2), msg("c", 5, 2), msg("c", 6, 0), msg("c", 7, 0)},
			want: "gap1-3 4p2 5p2 6p0 7p0",
		},
		{
			name: "P2 refused on arrival extend the gap at the tail",
			push: []*delivery{msg("c", 1, 0), msg("c", 2, 0), msg("c", 3, 0), msg("c", 4, 0), msg("c", 5, 0), msg("c", 6, 2), msg("c", 7, 2), msg("c", 8, 2)},
			want: "1p0 2p0 3p0 4p0 5p0 gap6-8",
		},
		{
			name: "no merge across another channel",
			push: []*delivery{msg("c", 1, 0), msg("c", 2, 0), msg("c", 3, 0), msg("c", 4, 0), msg("c", 5, 0), msg("c", 6, 2), msg("d", 7, 2), msg("c", 8, 2)},
			want: "1p0 2p0 3p0 4p0 5p0 gap6-6 gap7-7 gap8-8",
		},
		{
			name: "no merge across a hole in the offsets",
			push: []*delivery{msg("c", 1, 0), msg("c", 2, 0), msg("c", 3, 0), msg("c", 4, 0), msg("c", 5, 0), msg("c", 6, 2), msg("c", 8, 2)},
			want: "1p0 2p0 3p0 4p0 5p0 gap6-6 gap8-8",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var q outQueue
			for _, d := range tc.push {
				if !q.pushMessage(d, limit, nop) {
					t.Fatalf("offset %d refused", d.msg.Offset)
				}
			}
			if got := queueOrder(&q); got != tc.want {
				t.Fatalf("queue %q, want %q", got, tc.want)
			}
		})
	}
}
