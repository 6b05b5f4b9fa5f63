package hub

import (
	"context"
	"errors"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/corralhq/corral/hub/auth"
	"github.com/corralhq/corral/hub/history"
	"github.com/corralhq/corral/internal/sessionrate"
	"github.com/corralhq/corral/internal/wsserve"
	"github.com/corralhq/corral/wire"
	"github.com/corralhq/corral/wire/corralv1"
)

// transport is what a session needs from its connection. Only the
// session's writer goroutine calls write* and closeWith, one at a time.
type transport interface {
	kind() string
	writeFrame(f *corralv1.ServerFrame) error
	writeDelivery(d *delivery) error
	// closeWith ends the connection with c (a WebSocket close frame, or
	// the gRPC status of the stream), completing the closing handshake:
	// a WebSocket transport waits up to linger, once the peer has the
	// close frame, for the peer's own (see ConnectionConfig.CloseTimeout).
	closeWith(c wire.Close, linger time.Duration)
}

// errStalled is the write error of a transport whose peer has read
// nothing for the write timeout.
var errStalled = wsserve.ErrStalled

// subscription is one channel of a session. The session's mutex guards it.
// It is on every idle subscription: 64 bytes.
type subscription struct {
	name string // channel as the client names it (the channel's own string when equal)
	ch   *hubChannel
	pos  history.Position // newest message queued
	held *heldDeliveries  // while recovering: live deliveries that arrived meanwhile
	live bool             // recovery done: deliveries go to the queue
}

const _ = -uint(unsafe.Sizeof(subscription{}) / 65) // fails to compile above 64 bytes

// heldDeliveries are the live deliveries of a subscription that arrive while
// it recovers; allocated only then.
type heldDeliveries struct {
	list []*delivery
	lost bool // list overflowed: catchUp reads the store again
}

// subList is a session's subscriptions: a short slice searched linearly
// (smaller than a map for the one or few channels most sessions hold).
type subList []*subscription

func (l subList) get(name string) *subscription {
	for _, s := range l {
		if s.name == name {
			return s
		}
	}
	return nil
}

// put adds sub, replacing a subscription of the same channel.
func (l *subList) put(sub *subscription) {
	for i, s := range *l {
		if s.name == sub.name {
			(*l)[i] = sub
			return
		}
	}
	*l = append(*l, sub)
}

// del removes and returns the subscription of name, if any.
func (l *subList) del(name string) *subscription {
	for i, s := range *l {
		if s.name == name {
			last := len(*l) - 1
			(*l)[i] = (*l)[last]
			(*l)[last] = nil
			*l = (*l)[:last]
			if len(*l) == 0 {
				*l = nil
			}
			return s
		}
	}
	return nil
}

// maxHeld bounds the deliveries held while a subscription recovers.
const maxHeld = 4096

// session is one client connection after the transport handshake.
//
// Lock order: chanShard.mu, then hubChannel.mu, then session.mu. The read
// goroutine owns the fields above mu; the fields below it are guarded by it.
type session struct {
	h     *Hub
	seq   uint64 // the session id is the hub's node epoch and seq
	tr    transport
	start int64 // unix ns of the connection

	lastRecv  atomic.Int64 // unix nanoseconds of the last frame received
	lastPing  atomic.Int64 // unix nanoseconds of the last Ping sent
	helloDone atomic.Bool
	rank      int8                // granted priority rank, 0 = P0
	grant     *grant              // shared by sessions whose tokens grant the same
	lim       sessionrate.Buckets // read goroutine only

	mu       sync.Mutex
	space    *sync.Cond // made by the first waiter; signalled when the writer frees queue space or the session closes
	subs     subList
	q        outQueue
	closeMsg *wire.Close // why the session closes, once closing
	writing  bool
	closing  bool
	torn     bool
	counted  bool // counted in the sessions gauge
}

// The session struct is on every idle connection: keep it at 176 bytes (a
// size class of the Go allocator) or less. Fields are ordered to leave no
// padding.
const _ = -uint(unsafe.Sizeof(session{}) / 177) // fails to compile above 176 bytes

// isClosing reports whether the session is closing.
func (s *session) isClosing() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closing
}

// closeReason returns why the session closes (the zero Close before it
// does); s.mu is held.
func (s *session) closeReason() wire.Close {
	if s.closeMsg == nil {
		return wire.Close{}
	}
	return *s.closeMsg
}

func (h *Hub) newSession(tr transport) *session {
	sc := h.sess
	now := h.now()
	s := &session{
		h: h, seq: h.nextSessionSeq(), tr: tr, start: now.UnixNano(),
		lim: sessionrate.Full(sc.rates(), now),
	}
	s.lastRecv.Store(now.UnixNano())
	h.metrics.sessionsOpenedOf.with(tr.kind()).Inc()
	h.opened.Add(1)
	if !h.register(s) {
		s.close(h.goAwayClose("hub is draining"), true)
	}
	return s
}

// wakeWaiters signals pushWaiting; s.mu is held.
func (s *session) wakeWaiters() {
	if s.space != nil {
		s.space.Broadcast()
	}
}

// logger returns the session's logger (built on demand: an idle session
// keeps none).
func (s *session) logger() *slog.Logger {
	return s.h.log.With("session", s.id(), "transport", s.tr.kind())
}

// id returns the session id given in Welcome.
func (s *session) id() string { return s.h.nodeEpoch + "-" + strconv.FormatUint(s.seq, 36) }

// grant is what a verified token allows a session; the token's other
// claims are not kept, and sessions with the same grant share one.
type grant struct {
	tenant            string
	channels, publish []string
	maxRank           int
}

func (g grant) canSubscribe(ch string) bool { return matchAny(g.channels, ch) }
func (g grant) canPublish(ch string) bool   { return matchAny(g.publish, ch) }

func matchAny(patterns []string, ch string) bool {
	for _, p := range patterns {
		if auth.Match(p, ch) {
			return true
		}
	}
	return false
}

// rates are the session's frame and publish rate limits.
func (c SessionConfig) rates() sessionrate.Rates {
	return sessionrate.Rates{FrameRate: c.FrameRate, FrameBurst: c.FrameBurst, PublishRate: c.PublishRate, PublishBurst: c.PublishBurst}
}

// tick runs the session's timers at now: the handshake timeout before
// Hello, then the pings (not for a relayed session: the edge owns the
// device's liveness). The hub calls it for every session a few times a
// second (one ticker for all sessions instead of timers per session).
func (s *session) tick(now time.Time) {
	sc := s.h.sess
	if !s.helloDone.Load() {
		if now.Sub(time.Unix(0, s.start)) > sc.HandshakeTimeout {
			s.close(wire.Close{Code: wire.CloseHandshakeTimeout, Text: "no hello within " + sc.HandshakeTimeout.String()}, true)
		}
		return
	}
	if _, ok := s.tr.(livenessByTheEdge); ok {
		return // a relayed session: the edge pings the device
	}
	if now.Sub(time.Unix(0, s.lastRecv.Load())) > 2*sc.PingInterval {
		s.close(wire.Close{Code: wire.CloseGoingAway, Text: "no frame for two ping intervals"}, true)
		return
	}
	if now.Sub(time.Unix(0, s.lastPing.Load())) >= sc.PingInterval {
		s.lastPing.Store(now.UnixNano())
		s.reply(&corralv1.ServerFrame{Frame: &corralv1.ServerFrame_Ping{Ping: &corralv1.Ping{}}})
	}
}

// handle processes one decoded client frame. It runs on the transport's
// read goroutine, so frames of a session are handled in order.
func (s *session) handle(ctx context.Context, f *corralv1.ClientFrame) {
	if s.isClosing() {
		return // frames that cross the close (during the closing handshake) are dropped
	}
	now := s.h.now()
	s.lastRecv.Store(now.UnixNano())
	if !s.lim.TakeFrame(now, s.h.sess.rates()) {
		s.close(wire.Close{Code: wire.CloseRateLimited, RetryAfter: time.Second, Text: "too many frames"}, true)
		return
	}
	if err := s.h.codecCheck.CheckClientFrame(f); err != nil {
		s.close(wire.CloseOf(err), true)
		return
	}
	typ := wire.FrameType(f)
	s.h.metrics.framesInOf.with(typ).Inc()
	if !s.helloDone.Load() {
		if h := f.GetHello(); h != nil {
			s.hello(ctx, f.GetId(), h)
			return
		}
		s.close(wire.Close{Code: wire.CloseBadRequest, Text: typ + " before hello"}, true)
		return
	}
	switch fr := f.GetFrame().(type) {
	case *corralv1.ClientFrame_Hello:
		s.close(wire.Close{Code: wire.CloseBadRequest, Text: "second hello"}, true)
	case *corralv1.ClientFrame_Subscribe:
		s.subscribe(ctx, f.GetId(), fr.Subscribe, false)
	case *corralv1.ClientFrame_Unsubscribe:
		s.unsubscribe(f.GetId(), fr.Unsubscribe.GetChannel())
	case *corralv1.ClientFrame_Publish:
		s.publish(ctx, f.GetId(), fr.Publish)
	case *corralv1.ClientFrame_Ack:
		// Counted (frames_received_total{type="ack"}) and nothing else:
		// the client's resume position carries P0 redelivery (README,
		// "P0 delivery"), so a session keeps no per-channel ack state.
	case *corralv1.ClientFrame_Ping:
		s.reply(&corralv1.ServerFrame{Id: f.GetId(), Frame: &corralv1.ServerFrame_Pong{Pong: &corralv1.Pong{Payload: fr.Ping.GetPayload()}}})
	case *corralv1.ClientFrame_Pong:
	}
}

func (s *session) hello(ctx context.Context, id uint64, hello *corralv1.Hello) {
	h := s.h
	claims, err := h.verifier.Verify(hello.GetToken(), h.now())
	if err != nil {
		var ae *auth.Error
		reason := "invalid"
		if errors.As(err, &ae) {
			reason = string(ae.Reason)
		}
		h.metrics.authRejected.WithLabelValues(reason).Inc()
		s.logger().Debug("token rejected", "reason", reason, "err", err)
		s.close(wire.Close{Code: wire.ClosePolicyViolation, Text: "token rejected"}, true)
		return
	}
	rank := wire.Rank(hello.GetPriority())
	if rank < claims.Rank() {
		h.metrics.authRejected.WithLabelValues("priority").Inc()
		s.close(wire.Close{Code: wire.ClosePolicyViolation, Text: "priority above the token's"}, true)
		return
	}
	if d := h.admit(rank); !d.admit {
		h.metrics.shedInc("reject", rank)
		s.close(refusal(wire.CloseTryAgainLater, d.retry, "overloaded"), true)
		return
	}
	s.grant = h.grants.intern(grant{tenant: claims.Tenant, channels: claims.Channels, publish: claims.Publish, maxRank: claims.Rank()})
	s.rank = int8(rank)
	s.lastPing.Store(h.now().UnixNano())
	s.helloDone.Store(true)
	s.mu.Lock()
	if !s.closing {
		s.counted = true
		h.metrics.sessionsOf.with(s.tr.kind()).Inc()
		h.severable[s.rank].Add(1)
	}
	s.mu.Unlock()
	sc := h.sess
	s.reply(&corralv1.ServerFrame{Id: id, Frame: &corralv1.ServerFrame_Welcome{Welcome: &corralv1.Welcome{
		SessionId: s.id(), NodeId: h.nodeID, NodeEpoch: h.nodeEpoch,
		ServerTimeUnixMs: h.now().UnixMilli(),
		Priority:         wire.PriorityOfRank(rank),
		Hints: &corralv1.ServerHints{
			PingIntervalMs:       uint32(sc.PingInterval.Milliseconds()),
			MaxFrameBytes:        uint32(h.codecCheck.Config().MaxFrameBytes),
			MaxSubscriptions:     uint32(sc.MaxSubscriptions),
			HistoryWindowMs:      uint32(h.histCfg.Window.Milliseconds()),
			PublishRatePerSecond: uint32(sc.PublishRate),
		},
	}}})
	h.observeHandshake(h.now().Sub(time.Unix(0, s.start)))
	for _, sub := range hello.GetSubscribe() {
		s.subscribe(ctx, id, sub, true)
	}
}

func (s *session) errorReply(id uint64, c wire.Close) {
	s.reply(c.ErrorFrame(id))
}

// refuse answers a Subscribe, or an entry of Hello.subscribe (id is then
// the Hello's), that failed: an Error naming the request's id and the
// channel, never the id-0 Error that explains a close.
func (s *session) refuse(id uint64, channel string, c wire.Close) {
	f := c.ErrorFrame(id)
	f.GetError().Channel = channel
	s.reply(f)
}

// subscribe serves a Subscribe frame (id is its frame id) or, inHello, an
// entry of Hello.subscribe (id is the Hello's frame id). Refusals name the
// channel and leave the session open.
func (s *session) subscribe(ctx context.Context, id uint64, req *corralv1.Subscribe, inHello bool) {
	h := s.h
	name := req.GetChannel()
	if !s.grant.canSubscribe(name) {
		s.refuse(id, name, wire.Close{Code: wire.CloseForbidden, Text: "channel " + name + " not allowed by the token"})
		return
	}
	if h.isIngest(name) {
		s.refuse(id, name, wire.Close{Code: wire.CloseBadRequest, Text: "channel " + name + " is an ingest channel"})
		return
	}
	s.mu.Lock()
	if old := s.subs.get(name); old != nil {
		s.subs.del(name)
		s.mu.Unlock()
		if old.ch != nil {
			h.detach(s, old.ch)
		}
		s.mu.Lock()
	}
	if len(s.subs) >= h.sess.MaxSubscriptions {
		s.mu.Unlock()
		s.refuse(id, name, wire.Close{Code: wire.CloseSubscriptionLimit, Text: "at most " + strconv.Itoa(h.sess.MaxSubscriptions) + " subscriptions"})
		return
	}
	if s.closing {
		s.mu.Unlock()
		return
	}
	sub := &subscription{name: name}
	s.subs.put(sub)
	s.mu.Unlock()

	ch, err := h.attach(ctx, s, sub, s.grant.tenant+"."+name)
	if err != nil {
		s.dropSub(name, sub)
		s.logger().Warn("subscribe failed", "channel", name, "err", err)
		s.refuse(id, name, wire.Close{Code: wire.CloseInternal, RetryAfter: time.Second, Text: "subscribe failed"})
		return
	}
	var from history.Position
	resumed := req.GetFrom() != nil
	if resumed {
		from = history.Position{Epoch: req.GetFrom().GetEpoch(), Offset: req.GetFrom().GetOffset()}
	}
	cutoff := h.now().Add(-h.histCfg.Window)
	ch.mu.Lock()
	r, ok := ch.recover(from, cutoff)
	ahead := !ok && ch.ahead(from)
	ch.mu.Unlock()
	if ahead {
		// Another hub handed this position out first; this hub's fan-out
		// of it is on its way: wait for it rather than read the store.
		r, ok = ch.awaitTail(ctx, from, cutoff)
	}
	if ok {
		h.metrics.resumeSourceOf.with("recent").Inc()
	} else {
		h.metrics.resumeSourceOf.with("store").Inc()
		var err error
		if r, err = h.store.Since(ctx, ch.key, from); err != nil {
			h.metrics.historyErrors.Inc()
			s.logger().Warn("resume failed", "channel", name, "err", err)
			h.detach(s, ch)
			s.dropSub(name, sub)
			c := wire.Close{Code: wire.CloseInternal, RetryAfter: time.Second, Text: "history unavailable"}
			if inHello {
				s.close(c, true) // a resume in Hello: the client reconnects and tries again
			} else {
				s.refuse(id, name, c)
			}
			return
		}
	}
	if resumed {
		res := "recovered"
		if !r.Recovered {
			res = "gap"
		}
		h.metrics.resumes.WithLabelValues(res).Inc()
	}
	s.mu.Lock()
	if s.subs.get(name) != sub || s.closing {
		s.mu.Unlock()
		return
	}
	sub.ch = ch
	if ch.name == name {
		sub.name = ch.name // one string for every subscriber of the channel
	}
	s.pushControl(&corralv1.ServerFrame{Id: id, Frame: &corralv1.ServerFrame_Subscribed{Subscribed: &corralv1.Subscribed{
		Channel: name, Position: &corralv1.Position{Epoch: r.Current.Epoch, Offset: r.Current.Offset},
		Resumed: resumed, Recovered: resumed && r.Recovered,
	}}})
	sub.pos = r.Current
	if resumed && r.Recovered {
		sub.pos = from
	}
	s.mu.Unlock()
	s.catchUp(ctx, sub, r.Messages)
}

// catchUp queues the recovered messages, then the live ones held meanwhile,
// with back-pressure (waiting for queue space instead of dropping: a
// resume of many P0 messages must not overflow the queue and close the
// session), and then lets deliveries go straight to the queue.
func (s *session) catchUp(ctx context.Context, sub *subscription, batch []history.Message) {
	for _, m := range batch {
		if !s.pushWaiting(sub, newDelivery(sub.name, m)) {
			return
		}
	}
	for {
		s.mu.Lock()
		if s.closing || s.subs.get(sub.name) != sub {
			s.mu.Unlock()
			return
		}
		if sub.held == nil {
			sub.live = true
			s.mu.Unlock()
			return
		}
		held, lost, pos := sub.held.list, sub.held.lost, sub.pos
		sub.held = nil
		s.mu.Unlock()
		if lost {
			// Too much arrived meanwhile: read it from the store instead.
			r, err := s.h.store.Since(ctx, sub.ch.key, pos)
			if err != nil || !r.Recovered {
				s.h.metrics.historyErrors.Inc()
				s.close(wire.Close{Code: wire.CloseInternal, RetryAfter: time.Second, Text: "could not catch up"}, true)
				return
			}
			held = held[:0]
			for _, m := range r.Messages {
				held = append(held, newDelivery(sub.name, m))
			}
		}
		for _, d := range held {
			if !s.pushWaiting(sub, d) {
				return
			}
		}
	}
}

// pushWaiting queues d once the queue has room for it; false when the
// session closed meanwhile.
func (s *session) pushWaiting(sub *subscription, d *delivery) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for !s.closing && s.q.len() > 0 && !s.q.fits(d.size, s.h.sess.OutboundBytes) {
		if s.space == nil {
			s.space = sync.NewCond(&s.mu)
		}
		s.space.Wait()
	}
	if s.closing || s.subs.get(sub.name) != sub {
		return false
	}
	s.queueDelivery(sub, d)
	return true
}

// dropSub forgets sub if it is still the session's subscription to name.
func (s *session) dropSub(name string, sub *subscription) {
	s.mu.Lock()
	if s.subs.get(name) == sub {
		s.subs.del(name)
	}
	s.mu.Unlock()
}

func (s *session) unsubscribe(id uint64, name string) {
	s.mu.Lock()
	sub := s.subs.del(name)
	s.mu.Unlock()
	if sub != nil && sub.ch != nil {
		s.h.detach(s, sub.ch)
	}
	s.reply(&corralv1.ServerFrame{Id: id, Frame: &corralv1.ServerFrame_Unsubscribed{Unsubscribed: &corralv1.Unsubscribed{Channel: name}}})
}

func (s *session) publish(ctx context.Context, id uint64, p *corralv1.Publish) {
	h := s.h
	if !s.lim.TakePublish(h.now(), h.sess.rates()) {
		s.errorReply(id, wire.Close{Code: wire.CloseRateLimited, RetryAfter: time.Second, Text: "publish rate exceeded"})
		return
	}
	if !s.grant.canPublish(p.GetChannel()) {
		s.errorReply(id, wire.Close{Code: wire.CloseForbidden, Text: "publishing on " + p.GetChannel() + " not allowed by the token"})
		return
	}
	rank := wire.Rank(p.GetPriority())
	if rank < s.grant.maxRank {
		s.errorReply(id, wire.Close{Code: wire.ClosePolicyViolation, Text: "priority above the token's"})
		return
	}
	res, err := h.publishVia(ctx, PublishRequest{
		Tenant: s.grant.tenant, Channel: p.GetChannel(), Priority: p.GetPriority(), Data: p.GetData(), ClientMessageID: p.GetClientMessageId(),
	}, "session")
	if err != nil {
		s.errorReply(id, wire.CloseOf(err))
		return
	}
	s.reply(&corralv1.ServerFrame{Id: id, Frame: &corralv1.ServerFrame_Published{Published: res}})
}

// deliver hands a channel message to the session. It is called with the
// channel's mutex held.
func (s *session) deliver(sub *subscription, d *delivery) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closing || s.subs.get(sub.name) != sub {
		return
	}
	if !sub.live {
		if sub.held == nil {
			sub.held = &heldDeliveries{}
		}
		if len(sub.held.list) < maxHeld {
			sub.held.list = append(sub.held.list, d)
		} else {
			sub.held.lost = true
		}
		return
	}
	s.queueDelivery(sub, d)
}

// queueDelivery queues d unless the subscription already has it; s.mu is
// held.
func (s *session) queueDelivery(sub *subscription, d *delivery) {
	m := d.msg
	if m.Epoch == sub.pos.Epoch && m.Offset <= sub.pos.Offset {
		return
	}
	if !s.q.pushMessage(d, s.h.sess.OutboundBytes, s.dropped) {
		s.closeLocked(wire.Close{Code: wire.CloseSlowConsumer, Text: "outbound queue full with a P0 message"}, true)
		return
	}
	sub.pos = history.Position{Epoch: m.Epoch, Offset: m.Offset}
	s.h.metrics.delivered.Inc()
	s.kickLocked()
}

func (s *session) dropped(p int8) {
	s.h.metrics.droppedOf.with(priorityLabel(int(p))).Inc()
}

// reply queues a control frame.
func (s *session) reply(f *corralv1.ServerFrame) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pushControl(f)
}

func (s *session) pushControl(f *corralv1.ServerFrame) {
	if s.closing {
		return
	}
	if !s.q.pushControl(f, false, s.h.sess.OutboundBytes, s.dropped) {
		s.closeLocked(wire.Close{Code: wire.CloseSlowConsumer, Text: "outbound queue full"}, true)
		return
	}
	s.kickLocked()
}

// kickLocked starts the writer goroutine if it is not running. Idle
// sessions have no writer goroutine.
func (s *session) kickLocked() {
	if !s.writing {
		s.writing = true
		s.h.workers.Go(s.writeLoop)
	}
}

func (s *session) writeLoop() {
	for {
		s.mu.Lock()
		it, ok := s.q.pop()
		s.wakeWaiters()
		if !ok {
			closing, c := s.closing, s.closeReason()
			if !closing {
				s.writing = false
			}
			s.mu.Unlock()
			if closing {
				s.tr.closeWith(c, s.h.conns.CloseTimeout)
				s.teardown(c)
			}
			return
		}
		s.mu.Unlock()
		var err error
		if it.d != nil {
			err = s.tr.writeDelivery(it.d)
		} else {
			err = s.tr.writeFrame(it.frame)
		}
		if err != nil {
			s.mu.Lock()
			if !s.closing && errors.Is(err, errStalled) {
				// The peer reads nothing: a slow consumer, whatever the
				// priority of what waits. The Error frame and the close
				// frame go out behind what the kernel holds, for a peer
				// that reads again within the write timeout.
				s.closeLocked(wire.Close{Code: wire.CloseSlowConsumer, Text: "the peer does not read"}, true)
				s.mu.Unlock()
				continue
			}
			c := wire.Close{Code: wire.CloseGoingAway, Text: "write failed"}
			if s.closing {
				c = s.closeReason() // the write failed because the close cut it
			}
			s.setClosingLocked(&c)
			s.q.clear()
			s.wakeWaiters()
			s.mu.Unlock()
			// No closing handshake with a connection that failed or a
			// peer that stalled again: cut it.
			if a, ok := s.tr.(aborter); ok {
				a.abort(c)
			} else {
				s.tr.closeWith(c, 0)
			}
			s.teardown(c)
			return
		}
	}
}

// close ends the session with c: queued frames are dropped, an Error frame
// (or GoAway for 1001) explaining c is sent when notify is set, then the
// transport is closed.
// close closes s with c (sending it when notify), and reports whether
// this call closed it: false when s was already closing.
func (s *session) close(c wire.Close, notify bool) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closeLocked(c, notify)
}

func (s *session) closeLocked(c wire.Close, notify bool) bool {
	if s.closing {
		return false
	}
	s.setClosingLocked(&c)
	s.q.clear()
	s.wakeWaiters()
	if _, ok := s.tr.(blockingWriter); ok && s.writing {
		// The writer may be stuck in a write to a peer that does not
		// read: give it a moment to deliver the close, then cut.
		time.AfterFunc(min(time.Second, s.h.sess.WriteTimeout), s.abortIfOpen)
	}
	if notify {
		f := c.ErrorFrame(0)
		if c.Code == wire.CloseGoingAway {
			f = c.GoAwayFrame(s.h.draining.Load())
		}
		s.q.pushControl(f, true, 0, s.dropped)
	}
	s.kickLocked()
	return true
}

// aborter is a transport that can cut its connection at once.
type aborter interface{ abort(c wire.Close) }

// blockingWriter is a transport whose writes block while the peer does not
// read (gRPC flow control); only abort unblocks them. A WebSocket write
// never blocks for longer than the write timeout (wsTransport.room).
type blockingWriter interface {
	aborter
	blocksWrites()
}

func (s *session) abortIfOpen() {
	s.mu.Lock()
	torn, c := s.torn, s.closeReason()
	s.mu.Unlock()
	if a, ok := s.tr.(aborter); ok && !torn {
		a.abort(c)
	}
}

// setClosingLocked marks s closing with c, with s.mu held, and takes a
// welcomed session out of the severing loop's counts (Hub.severable
// counts the sessions counted and not closing).
func (s *session) setClosingLocked(c *wire.Close) {
	if s.counted && !s.closing {
		s.h.severable[s.rank].Add(-1)
	}
	s.closing, s.closeMsg = true, c
}

// peerGone is called by the transport when the connection ended from the
// other side or failed on read.
func (s *session) peerGone(c wire.Close) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.closing {
		s.setClosingLocked(&c)
		s.q.clear()
		s.wakeWaiters()
	}
	s.kickLocked() // the writer closes the transport and tears down
}

// teardown releases everything the session holds. It runs once.
func (s *session) teardown(c wire.Close) {
	s.mu.Lock()
	if s.torn {
		s.mu.Unlock()
		return
	}
	s.torn = true
	subs := s.subs
	s.subs = nil
	counted := s.counted
	s.mu.Unlock()
	for _, sub := range subs {
		if sub.ch != nil {
			s.h.detach(s, sub.ch)
		}
	}
	if counted {
		s.h.metrics.sessionsOf.with(s.tr.kind()).Dec()
	}
	s.h.metrics.closesFor(c.Code).Inc()
	s.h.unregister(s)
}
