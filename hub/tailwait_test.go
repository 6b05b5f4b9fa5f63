package hub

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/corralhq/corral/hub/history"
	"github.com/corralhq/corral/internal/testkit"
	"github.com/corralhq/corral/wire/corralv1"
)

// TestResumeFromAheadWaitsForTheTail: a resume from a position the
// channel's tail has not reached (an edge got it first through another
// hub) waits for the fan-out to bring it and is answered from the tail;
// one whose position never comes gives up after tailWait (the store
// answers it then), and one of another epoch does not wait.
func TestResumeFromAheadWaitsForTheTail(t *testing.T) {
	now := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	msg := func(off uint64) history.Message {
		return history.Message{Epoch: "e1", Offset: off, Priority: 0, Data: []byte("x"), Time: now}
	}
	newChannel := func() *hubChannel {
		ch := &hubChannel{key: "acme.alerts", name: "alerts", ready: make(chan struct{}), subs: map[*session]*subscription{}}
		close(ch.ready)
		for off := uint64(1); off <= 5; off++ {
			ch.recent = append(ch.recent, msg(off))
		}
		ch.last = history.Position{Epoch: "e1", Offset: 5}
		return ch
	}
	h := &Hub{}
	cutoff := now.Add(-time.Minute)
	ctx := context.Background()

	synctest.Test(t, func(t *testing.T) {
		ch := newChannel()
		from := history.Position{Epoch: "e1", Offset: 7}
		type answer struct {
			r  history.Recovery
			ok bool
		}
		got := make(chan answer, 1)
		go func() {
			r, ok := ch.awaitTail(ctx, from, cutoff)
			got <- answer{r, ok}
		}()
		synctest.Wait()
		h.dispatch(ctx, ch, msg(6))
		synctest.Wait()
		select {
		case a := <-got:
			t.Fatalf("answered at offset 6 of 7: %+v", a)
		default:
		}
		h.dispatch(ctx, ch, msg(7))
		a := <-got
		if !a.ok || a.r.Current != from || len(a.r.Messages) != 0 {
			t.Fatalf("resume from 7 once the tail reached it: %+v %v, want recovered at 7 with nothing to send", a.r, a.ok)
		}
	})

	synctest.Test(t, func(t *testing.T) {
		ch := newChannel()
		start := time.Now()
		if r, ok := ch.awaitTail(ctx, history.Position{Epoch: "e1", Offset: 9}, cutoff); ok {
			t.Fatalf("a position the tail never reaches answered from it: %+v", r)
		}
		if waited := time.Since(start); waited != tailWait {
			t.Errorf("waited %v, want tailWait (%v)", waited, tailWait)
		}
		ch.mu.Lock()
		defer ch.mu.Unlock()
		if ch.ahead(history.Position{Epoch: "e0", Offset: 9}) {
			t.Error("a position of another epoch counted as ahead of the tail")
		}
		if ch.ahead(history.Position{Epoch: "e1", Offset: 5}) {
			t.Error("the tail's own position counted as ahead of it")
		}
	})
}

// TestRelayResumeFromAheadOfTheTail: a relayed resume from a position the
// hub stored but has not fanned out yet (the position another hub handed
// the edge first) waits for the fan-out and is answered from the
// channel's tail: no history store read.
func TestRelayResumeFromAheadOfTheTail(t *testing.T) {
	th := startHub(t, func(c *Config, _ *Options) { c.History.Window = 10 * time.Minute })
	e := dialRelayEdge(t, th)
	tok := token(t, tokenOpts{})
	e.welcome(1, tok, "news")
	m1 := e.publish(1, 2, "news", "m1")
	// m2 is stored, its fan-out held back.
	const key = "acme.news"
	m2, err := th.store.Append(context.Background(), key, history.Message{Data: []byte("m2"), Time: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	if m2.Epoch != m1.GetEpoch() || m2.Offset != m1.GetOffset()+1 {
		t.Fatalf("stored %v after %v", m2, m1)
	}
	reads := th.metric("corral_hub_subscribe_sources_total", "source", "store")
	e.welcome(2, tok)
	e.client(2, &corralv1.ClientFrame{Id: 2, Frame: &corralv1.ClientFrame_Subscribe{Subscribe: &corralv1.Subscribe{
		Channel: "news", From: &corralv1.Position{Epoch: m2.Epoch, Offset: m2.Offset}}}})
	sh := th.shardFor(key)
	testkit.WaitFor(t, 10*time.Second, "the resume waiting for the tail", func() bool {
		sh.mu.Lock()
		ch := sh.chans[key]
		sh.mu.Unlock()
		ch.mu.Lock()
		defer ch.mu.Unlock()
		return ch.moved != nil
	})
	if err := th.nc.PublishMsg(fanoutMsg(key, m2)); err != nil {
		t.Fatal(err)
	}
	sub := e.server(2).GetSubscribed()
	if !sub.GetResumed() || !sub.GetRecovered() || sub.GetPosition().GetOffset() != m2.Offset {
		t.Fatalf("resume from ahead of the tail: %v, want recovered at %d", sub, m2.Offset)
	}
	if n := th.metric("corral_hub_subscribe_sources_total", "source", "store") - reads; n != 0 {
		t.Errorf("%v history store reads for a resume the tail reached, want none", n)
	}
	if m := e.server(1).GetMessage(); string(m.GetData()) != "m2" {
		t.Errorf("the live session got %v, want m2", m)
	}
}
