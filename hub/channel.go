package hub

import (
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/corralhq/corral/hub/history"
)

// NATS subjects of a hub fleet. <key> is "<tenant>.<channel>".
const (
	// subjectFanout carries every accepted channel message, with its offset
	// and epoch in headers, to every hub that has subscribers.
	subjectFanout = "corral.fanout."
	// subjectPublish is the plain-NATS publish API: a backend publishes the
	// payload on corral.publish.<tenant>.<channel>; one hub (queue group)
	// stores and fans it out. Header Corral-Priority sets the priority.
	subjectPublish = "corral.publish."
	// subjectIngest is where ingest-channel publishes are stored.
	subjectIngest = "corral.ingest."
	headerTime    = "Corral-Time"
	numShards     = 8
	shardBuffer   = 8192
)

// chanShard holds a slice of the hub's channels and the goroutine that
// dispatches their NATS messages in order.
//
// Lock order: chanShard.mu, then hubChannel.mu, then session.mu.
type chanShard struct {
	h     *Hub
	mu    sync.Mutex
	chans map[string]*hubChannel
	in    chan *nats.Msg
}

// hubChannel is a channel with at least one subscriber on this hub.
type hubChannel struct {
	key   string // tenant.channel
	name  string // the channel as the tenant's clients name it
	shard *chanShard
	ready chan struct{} // closed once init has run
	err   error         // init's error, read after ready
	sub   *nats.Subscription

	mu   sync.Mutex
	subs map[*session]*subscription
	last history.Position // newest message handed to local subscribers
	// recent are the newest messages handed out, contiguous up to last
	// and of its epoch, at most recentCap: resumes of hot channels (a
	// reconnect storm) are answered from here without reading the store.
	recent []history.Message
	// moved is closed (and cleared) when last advances, for resumes
	// waiting for the tail (awaitTail); nil while none waits.
	moved chan struct{}
}

// recentCap bounds hubChannel.recent.
const recentCap = 256

// tailWait bounds how long a resume from ahead of the channel's tail
// waits for the fan-out to bring the tail there before the store is read.
// Such a position was handed out by another hub first (an edge relays a
// message from one hub and resumes the device on another, whose fan-out
// of it is a few milliseconds behind); a position the fan-out never
// brings (a hole NATS lost, with nothing published after it to fill it)
// costs its resume this long.
const tailWait = 2 * time.Second

// ahead reports whether from is a position of the channel's epoch that
// its tail has not reached yet. Called with ch.mu held.
func (ch *hubChannel) ahead(from history.Position) bool {
	return ch.last != (history.Position{}) && from.Epoch == ch.last.Epoch && from.Offset > ch.last.Offset
}

// awaitTail waits until the channel's tail reaches from, ctx ends or
// tailWait passes, then answers the resume as recover does. It returns
// false, and the store must answer, unless the tail reached from and
// covers the resume.
func (ch *hubChannel) awaitTail(ctx context.Context, from history.Position, cutoff time.Time) (history.Recovery, bool) {
	timer := time.NewTimer(tailWait)
	defer timer.Stop()
	ch.mu.Lock()
	defer ch.mu.Unlock()
	for ch.ahead(from) {
		if ch.moved == nil {
			ch.moved = make(chan struct{})
		}
		moved := ch.moved
		ch.mu.Unlock()
		select {
		case <-moved:
		case <-timer.C:
			ch.mu.Lock()
			return history.Recovery{}, false
		case <-ctx.Done():
			ch.mu.Lock()
			return history.Recovery{}, false
		}
		ch.mu.Lock()
	}
	return ch.recover(from, cutoff)
}

// recover answers a resume from the channel's recent messages, if they
// cover it with messages younger than cutoff (so that the answer is the
// store's). Called with ch.mu held.
func (ch *hubChannel) recover(from history.Position, cutoff time.Time) (history.Recovery, bool) {
	last := ch.last
	switch {
	case from == (history.Position{}):
		return history.Recovery{Current: last, Recovered: true}, true
	case last == (history.Position{}) || from.Epoch != last.Epoch || from.Offset > last.Offset:
		return history.Recovery{}, false
	case from.Offset == last.Offset:
		return history.Recovery{Current: last, Recovered: true}, true
	}
	if len(ch.recent) == 0 || ch.recent[0].Offset > from.Offset+1 {
		return history.Recovery{}, false
	}
	i := int(from.Offset + 1 - ch.recent[0].Offset)
	if !ch.recent[i].Time.After(cutoff) {
		return history.Recovery{}, false
	}
	return history.Recovery{Messages: slices.Clone(ch.recent[i:]), Current: last, Recovered: true}, true
}

func (h *Hub) shardFor(key string) *chanShard {
	return h.shards[maphash.String(h.seed, key)%numShards]
}

// attach adds sub of s to the channel key (tenant.channel), creating and initialising the
// channel on first use (subscribing to its fan-out subject before reading
// its position, so that nothing published after that read is missed).
func (h *Hub) attach(ctx context.Context, s *session, sub *subscription, key string) (*hubChannel, error) {
	sh := h.shardFor(key)
	sh.mu.Lock()
	ch := sh.chans[key]
	created := ch == nil
	if created {
		ch = &hubChannel{key: key, name: sub.name, shard: sh, ready: make(chan struct{}), subs: make(map[*session]*subscription)}
		sh.chans[key] = ch
		h.metrics.channels.Inc()
	}
	ch.mu.Lock()
	ch.subs[s] = sub
	ch.mu.Unlock()
	sh.mu.Unlock()
	if created {
		ch.err = h.initChannel(ctx, ch)
		close(ch.ready)
	} else {
		select {
		case <-ch.ready:
		case <-ctx.Done():
			h.detach(s, ch)
			return nil, ctx.Err()
		}
	}
	if ch.err != nil {
		h.detach(s, ch)
		return nil, ch.err
	}
	return ch, nil
}

func (h *Hub) initChannel(ctx context.Context, ch *hubChannel) error {
	sub, err := h.nc.ChanSubscribe(subjectFanout+ch.key, ch.shard.in)
	if err != nil {
		return fmt.Errorf("hub: subscribe %s: %w", ch.key, err)
	}
	ch.sub = sub
	fctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := h.nc.FlushWithContext(fctx); err != nil {
		return fmt.Errorf("hub: subscribe %s: %w", ch.key, err)
	}
	cur, err := h.store.Current(fctx, ch.key)
	if err != nil {
		h.metrics.historyErrors.Inc()
		return err
	}
	ch.mu.Lock()
	ch.last = cur
	ch.mu.Unlock()
	return nil
}

// detach removes s from the channel and drops the channel when it was the
// last local subscriber.
func (h *Hub) detach(s *session, ch *hubChannel) {
	sh := ch.shard
	var unsub *nats.Subscription
	sh.mu.Lock()
	ch.mu.Lock()
	delete(ch.subs, s)
	empty := len(ch.subs) == 0
	ch.mu.Unlock()
	if empty && sh.chans[ch.key] == ch && isClosed(ch.ready) {
		delete(sh.chans, ch.key)
		unsub = ch.sub
		h.metrics.channels.Dec()
	}
	sh.mu.Unlock()
	if unsub != nil {
		_ = unsub.Unsubscribe()
	}
}

func isClosed(c chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// runShard dispatches the fan-out messages of the shard's channels, one at
// a time, until ctx ends.
func (h *Hub) runShard(ctx context.Context, sh *chanShard) {
	for {
		select {
		case <-ctx.Done():
			return
		case m := <-sh.in:
			key := strings.TrimPrefix(m.Subject, subjectFanout)
			msg, err := decodeFanout(m)
			if err != nil {
				h.log.Warn("bad fan-out message", "subject", m.Subject, "err", err)
				continue
			}
			sh.mu.Lock()
			ch := sh.chans[key]
			sh.mu.Unlock()
			if ch == nil {
				continue
			}
			select {
			case <-ch.ready:
			case <-ctx.Done():
				return
			}
			if ch.err == nil {
				h.dispatch(ctx, ch, msg)
			}
		}
	}
}

// dispatch hands msg to the channel's local subscribers, after filling from
// history any hole between the last message handed out and msg (a fan-out
// message lost by NATS, or reordered between hubs). Duplicates are dropped.
func (h *Hub) dispatch(ctx context.Context, ch *hubChannel, msg history.Message) {
	ch.mu.Lock()
	last := ch.last
	ch.mu.Unlock()
	if msg.Epoch == last.Epoch && msg.Offset <= last.Offset {
		return
	}
	batch := make([]history.Message, 0, 1)
	if (msg.Epoch == last.Epoch && msg.Offset > last.Offset+1) || (msg.Epoch != last.Epoch && msg.Offset > 1) {
		from := last
		if msg.Epoch != last.Epoch {
			from = history.Position{Epoch: msg.Epoch}
		}
		rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		r, err := h.store.Since(rctx, ch.key, from)
		cancel()
		if err != nil {
			h.metrics.historyErrors.Inc()
		} else if r.Recovered {
			h.metrics.backfills.Inc()
			for _, m := range r.Messages {
				if m.Epoch == msg.Epoch && m.Offset < msg.Offset {
					batch = append(batch, m)
				}
			}
		}
	}
	batch = append(batch, msg)
	ch.mu.Lock()
	defer ch.mu.Unlock()
	for _, m := range batch {
		if m.Epoch == ch.last.Epoch && m.Offset <= ch.last.Offset {
			continue
		}
		d := newDelivery(ch.name, m)
		for s, sub := range ch.subs {
			s.deliver(sub, d)
		}
		if m.Epoch != ch.last.Epoch || m.Offset != ch.last.Offset+1 {
			clear(ch.recent)
			ch.recent = ch.recent[:0]
		}
		if len(ch.recent) == recentCap {
			ch.recent[0] = history.Message{}
			ch.recent = ch.recent[1:]
		}
		ch.recent = append(ch.recent, m)
		ch.last = history.Position{Epoch: m.Epoch, Offset: m.Offset}
	}
	if ch.moved != nil {
		close(ch.moved)
		ch.moved = nil
	}
}

// fanoutMsg builds the NATS message that announces m on the channel key.
func fanoutMsg(key string, m history.Message) *nats.Msg {
	nm := nats.NewMsg(subjectFanout + key)
	nm.Data = m.Data
	nm.Header.Set(history.HeaderOffset, strconv.FormatUint(m.Offset, 10))
	nm.Header.Set(history.HeaderEpoch, m.Epoch)
	nm.Header.Set(history.HeaderPriority, strconv.Itoa(int(m.Priority)))
	nm.Header.Set(headerTime, strconv.FormatInt(m.Time.UnixMilli(), 10))
	return nm
}

func decodeFanout(m *nats.Msg) (history.Message, error) {
	off, err := strconv.ParseUint(m.Header.Get(history.HeaderOffset), 10, 64)
	if err != nil || off == 0 {
		return history.Message{}, errors.New("hub: fan-out message without offset")
	}
	ep := m.Header.Get(history.HeaderEpoch)
	if ep == "" {
		return history.Message{}, errors.New("hub: fan-out message without epoch")
	}
	pr, err := strconv.Atoi(m.Header.Get(history.HeaderPriority))
	if err != nil || pr < 0 || pr > 2 {
		pr = 2
	}
	ms, _ := strconv.ParseInt(m.Header.Get(headerTime), 10, 64)
	return history.Message{Offset: off, Epoch: ep, Priority: uint8(pr), Data: m.Data, Time: time.UnixMilli(ms)}, nil
}
