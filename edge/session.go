package edge

import (
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/corralhq/corral/internal/sessionrate"
	"github.com/corralhq/corral/limit"
	"github.com/corralhq/corral/wire"
	"github.com/corralhq/corral/wire/corralv1"
)

// device is the connection to the device: a WebSocket (ws.go) or a gRPC
// Connect stream (grpc.go). Only the session's writer goroutine calls
// write and closeWith, one at a time.
type device interface {
	kind() string
	remoteAddr() string
	write(f *corralv1.ServerFrame) error
	// closeWith ends the connection with c: a WebSocket close frame, or
	// the gRPC status of the stream.
	closeWith(c wire.Close)
	// abort cuts the connection at once (a write failed or stalled).
	abort()
}

// Session states.
const (
	stateNew      uint32 = iota // connected, no Hello yet
	stateHello                  // Hello sent upstream, no Welcome yet
	stateWelcomed               // the origin accepted the session
	stateWaiting                // Hello received, waiting for a handshake slot
)

// maxEarlyFrames bounds the frames a device may send after its Hello while
// the Hello waits for a handshake slot; they are relayed, in order, once
// it is sent up. One more closes the session (a client that cannot wait
// for Welcome is not one the edge buffers for).
const maxEarlyFrames = 16

// session is one device session at the edge.
//
// The device's reader (the transport's read goroutine, one frame at a time)
// owns the fields above mu; up, tag and origin are set by the reader before
// the session is known to its Relay stream and read-only after. The fields
// below mu are guarded by it.
type session struct {
	e      *Edge
	dev    device
	seq    uint64
	start  int64 // unix ns of the connection
	ageEnd int64 // unix ns at which max_session_age ends it; 0: never

	lastRecv atomic.Int64 // unix ns of the last frame from the device
	lastPing atomic.Int64 // unix ns of the last Ping sent
	helloAt  atomic.Int64 // unix ns when Hello went upstream
	state    atomic.Uint32
	rank     int8
	lim      sessionrate.Buckets

	up     *relayStream
	tag    uint64
	origin *Origin

	mu       sync.Mutex
	subs     []string                // channels subscribed (counted against max_subscriptions)
	pubs     []pendingPublish        // publishes sent up, not yet answered
	hs       limit.Token             // handshake slot, until Welcome
	hsHeld   bool                    // hs holds a slot
	hsOpen   bool                    // a handshake counted at the origin, until it ends
	sessOpen bool                    // a session counted at the origin, until it ends
	endOut   Outcome                 // what the session's end says of the origin
	later    []*corralv1.ServerFrame // local answers that follow Welcome
	q        outQueue
	closeMsg *wire.Close
	writing  bool
	closing  bool
	torn     bool
	counted  bool // counted in the sessions gauge
	upDone   bool // nothing more to send upstream (RelayClose sent or received, or the stream broke)
	replay   resumeState
	early    []*corralv1.ClientFrame // frames that came while the Hello waited
	queued   bool                    // the Hello waited: early frames go through early
}

// pendingPublish is a device Publish sent upstream and its message slot.
type pendingPublish struct {
	id  uint64
	tok limit.Token
}

func (e *Edge) newSession(dev device) *session {
	now := e.now()
	s := &session{e: e, dev: dev, start: now.UnixNano(),
		lim: sessionrate.Full(e.sess.rates(), now)}
	s.lastRecv.Store(now.UnixNano())
	if age := e.cfg.MaxSessionAge; age > 0 {
		s.ageEnd = now.Add(jitterAge(age)).UnixNano()
	}
	e.metrics.opened.WithLabelValues(dev.kind()).Inc()
	e.opened.Add(1)
	if !e.register(s) {
		s.close(e.goAwayClose("edge is draining"), true)
	}
	return s
}

// rates are the session's frame and publish rate limits.
func (c SessionConfig) rates() sessionrate.Rates {
	return sessionrate.Rates{FrameRate: c.FrameRate, FrameBurst: c.FrameBurst, PublishRate: c.PublishRate, PublishBurst: c.PublishBurst}
}

// tick runs the session's timers at now.
func (s *session) tick(now time.Time) {
	sc := s.e.sess
	switch s.state.Load() {
	case stateNew:
		if now.Sub(time.Unix(0, s.start)) > sc.HandshakeTimeout {
			s.close(wire.Close{Code: wire.CloseHandshakeTimeout, Text: "no hello within " + sc.HandshakeTimeout.String()}, true)
		}
		return
	case stateWaiting:
		// The waiting room's max_wait is below the handshake timeout; this
		// bounds the session all the same.
		if now.Sub(time.Unix(0, s.start)) > sc.HandshakeTimeout {
			s.close(wire.Close{Code: wire.CloseTryAgainLater, RetryAfter: s.e.retryHint(), Text: "no handshake slot in time"}, true)
		}
		return
	case stateHello:
		if now.Sub(time.Unix(0, s.helloAt.Load())) > sc.HandshakeTimeout {
			s.finishHandshake(hsFailed)
			s.close(wire.Close{Code: wire.CloseTryAgainLater, RetryAfter: s.e.retryHint(), Text: "the origin did not answer hello in time"}, true)
		}
		return
	}
	if now.Sub(time.Unix(0, s.lastRecv.Load())) > 2*sc.PingInterval {
		s.close(wire.Close{Code: wire.CloseGoingAway, Text: "no frame for two ping intervals"}, true)
		return
	}
	if s.ageEnd != 0 && now.UnixNano() >= s.ageEnd {
		if s.close(s.e.goAwayClose("max session age"), true) {
			s.e.metrics.shed.WithLabelValues("max_age", priorityLabel(int(s.rank))).Inc()
		}
		return
	}
	if now.Sub(time.Unix(0, s.lastPing.Load())) >= sc.PingInterval {
		s.lastPing.Store(now.UnixNano())
		s.reply(&corralv1.ServerFrame{Frame: &corralv1.ServerFrame_Ping{Ping: &corralv1.Ping{}}})
	}
}

// handle processes one decoded frame of the device, on its reader: the
// bounds first, then the frame is answered here or relayed.
func (s *session) handle(f *corralv1.ClientFrame) {
	if s.isClosing() {
		return
	}
	e := s.e
	now := e.now()
	s.lastRecv.Store(now.UnixNano())
	if !s.lim.TakeFrame(now, e.sess.rates()) {
		s.close(wire.Close{Code: wire.CloseRateLimited, RetryAfter: time.Second, Text: "too many frames"}, true)
		return
	}
	if err := e.check.CheckClientFrame(f); err != nil {
		s.close(wire.CloseOf(err), true)
		return
	}
	typ := wire.FrameType(f)
	e.metrics.framesIn.WithLabelValues(typ).Inc()
	if s.state.Load() == stateNew {
		if h := f.GetHello(); h != nil {
			s.hello(f, h)
			return
		}
		s.close(wire.Close{Code: wire.CloseBadRequest, Text: typ + " before hello"}, true)
		return
	}
	if s.stash(f) {
		return
	}
	s.frame(f)
}

// stash keeps a frame that came while the Hello waited for a slot (or
// while the frames kept then are being relayed, so that none overtakes
// them) and reports whether it did.
func (s *session) stash(f *corralv1.ClientFrame) bool {
	s.mu.Lock()
	if !s.queued {
		s.mu.Unlock()
		return false
	}
	if _, ok := f.GetFrame().(*corralv1.ClientFrame_Hello); ok || len(s.early) >= maxEarlyFrames {
		s.mu.Unlock()
		text := "second hello"
		if !ok {
			text = "more than " + strconv.Itoa(maxEarlyFrames) + " frames before welcome"
		}
		s.close(wire.Close{Code: wire.CloseBadRequest, Text: text}, true)
		return true
	}
	s.early = append(s.early, f)
	s.mu.Unlock()
	return true
}

// relayEarly relays the frames kept while the Hello waited, in order,
// until none is left; frames that arrive meanwhile join the end.
func (s *session) relayEarly() {
	for {
		s.mu.Lock()
		batch := s.early
		s.early = nil
		if len(batch) == 0 {
			s.queued = false
			s.mu.Unlock()
			return
		}
		s.mu.Unlock()
		for _, f := range batch {
			if s.isClosing() {
				return
			}
			s.frame(f)
		}
	}
}

// frame processes a checked frame of a session past its Hello.
func (s *session) frame(f *corralv1.ClientFrame) {
	switch fr := f.GetFrame().(type) {
	case *corralv1.ClientFrame_Hello:
		s.close(wire.Close{Code: wire.CloseBadRequest, Text: "second hello"}, true)
	case *corralv1.ClientFrame_Ping:
		s.reply(&corralv1.ServerFrame{Id: f.GetId(), Frame: &corralv1.ServerFrame_Pong{Pong: &corralv1.Pong{Payload: fr.Ping.GetPayload()}}})
	case *corralv1.ClientFrame_Pong:
	case *corralv1.ClientFrame_Subscribe:
		s.subscribe(f, fr.Subscribe)
	case *corralv1.ClientFrame_Unsubscribe:
		s.mu.Lock()
		s.subs = delString(s.subs, fr.Unsubscribe.GetChannel())
		s.replay.forget(fr.Unsubscribe.GetChannel())
		s.mu.Unlock()
		s.relay(f)
	case *corralv1.ClientFrame_Publish:
		s.publish(f)
	case *corralv1.ClientFrame_Ack:
		s.relay(f)
	}
}

// hello admits the session, strips the subscriptions beyond the bound,
// picks an origin and opens the session upstream.
func (s *session) hello(f *corralv1.ClientFrame, h *corralv1.Hello) {
	e := s.e
	rank := wire.Rank(h.GetPriority())
	s.rank = int8(rank)
	if r, ok := e.adm.admitSession(rank, e.now()); !ok {
		e.metrics.shed.WithLabelValues("reject", priorityLabel(rank)).Inc()
		s.close(refusal(wire.CloseTryAgainLater, r, "overloaded"), true)
		return
	}
	// A Hello that waits for its slot leaves the reader: the frames that
	// follow are kept (stash) until it is sent up.
	s.state.Store(stateWaiting)
	s.mu.Lock()
	s.queued = true
	s.mu.Unlock()
	queued := e.now()
	tok, held, w := e.adm.acquireHandshake(rank, func(tok limit.Token, ok bool) {
		if !ok {
			s.refuseHandshake(rank, e.now().Sub(queued))
			return
		}
		s.admitted(f, h, tok, true)
		s.relayEarly()
	})
	switch w {
	case limit.Queued:
		e.metrics.shed.WithLabelValues("queue_handshake", priorityLabel(rank)).Inc()
		return
	case limit.Refused:
		s.refuseHandshake(rank, 0)
		return
	}
	s.admitted(f, h, tok, held)
	s.relayEarly()
}

// refuseHandshake closes a session whose Hello found no handshake slot
// (at once, or after it waited for waited), with a hint sized by the
// backlog.
func (s *session) refuseHandshake(rank int, waited time.Duration) {
	e := s.e
	e.metrics.shed.WithLabelValues("reject_handshake", priorityLabel(rank)).Inc()
	r := e.adm.refusalHint(e.adm.handshake, rank, e.now(), waited)
	e.metrics.refusalHints.Observe(r.After.Seconds())
	e.log.Debug("edge: hello refused: no handshake slot", "priority", priorityLabel(rank), "retry_after", r.After, "retry_within", r.Within,
		"waiting", e.adm.handshake.Waiting(), "admissions_per_second", int(e.adm.handshake.Rate()))
	s.close(refusal(wire.CloseTryAgainLater, r, "too many handshakes in flight"), true)
}

// admitted goes on with a Hello that holds its handshake slot (held) or
// needs none: the subscriptions beyond the bound are stripped, an origin
// picked, the session opened upstream.
func (s *session) admitted(f *corralv1.ClientFrame, h *corralv1.Hello, tok limit.Token, held bool) {
	e := s.e
	// Subscriptions beyond max_subscriptions never go upstream: each is
	// refused after Welcome, as the hub refuses it.
	var keep []*corralv1.Subscribe
	var refused []*corralv1.ServerFrame
	subs := make([]string, 0, len(h.GetSubscribe()))
	for _, sub := range h.GetSubscribe() {
		name := sub.GetChannel()
		if !hasString(subs, name) && len(subs) >= e.sess.MaxSubscriptions {
			refused = append(refused, s.refusal(f.GetId(), name))
			continue
		}
		if !hasString(subs, name) {
			subs = append(subs, name)
		}
		keep = append(keep, sub)
	}
	if len(refused) > 0 {
		h = proto.CloneOf(h)
		h.Subscribe = keep
	}
	s.mu.Lock()
	if s.closing {
		// Gone while it waited (the device left, a timeout): the slot
		// goes back unused.
		s.mu.Unlock()
		if held {
			tok.Ignore()
		}
		return
	}
	s.subs, s.later = subs, refused
	s.hs, s.hsHeld = tok, held
	s.mu.Unlock()
	if up := s.prepareHello(f.GetId(), h); up != f.GetHello() {
		f = &corralv1.ClientFrame{Id: f.GetId(), Frame: &corralv1.ClientFrame_Hello{Hello: up}}
	}
	if !e.up.open(s, tokenTenantHint(h.GetToken())) {
		s.finishHandshake(hsFailed)
		s.close(wire.Close{Code: wire.CloseTryAgainLater, RetryAfter: e.retryHint(), Text: "no origin available"}, true)
		return
	}
	s.relay(f)
}

// refusal is the Error a subscription beyond max_subscriptions gets.
func (s *session) refusal(id uint64, channel string) *corralv1.ServerFrame {
	n := s.e.sess.MaxSubscriptions
	fr := wire.Close{Code: wire.CloseSubscriptionLimit, Text: "at most " + strconv.Itoa(n) + " subscriptions"}.ErrorFrame(id)
	fr.GetError().Channel = channel
	return fr
}

func (s *session) subscribe(f *corralv1.ClientFrame, sub *corralv1.Subscribe) {
	name := sub.GetChannel()
	s.mu.Lock()
	if !hasString(s.subs, name) {
		if len(s.subs) >= s.e.sess.MaxSubscriptions {
			s.mu.Unlock()
			s.reply(s.refusal(f.GetId(), name))
			return
		}
		s.subs = append(s.subs, name)
	}
	s.mu.Unlock()
	s.prepareSubscribe(f, sub)
}

func (s *session) publish(f *corralv1.ClientFrame) {
	e := s.e
	if !s.lim.TakePublish(e.now(), e.sess.rates()) {
		s.reply(wire.Close{Code: wire.CloseRateLimited, RetryAfter: time.Second, Text: "publish rate exceeded"}.ErrorFrame(f.GetId()))
		return
	}
	rank := wire.Rank(f.GetPublish().GetPriority())
	tok, held, r, ok := e.adm.acquireMessage(rank, e.now())
	if !ok {
		e.metrics.shed.WithLabelValues("reject_publish", priorityLabel(rank)).Inc()
		s.reply(refusal(wire.CloseTryAgainLater, r, "too many publishes in flight").ErrorFrame(f.GetId()))
		return
	}
	if held {
		s.mu.Lock()
		s.pubs = append(s.pubs, pendingPublish{id: f.GetId(), tok: tok})
		s.mu.Unlock()
	}
	s.relay(f)
}

// relay sends a device frame upstream.
func (s *session) relay(f *corralv1.ClientFrame) {
	if s.up == nil {
		return // closed before an origin took it
	}
	s.up.send(&corralv1.RelayFrame{Session: s.tag, Frame: &corralv1.RelayFrame_Client{Client: f}}, true)
}

// fromUpstream takes a frame of the hub for this session. It runs on the
// Relay stream's receiving goroutine and never blocks on the device.
func (s *session) fromUpstream(f *corralv1.ServerFrame) {
	switch fr := f.GetFrame().(type) {
	case *corralv1.ServerFrame_Welcome:
		s.welcome(f, fr.Welcome)
		return
	case *corralv1.ServerFrame_Published:
		s.answered(f.GetId(), true)
	case *corralv1.ServerFrame_Error:
		s.answered(f.GetId(), false)
		if ch := fr.Error.GetChannel(); ch != "" {
			s.mu.Lock()
			s.subs = delString(s.subs, ch)
			s.replay.forget(ch)
			s.mu.Unlock()
		}
	case *corralv1.ServerFrame_Unsubscribed:
		s.mu.Lock()
		s.subs = delString(s.subs, fr.Unsubscribed.GetChannel())
		s.replay.forget(fr.Unsubscribed.GetChannel())
		s.mu.Unlock()
	case *corralv1.ServerFrame_Subscribed, *corralv1.ServerFrame_Message:
		s.replayFromUpstream(f)
		return
	case *corralv1.ServerFrame_Ping, *corralv1.ServerFrame_Pong:
		return // the edge owns the device's liveness
	}
	s.push(f)
}

// welcome ends the handshake and hands Welcome to the device with the
// edge's hints and node id.
func (s *session) welcome(f *corralv1.ServerFrame, w *corralv1.Welcome) {
	e := s.e
	if !s.state.CompareAndSwap(stateHello, stateWelcomed) {
		return
	}
	now := e.now()
	d := now.Sub(time.Unix(0, s.helloAt.Load()))
	s.finishHandshake(hsWelcome)
	e.adm.observeHandshake(d)
	e.metrics.handshake.Observe(d.Seconds())
	s.lastPing.Store(now.UnixNano())
	w = proto.CloneOf(w)
	w.NodeId = e.nodeID + "/" + w.GetNodeId()
	hints := w.GetHints()
	if hints == nil {
		hints = &corralv1.ServerHints{}
		w.Hints = hints
	}
	sc := e.sess
	hints.PingIntervalMs = uint32(sc.PingInterval.Milliseconds())
	hints.MaxFrameBytes = minNonZero(hints.GetMaxFrameBytes(), uint32(e.check.Config().MaxFrameBytes))
	hints.MaxSubscriptions = minNonZero(hints.GetMaxSubscriptions(), uint32(sc.MaxSubscriptions))
	hints.PublishRatePerSecond = minNonZero(hints.GetPublishRatePerSecond(), uint32(sc.PublishRate))
	s.mu.Lock()
	if !s.closing {
		s.counted = true
		e.severable[s.rank].Add(1)
		e.metrics.sessions.WithLabelValues(s.dev.kind()).Inc()
	}
	later := s.later
	s.later = nil
	s.mu.Unlock()
	s.push(&corralv1.ServerFrame{Id: f.GetId(), Frame: &corralv1.ServerFrame_Welcome{Welcome: w}})
	for _, l := range later {
		s.push(l)
	}
	s.welcomed()
}

func minNonZero(a, b uint32) uint32 {
	if a == 0 {
		return b
	}
	if b == 0 {
		return a
	}
	return min(a, b)
}

// Results of a handshake, for finishHandshake.
const (
	hsWelcome = iota // the origin's Welcome: a latency sample, a success of the origin
	hsFailed         // the origin failed it (overload, timeout, broken stream): a drop and a failure
	hsNeutral        // the device left, or the hub refused the device: neither
	hsDropped        // the Relay stream broke (reported once for the stream): a drop, neutral for the origin
)

// finishHandshake ends the handshake once: it releases the handshake slot
// and ends the origin's count of it.
func (s *session) finishHandshake(result int) {
	s.mu.Lock()
	tok, held, open := s.hs, s.hsHeld, s.hsOpen
	s.hsHeld, s.hsOpen = false, false
	if open && result == hsWelcome {
		s.sessOpen = true
	}
	s.mu.Unlock()
	if held {
		switch result {
		case hsWelcome:
			tok.Success()
		case hsFailed, hsDropped:
			tok.Drop()
		default:
			tok.Ignore()
		}
	}
	if open {
		out := OriginNeutral
		switch result {
		case hsWelcome:
			out = OriginSuccess
		case hsFailed:
			out = OriginFailure
		}
		s.origin.HandshakeDone(out)
	}
}

// answered releases the message slot of the publish with id, if any.
func (s *session) answered(id uint64, ok bool) {
	s.mu.Lock()
	var tok limit.Token
	found := false
	for i, p := range s.pubs {
		if p.id == id {
			tok, found = p.tok, true
			s.pubs = append(s.pubs[:i], s.pubs[i+1:]...)
			break
		}
	}
	s.mu.Unlock()
	if !found {
		return
	}
	if ok {
		tok.Success()
	} else {
		tok.Ignore() // refused by the hub: not a latency of the path
	}
}

// upstreamClosed is the hub's close of the session (RelayClose): the
// device gets exactly that close. The hub sent its Error or GoAway frame
// before, as a ServerFrame.
func (s *session) upstreamClosed(c wire.Close) {
	if s.state.Load() == stateHello {
		if c.Code == wire.CloseTryAgainLater || c.Code == wire.CloseInternal || c.Code == wire.CloseGoingAway {
			s.finishHandshake(hsFailed)
		} else {
			s.finishHandshake(hsNeutral)
		}
	}
	s.mu.Lock()
	s.upDone = true
	s.endOut = closeOutcome(c.Code)
	s.closeLocked(c, false, true)
	s.mu.Unlock()
}

// closeOutcome is what the hub's close of a session says of the hub: a
// failure for the codes of an origin that cannot serve (1001 draining,
// 1011, 1013), a success for a normal close, nothing for a close the
// device caused.
func closeOutcome(code wire.CloseCode) Outcome {
	switch code {
	case wire.CloseGoingAway, wire.CloseInternal, wire.CloseTryAgainLater:
		return OriginFailure
	case wire.CloseNormal:
		return OriginSuccess
	}
	return OriginNeutral
}

// streamBroken ends the session because its Relay stream broke: a GoAway
// with a jittered hint, then 1001 (Unavailable on gRPC).
func (s *session) streamBroken() {
	s.finishHandshake(hsDropped)
	s.mu.Lock()
	s.upDone = true
	s.mu.Unlock()
	if s.close(s.e.goAwayClose("origin unavailable"), true) {
		s.e.metrics.shed.WithLabelValues("origin_lost", priorityLabel(int(s.rank))).Inc()
	}
}

// reply queues a frame the edge answers itself.
func (s *session) reply(f *corralv1.ServerFrame) { s.push(f) }

// push queues a frame for the device; a device whose queue is full is a
// slow consumer and is closed with 4000.
func (s *session) push(f *corralv1.ServerFrame) {
	s.mu.Lock()
	if s.closing {
		s.mu.Unlock()
		return
	}
	if !s.q.push(f, proto.Size(f), s.e.sess.OutboundBytes) {
		if m := f.GetMessage(); m != nil && wire.Rank(m.GetPriority()) > 0 {
			// A P1 or P2 message that does not fit is dropped and told
			// as a Gap, as the hub does; only P0 closes the session.
			s.q.appendGap(m)
			s.kickLocked()
			s.mu.Unlock()
			s.e.metrics.dropped.WithLabelValues(priorityLabel(wire.Rank(m.GetPriority()))).Inc()
			return
		}
		s.closeLocked(wire.Close{Code: wire.CloseSlowConsumer, Text: "outbound queue full"}, true, false)
		s.mu.Unlock()
		s.e.metrics.slow.Inc()
		return
	}
	s.kickLocked()
	s.mu.Unlock()
}

func (s *session) isClosing() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closing
}

func (s *session) kickLocked() {
	if !s.writing {
		s.writing = true
		s.e.workers.Go(s.writeLoop)
	}
}

func (s *session) writeLoop() {
	for {
		s.mu.Lock()
		f, ok := s.q.pop()
		if !ok {
			closing := s.closing
			var c wire.Close
			if s.closeMsg != nil {
				c = *s.closeMsg
			}
			if !closing {
				s.writing = false
			}
			s.mu.Unlock()
			if closing {
				s.dev.closeWith(c)
				s.teardown(c)
			}
			return
		}
		s.mu.Unlock()
		if err := s.dev.write(f); err != nil {
			s.mu.Lock()
			c := wire.Close{Code: wire.CloseGoingAway, Text: "write failed"}
			if errStalledIs(err) && !s.closing {
				c = wire.Close{Code: wire.CloseSlowConsumer, Text: "the device does not read"}
			}
			if s.closing && s.closeMsg != nil {
				c = *s.closeMsg
			}
			wasClosing := s.closing
			s.setClosingLocked(&c)
			s.q.clear()
			s.mu.Unlock()
			if !wasClosing {
				s.sendUpClose(c)
			}
			s.dev.abort()
			s.teardown(c)
			return
		}
	}
}

// close closes s with c (sending the device an Error, or a GoAway for
// 1001, when notify) and reports whether this call closed it.
func (s *session) close(c wire.Close, notify bool) bool {
	s.mu.Lock()
	closed := s.closeLocked(c, notify, false)
	s.mu.Unlock()
	return closed
}

// closeLocked is close with s.mu held; with flush the frames queued are
// written first (the hub's own Error or GoAway before its RelayClose). The
// session's RelayClose is queued upstream (session.mu, then
// relayStream.sendMu: the documented order).
func (s *session) closeLocked(c wire.Close, notify, flush bool) bool {
	if s.closing {
		return false
	}
	s.setClosingLocked(&c)
	if !flush {
		s.q.clear()
	}
	if notify {
		f := c.ErrorFrame(0)
		if c.Code == wire.CloseGoingAway {
			f = c.GoAwayFrame(s.e.draining.Load())
		}
		s.q.push(f, 0, 0)
	}
	if !s.upDone && s.up != nil {
		s.upDone = true
		s.up.send(relayClose(s.tag, c), false)
	}
	if s.writing {
		// The writer may be stuck in a write to a device that does not
		// read: give it a moment to deliver the close, then cut.
		time.AfterFunc(min(time.Second, s.e.sess.WriteTimeout), s.abortIfOpen)
	}
	s.kickLocked()
	return true
}

// setClosingLocked marks s closing with c, with s.mu held, and takes a
// welcomed session out of the severing loop's counts (Edge.severable
// counts the sessions counted and not closing).
func (s *session) setClosingLocked(c *wire.Close) {
	if s.counted && !s.closing {
		s.e.severable[s.rank].Add(-1)
	}
	s.closing, s.closeMsg = true, c
}

// sendUpClose queues the session's RelayClose unless the upstream side is
// already done.
func (s *session) sendUpClose(c wire.Close) {
	s.mu.Lock()
	send := !s.upDone && s.up != nil
	s.upDone = true
	s.mu.Unlock()
	if send {
		s.up.send(relayClose(s.tag, c), false)
	}
}

func relayClose(tag uint64, c wire.Close) *corralv1.RelayFrame {
	return &corralv1.RelayFrame{Session: tag, Frame: &corralv1.RelayFrame_Close{Close: c.RelayClose()}}
}

func (s *session) abortIfOpen() {
	s.mu.Lock()
	torn := s.torn
	s.mu.Unlock()
	if !torn {
		s.dev.abort()
	}
}

// peerGone is called by the transport when the device's connection ended
// from its side or failed on read.
func (s *session) peerGone(c wire.Close) {
	s.mu.Lock()
	if !s.closing {
		s.setClosingLocked(&c)
		s.q.clear()
		if !s.upDone && s.up != nil {
			s.upDone = true
			s.up.send(relayClose(s.tag, c), false)
		}
	}
	s.kickLocked()
	s.mu.Unlock()
}

// teardown releases what the session holds. It runs once.
func (s *session) teardown(c wire.Close) {
	s.mu.Lock()
	if s.torn {
		s.mu.Unlock()
		return
	}
	s.torn = true
	counted, up := s.counted, s.up
	pubs := s.pubs
	s.pubs = nil
	s.replay.forgetAll()
	s.mu.Unlock()
	s.finishHandshake(hsNeutral) // still open: the device left, not the origin's failure
	for _, p := range pubs {
		p.tok.Ignore()
	}
	s.mu.Lock()
	sessOpen, out := s.sessOpen, s.endOut
	s.sessOpen = false
	s.mu.Unlock()
	if sessOpen {
		s.origin.SessionDone(out)
	}
	if up != nil {
		up.forget(s)
	}
	if counted {
		s.e.metrics.sessions.WithLabelValues(s.dev.kind()).Dec()
	}
	s.e.metrics.closes.WithLabelValues(closeCodeLabel(c.Code)).Inc()
	s.e.unregister(s)
}

// outQueue is a session's frames to the device, bounded in bytes.
type outQueue struct {
	frames []*corralv1.ServerFrame
	sizes  []int32
	head   int
	bytes  int
}

// push queues f of size bytes unless that would exceed limit (limit 0:
// always).
func (q *outQueue) push(f *corralv1.ServerFrame, size, limit int) bool {
	if limit > 0 && q.bytes > 0 && q.bytes+size > limit {
		return false
	}
	q.frames = append(q.frames, f)
	q.sizes = append(q.sizes, int32(size))
	q.bytes += size
	return true
}

func (q *outQueue) pop() (*corralv1.ServerFrame, bool) {
	if q.head >= len(q.frames) {
		return nil, false
	}
	f := q.frames[q.head]
	q.bytes -= int(q.sizes[q.head])
	q.frames[q.head] = nil
	q.head++
	if q.head == len(q.frames) {
		q.frames, q.sizes, q.head = q.frames[:0], q.sizes[:0], 0
		if cap(q.frames) > 64 {
			q.frames, q.sizes = nil, nil
		}
	}
	return f, true
}

func (q *outQueue) clear() { *q = outQueue{} }

// appendGap records that m will not be delivered: a Gap frame, or the
// Gap at the tail of the queue extended when m continues it. Gaps are
// small and always queued.
func (q *outQueue) appendGap(m *corralv1.Message) {
	if n := len(q.frames); n > q.head {
		if g := q.frames[n-1].GetGap(); g != nil && g.GetChannel() == m.GetChannel() && g.GetEpoch() == m.GetEpoch() && g.GetToOffset()+1 == m.GetOffset() {
			g.ToOffset = m.GetOffset()
			return
		}
	}
	f := &corralv1.ServerFrame{Frame: &corralv1.ServerFrame_Gap{Gap: &corralv1.Gap{
		Channel: m.GetChannel(), Epoch: m.GetEpoch(), FromOffset: m.GetOffset(), ToOffset: m.GetOffset(), Reason: "slow consumer",
	}}}
	q.push(f, proto.Size(f), 0)
}

func hasString(l []string, s string) bool {
	for _, v := range l {
		if v == s {
			return true
		}
	}
	return false
}

func delString(l []string, s string) []string {
	for i, v := range l {
		if v == s {
			l[i] = l[len(l)-1]
			return l[:len(l)-1]
		}
	}
	return l
}
