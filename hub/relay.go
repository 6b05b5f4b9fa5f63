package hub

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"io"
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/corralhq/corral/internal/sendwatch"
	"github.com/corralhq/corral/wire"
	"github.com/corralhq/corral/wire/corralv1"
)

// Relay. An edge carries many device sessions over one Corral.Relay
// stream, each frame tagged with its session (RelayFrame.session). On the
// hub each tag is an ordinary session with a relayTransport: admission,
// Hello auth, limits, history, fan-out, the slow-consumer policy and drain
// apply unchanged; only the pings are the edge's (the edge owns device
// liveness), the handshake timeout still applies.
//
// Per stream: one reader goroutine (it demultiplexes by tag and never
// blocks on a session: frames go to a bounded inbox per session, handled
// in order on the hub's workers), one writer goroutine (the only caller of
// Send: gRPC's Send is not safe for concurrent use) draining one FIFO, and
// the handler's goroutine, which waits for the end and tears every session
// down. A session has at most relayInflight frames in the FIFO; its writer
// waits for room, so a session the stream cannot carry fast enough fills
// its own bounded outbound queue, where the slow-consumer policy drops P2
// then P1 and closes with 4000 on P0. The FIFO holds at most relayInflight
// frames and one RelayClose per session, plus relayReplies refusals of the
// reader, so its memory is bounded by the sessions the stream carries.
// Because each session enters the FIFO again only behind everyone else's
// frames, the stream is shared round-robin: one busy session delays the
// others by at most relayInflight frames.
//
// Tags: an edge opens a session with a RelayOpen whose tag is above every
// tag it opened before on the stream (a counter per stream), never 0. A
// tag at or below the highest opened that is no longer open is one of
// either side's closes crossing frames on the wire: frames for it are
// dropped. A ClientFrame for a tag above the highest opened ("before
// open"), a RelayOpen of a tag at or below it, or tag 0 is answered by a
// RelayClose 1002 for that tag; a RelayOpen of a tag still open closes
// that session with 1002; a ServerFrame or an empty frame closes its
// session with 1002 (or, for no session, is answered by a RelayClose 1002).
//
// Lock order: relayStream.mu and session.mu are never held together;
// relayTransport.mu is a leaf.

const (
	// relayFrameOverhead is the slack of the gRPC send limit above
	// max_frame_bytes: room for a RelayFrame around a frame of
	// max_frame_bytes (relayWrapBytes) and a little more.
	relayFrameOverhead = 64
	// relayWrapBytes is the most a RelayFrame adds around the ServerFrame
	// it carries: the tag (1 + 10 bytes), the field's header and length
	// (1 + 5).
	relayWrapBytes = 17
	// relayInflight is how many frames of one session may wait in its
	// stream's send queue.
	relayInflight = 4
	// relayReplies bounds the refusals the reader itself queues (RelayClose
	// for tags that are not sessions); beyond it the reader waits, which
	// HTTP/2 flow control passes on to the edge.
	relayReplies = 256
	// relayEndWait bounds how long a Relay handler waits for its sessions
	// to be torn down once the stream ended.
	relayEndWait = 5 * time.Second
)

// relayRecvLimit is the gRPC receive limit for frames of max bytes: a
// ClientFrame up to twice max in its RelayFrame.
func relayRecvLimit(max int) int { return 2*max + relayFrameOverhead }

// errRelayEnded is the write error of a session whose Relay stream ended.
var errRelayEnded = errors.New("hub: relay stream ended")

// errRelayTooBig is the write error of a frame above max_frame_bytes: sent
// anyway it would end the stream (gRPC fails the stream, not the message).
var errRelayTooBig = errors.New("hub: frame above max_frame_bytes for a relay stream")

// relayKey is one configured relay key.
type relayKey struct {
	name string
	hash [sha256.Size]byte
}

// relays is the hub's part of Relay: the keys and the open streams.
type relays struct {
	keys []relayKey

	// closing is set when the hub drains or stops: a stream ends once it
	// carries no session, and new streams are refused.
	closing atomic.Bool

	mu      sync.Mutex
	streams map[*relayStream]struct{}
}

// init reads the keys of cfg (validated already).
func (r *relays) init(cfg RelayConfig) error {
	r.streams = make(map[*relayStream]struct{})
	for _, k := range cfg.Keys {
		s, err := k.secret()
		if err != nil {
			return err
		}
		r.keys = append(r.keys, relayKey{name: k.Name, hash: sha256.Sum256([]byte(s))})
	}
	return nil
}

// authenticate checks the stream's "authorization" metadata against the
// relay keys (in constant time) and returns the key's name.
func (r *relays) authenticate(ctx context.Context) (string, error) {
	if len(r.keys) == 0 {
		return "", status.Error(codes.PermissionDenied, "hub: relay is not enabled on this hub (no relay.keys)")
	}
	var v []string
	if md, ok := metadata.FromIncomingContext(ctx); ok {
		v = md.Get("authorization")
	}
	refused := wire.Close{Code: wire.ClosePolicyViolation, Text: "relay key missing or unknown"}.Status().Err()
	if len(v) != 1 {
		return "", refused
	}
	secret, ok := strings.CutPrefix(v[0], "Bearer ")
	if !ok || secret == "" {
		return "", refused
	}
	h := sha256.Sum256([]byte(secret))
	name, found := "", false
	for _, k := range r.keys {
		if subtle.ConstantTimeCompare(h[:], k.hash[:]) == 1 && !found {
			name, found = k.name, true
		}
	}
	if !found {
		return "", refused
	}
	return name, nil
}

func (r *relays) add(rs *relayStream) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closing.Load() {
		return false
	}
	r.streams[rs] = struct{}{}
	return true
}

func (r *relays) remove(rs *relayStream) {
	r.mu.Lock()
	delete(r.streams, rs)
	r.mu.Unlock()
}

// closeWhenEmpty makes every Relay stream end once it carries no session
// (at once for those that carry none), and refuses new ones. Shutdown and
// Run's stop call it before sending the sessions away.
func (r *relays) closeWhenEmpty(h *Hub) {
	r.mu.Lock()
	r.closing.Store(true)
	list := make([]*relayStream, 0, len(r.streams))
	for rs := range r.streams {
		list = append(list, rs)
	}
	r.mu.Unlock()
	for _, rs := range list {
		rs.endIfIdle(h.goAwayClose("hub draining"))
	}
}

// Relay serves one edge's stream of tagged sessions (see the comment at
// the top of relay.go). Without a valid relay key it fails with
// Unauthenticated before it reads a frame; a hub with no relay key refuses
// it with PermissionDenied; a draining hub with Unavailable and a hint.
func (g *grpcService) Relay(stream corralv1.Corral_RelayServer) error {
	h := g.h
	keyName, err := h.relay.authenticate(stream.Context())
	if err != nil {
		if status.Code(err) == codes.Unauthenticated {
			h.metrics.authRejected.WithLabelValues("relay_key").Inc()
		}
		return err
	}
	if h.draining.Load() || h.relay.closing.Load() {
		return h.goAwayClose("hub draining").Status().Err()
	}
	rs := newRelayStream(h, stream)
	if !h.relay.add(rs) {
		return h.goAwayClose("hub draining").Status().Err()
	}
	defer h.relay.remove(rs)
	h.metrics.relayStreams.Inc()
	defer h.metrics.relayStreams.Dec()
	h.log.Debug("relay stream open", "key", keyName)
	go rs.writeLoop()
	go rs.readLoop()
	<-rs.done
	rs.awaitSessions()
	end := rs.endReason()
	h.log.Debug("relay stream ended", "key", keyName, "code", end.Code, "reason", end.Text)
	if end.Code == wire.CloseNormal {
		return nil
	}
	return end.Status().Err()
}

// relayItem is one frame in a stream's send queue: of a session (t set:
// the frame took one of its relayInflight places) or not (a RelayClose,
// or a reply of the reader).
type relayItem struct {
	f     *corralv1.RelayFrame
	t     *relayTransport
	reply bool // queued by the reader, counted in relayStream.replies
}

// relayStream is one Relay stream. Its methods are safe for concurrent
// use; Send is called by writeLoop only.
type relayStream struct {
	h      *Hub
	stream corralv1.Corral_RelayServer
	ctx    context.Context

	kick chan struct{} // cap 1: the queue got an item, or the stream is finishing
	done chan struct{} // closed when the stream ends

	// A Send blocks while the edge does not read (HTTP/2 flow control).
	// The watch ends the stream when one has been blocked for the write
	// timeout.
	watch sendwatch.Watch // Send and Stop from the writer goroutine only

	mu         sync.Mutex
	room       sync.Cond // on mu: the reader waits here for room for a reply
	q          []relayItem
	unsent     int // frames queued and not written yet (the writer's batch included)
	replies    int
	sessions   map[uint64]*relayTransport
	maxTag     uint64        // the highest tag opened
	finishing  bool          // end once the queue is written
	ended      bool          // the stream is over (done is closed once its sessions are closing)
	end        wire.Close    // why the stream ends
	sessionEnd wire.Close    // the close of the sessions on it
	emptied    chan struct{} // closed once the stream ended and its last session left
	isEmptied  bool          // emptied is closed
}

func newRelayStream(h *Hub, stream corralv1.Corral_RelayServer) *relayStream {
	rs := &relayStream{
		h: h, stream: stream, ctx: stream.Context(),
		kick: make(chan struct{}, 1), done: make(chan struct{}), emptied: make(chan struct{}),
		sessions: make(map[uint64]*relayTransport),
	}
	rs.room.L = &rs.mu
	rs.watch.Timeout, rs.watch.Stalled = h.sess.WriteTimeout, rs.stalled
	return rs
}

// push queues it; rs.mu is held.
func (rs *relayStream) push(it relayItem) {
	rs.q = append(rs.q, it)
	rs.unsent++
	if it.reply {
		rs.replies++
	}
	select {
	case rs.kick <- struct{}{}:
	default:
	}
}

// fail ends the stream now with c (queued frames are not written) and
// closes every session on it with sc. The sessions are closed before done
// is: a session's writer that finds the stream ended waits for done, so
// its session is closing with sc by then, never with a write error.
func (rs *relayStream) fail(c, sc wire.Close) {
	rs.mu.Lock()
	if rs.ended {
		rs.mu.Unlock()
		return
	}
	rs.ended = true
	if !rs.finishing {
		rs.end = c
	}
	rs.sessionEnd = sc
	list := make([]*relayTransport, 0, len(rs.sessions))
	for _, t := range rs.sessions {
		list = append(list, t)
	}
	rs.room.Broadcast()
	rs.mu.Unlock()
	for _, t := range list {
		if s := t.s.Load(); s != nil { // nil: open sees the end itself
			s.peerGone(sc)
		}
	}
	rs.failed()
}

// failed is the end of fail, once the sessions are closing: done closes,
// and emptied when no session is left. The last session may have left
// (and closed emptied) while fail notified the others without mu.
func (rs *relayStream) failed() {
	rs.mu.Lock()
	close(rs.done)
	if len(rs.sessions) == 0 {
		rs.emptiedLocked()
	}
	rs.mu.Unlock()
}

// emptiedLocked closes emptied once; rs.mu is held. Both fail and the last
// session's leave find the stream ended and empty, in either order.
func (rs *relayStream) emptiedLocked() {
	if !rs.isEmptied {
		rs.isEmptied = true
		close(rs.emptied)
	}
}

func (rs *relayStream) endReason() wire.Close {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	return rs.end
}

// endIfIdle ends the stream with c, once the frames queued are written,
// if it carries no session and the hub is closing.
func (rs *relayStream) endIfIdle(c wire.Close) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if rs.ended || rs.finishing || len(rs.sessions) > 0 || !rs.h.relay.closing.Load() {
		return
	}
	rs.finishing, rs.end = true, c
	select {
	case rs.kick <- struct{}{}:
	default:
	}
}

// writeLoop is the stream's only sender. It writes the queue in order,
// gives each session its place back as its frame is written, and ends the
// stream on a failed Send, or once the queue is empty when finishing.
func (rs *relayStream) writeLoop() {
	var batch []relayItem
	for {
		rs.mu.Lock()
		for len(rs.q) == 0 && !rs.ended && !rs.finishing {
			rs.mu.Unlock()
			select {
			case <-rs.kick:
			case <-rs.done:
			}
			rs.mu.Lock()
		}
		if rs.ended || (rs.finishing && len(rs.q) == 0) {
			end := rs.end
			rs.mu.Unlock()
			rs.watch.Stop()
			rs.fail(end, relayEndedClose)
			return
		}
		batch = append(batch[:0], rs.q...)
		clear(rs.q)
		rs.q = rs.q[:0]
		if cap(rs.q) > 1024 {
			rs.q = nil // a burst's buffer is not kept
		}
		rs.mu.Unlock()
		for i, it := range batch {
			err := rs.send(it.f)
			batch[i] = relayItem{}
			rs.mu.Lock()
			rs.unsent--
			if it.reply {
				rs.replies--
				rs.room.Signal()
			}
			if it.t != nil {
				it.t.sent()
			}
			rs.mu.Unlock()
			if err != nil {
				rs.fail(wire.Close{Code: wire.CloseGoingAway, Text: "relay stream: send failed"}, relayEndedClose)
				return
			}
		}
		if cap(batch) > 1024 {
			batch = nil
		}
	}
}

// send is one Send, watched for the write timeout.
func (rs *relayStream) send(f *corralv1.RelayFrame) error {
	return rs.watch.Send(func() error { return rs.stream.Send(f) })
}

// stalled runs when a Send has been blocked for the write timeout: the
// edge reads nothing, and the stream ends (returning from the handler
// cancels the stream, which unblocks the Send).
func (rs *relayStream) stalled() {
	c := wire.Close{Code: wire.CloseSlowConsumer, Text: "the edge does not read the relay stream"}
	rs.fail(c, c)
}

// readLoop reads the edge's frames until the stream ends.
func (rs *relayStream) readLoop() {
	for {
		f, err := rs.stream.Recv()
		if err != nil {
			rs.fail(recvClose(err), relayEndedClose)
			return
		}
		rs.dispatch(f)
	}
}

// recvClose is the end of a stream whose Recv failed.
func recvClose(err error) wire.Close {
	switch {
	case errors.Is(err, io.EOF), status.Code(err) == codes.Canceled:
		return wire.Close{Code: wire.CloseNormal, Text: "the edge ended the relay stream"}
	case status.Code(err) == codes.ResourceExhausted:
		return wire.Close{Code: wire.CloseTooBig, Text: "relay frame too big"}
	}
	return wire.CloseOf(err)
}

// dispatch routes one frame of the edge by its tag.
func (rs *relayStream) dispatch(f *corralv1.RelayFrame) {
	tag := f.GetSession()
	if tag == 0 {
		rs.refuse(0, "session tag 0")
		return
	}
	switch fr := f.GetFrame().(type) {
	case *corralv1.RelayFrame_Open:
		rs.open(tag, fr.Open)
	case *corralv1.RelayFrame_Client:
		t, known := rs.lookup(tag)
		switch {
		case t != nil:
			t.receive(fr.Client)
		case !known:
			rs.refuse(tag, "client frame before open")
		}
	case *corralv1.RelayFrame_Close:
		if t, _ := rs.lookup(tag); t != nil {
			t.peerClose(fr.Close)
		}
	default: // a ServerFrame from the edge, or no frame
		what := "server frame from the edge"
		if fr == nil {
			what = "empty relay frame"
		}
		t, known := rs.lookup(tag)
		switch {
		case t != nil:
			t.closeSession(wire.Close{Code: wire.CloseProtocolError, Text: what})
		case !known:
			rs.refuse(tag, what)
		}
	}
}

// lookup returns the open session of tag; known reports whether the tag
// was opened on the stream (so that frames for it cross a close).
func (rs *relayStream) lookup(tag uint64) (t *relayTransport, known bool) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	return rs.sessions[tag], tag <= rs.maxTag
}

// refuse answers a frame that belongs to no session with a RelayClose 1002
// for its tag, waiting for room in the queue.
func (rs *relayStream) refuse(tag uint64, why string) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	for rs.replies >= relayReplies && !rs.ended {
		rs.room.Wait()
	}
	if rs.ended || rs.finishing {
		return
	}
	rs.push(relayItem{f: relayCloseFrame(tag, wire.Close{Code: wire.CloseProtocolError, Text: why}), reply: true})
}

func relayCloseFrame(tag uint64, c wire.Close) *corralv1.RelayFrame {
	return &corralv1.RelayFrame{Session: tag, Frame: &corralv1.RelayFrame_Close{Close: c.RelayClose()}}
}

// open starts the session of a RelayOpen.
func (rs *relayStream) open(tag uint64, o *corralv1.RelayOpen) {
	rs.mu.Lock()
	if old := rs.sessions[tag]; old != nil {
		rs.mu.Unlock()
		old.closeSession(wire.Close{Code: wire.CloseProtocolError, Text: "session tag already open"})
		return
	}
	if tag <= rs.maxTag {
		rs.mu.Unlock()
		rs.refuse(tag, "session tag not above the last one opened")
		return
	}
	if rs.ended || rs.finishing {
		rs.mu.Unlock()
		return // the stream is over: so is every session on it
	}
	t := &relayTransport{rs: rs, tag: tag, device: relayDeviceLabel(o.GetTransport())}
	rs.sessions[tag] = t
	rs.maxTag = tag
	rs.mu.Unlock()
	rs.h.metrics.relaySessions.WithLabelValues(t.device).Inc()
	s := rs.h.newSession(t)
	t.s.Store(s)
	rs.mu.Lock()
	ended, sc := rs.ended, rs.sessionEnd
	rs.mu.Unlock()
	if ended { // fail may not have seen s
		s.peerGone(sc)
	}
}

// relayEndedClose is the close of the sessions of a stream that ended.
var relayEndedClose = wire.Close{Code: wire.CloseGoingAway, Text: "relay stream ended"}

// relayDeviceLabel is the label value of RelayOpen.transport.
func relayDeviceLabel(s string) string {
	if s == "ws" || s == "grpc" {
		return s
	}
	return "other"
}

// awaitSessions waits (a bounded time) until the sessions of an ended
// stream (fail closed them) are torn down.
func (rs *relayStream) awaitSessions() {
	select {
	case <-rs.emptied:
	case <-time.After(relayEndWait):
		rs.h.log.Warn("hub: relayed sessions not torn down in time", "waited", relayEndWait)
	}
}

// inFrame is a client frame waiting in a session's inbox.
type inFrame struct {
	f    *corralv1.ClientFrame
	size int
}

// relayTransport is one session of a Relay stream. The session's writer
// calls writeFrame, writeDelivery, closeWith and abort; the stream's
// reader calls receive and peerClose.
type relayTransport struct {
	rs     *relayStream
	tag    uint64
	device string // RelayOpen.transport as a label: ws, grpc, other
	s      atomic.Pointer[session]

	peerClosed atomic.Bool   // the edge sent RelayClose: none goes back
	wake       chan struct{} // cap 1: a place in the queue came back; made by the first wait (rs.mu)

	// Guarded by rs.mu.
	queued  int  // frames in the stream's queue
	waiting bool // the writer waits for a place
	gone    bool // removed from the stream

	mu       sync.Mutex // guards the inbox
	inbox    []inFrame
	inBytes  int
	handling bool
}

var (
	_ transport         = (*relayTransport)(nil)
	_ aborter           = (*relayTransport)(nil)
	_ livenessByTheEdge = (*relayTransport)(nil)
)

// livenessByTheEdge is a transport whose peer keeps the session alive
// itself: the hub sends it no ping and closes it for no silence.
type livenessByTheEdge interface{ pingsByTheEdge() }

func (t *relayTransport) pingsByTheEdge() {}

func (t *relayTransport) kind() string { return "relay" }

func (t *relayTransport) writeFrame(f *corralv1.ServerFrame) error {
	if !t.fits(f, -1) {
		return errRelayTooBig
	}
	return t.send(&corralv1.RelayFrame{Session: t.tag, Frame: &corralv1.RelayFrame_Server{Server: f}})
}

func (t *relayTransport) writeDelivery(d *delivery) error {
	b, err := t.rs.h.relayEncoded(d)
	if err != nil {
		return err
	}
	// The frame goes as RelayFrame's field 4 (server), encoded once for
	// every relayed session: a RelayFrame carrying it as unknown bytes is
	// the same on the wire as one with the server field set.
	f := &corralv1.RelayFrame{Session: t.tag}
	f.ProtoReflect().SetUnknown(b)
	return t.send(f)
}

// relayEncoded returns d's frame encoded as RelayFrame field 4 (server),
// once per delivery, or an error when it is above max_frame_bytes (a Send
// of it would fail the whole stream).
func (h *Hub) relayEncoded(d *delivery) (protoreflect.RawFields, error) {
	d.relayOnce.Do(func() {
		enc, err := d.encoded(h.codecs[wire.FormatProto])
		if err != nil {
			d.relayErr = errRelayTooBig
			return
		}
		b := make([]byte, 0, len(enc)+protowire.SizeTag(4)+protowire.SizeVarint(uint64(len(enc))))
		b = protowire.AppendTag(b, 4, protowire.BytesType)
		d.relayed = protowire.AppendBytes(b, enc)
	})
	return d.relayed, d.relayErr
}

// fits reports whether f, in a RelayFrame, is within the gRPC send limit:
// a Send above it would fail the whole stream. estimate is about f's size
// (a delivery's), -1 when unknown: f is measured only when it may be
// near the limit.
func (t *relayTransport) fits(f *corralv1.ServerFrame, estimate int) bool {
	limit := t.rs.h.codecCheck.Config().MaxFrameBytes + relayFrameOverhead - relayWrapBytes
	if estimate >= 0 && estimate+64 <= limit {
		return true
	}
	return proto.Size(f) <= limit
}

// send queues f on the stream once the session has a place there. The
// wait has no timer of its own: a stream whose writer moves is slow, and
// the session's outbound queue (its slow-consumer policy) takes the
// strain; a stream whose writer does not move is cut by its watchdog.
func (t *relayTransport) send(f *corralv1.RelayFrame) error {
	rs := t.rs
	rs.mu.Lock()
	for t.queued >= relayInflight && !rs.ended {
		t.waiting = true
		if t.wake == nil {
			t.wake = make(chan struct{}, 1) // an idle session keeps none
		}
		wake := t.wake
		rs.mu.Unlock()
		select {
		case <-wake:
		case <-rs.done:
		}
		rs.mu.Lock()
	}
	t.waiting = false
	if rs.ended {
		rs.mu.Unlock()
		<-rs.done // the session is closing by then
		return errRelayEnded
	}
	t.queued++
	rs.push(relayItem{f: f, t: t})
	rs.mu.Unlock()
	return nil
}

// sent gives the session back the place of a frame written; rs.mu is held.
func (t *relayTransport) sent() {
	t.queued--
	if t.waiting {
		select {
		case t.wake <- struct{}{}:
		default:
		}
	}
}

// closeWith ends the session on the stream: a RelayClose with c follows
// the session's last frames, unless the edge closed it (or the stream
// ended). The RelayClose takes no place: one per session.
func (t *relayTransport) closeWith(c wire.Close, _ time.Duration) { t.leave(c) }

// abort is closeWith: nothing of a relayed session can be cut but the
// tag, and the edge must still learn that it ended.
func (t *relayTransport) abort(c wire.Close) { t.leave(c) }

func (t *relayTransport) leave(c wire.Close) {
	rs := t.rs
	rs.mu.Lock()
	if t.gone {
		rs.mu.Unlock()
		return
	}
	t.gone = true
	delete(rs.sessions, t.tag)
	if !rs.ended && !t.peerClosed.Load() {
		rs.push(relayItem{f: relayCloseFrame(t.tag, c)})
	}
	empty := len(rs.sessions) == 0
	if empty && rs.ended {
		rs.emptiedLocked()
	}
	rs.mu.Unlock()
	rs.h.metrics.relaySessions.WithLabelValues(t.device).Dec()
	if empty {
		rs.endIfIdle(rs.h.goAwayClose("hub draining"))
	}
}

// receive hands a client frame to the session's inbox, handled in order
// on a worker, never on the stream's reader. The inbox holds at most
// session.outbound_bytes (always one frame): a session is given the same
// budget for what it sent and is not handled yet as for what waits to be
// sent to it; beyond it the session is closed with 4002.
func (t *relayTransport) receive(f *corralv1.ClientFrame) {
	s := t.s.Load()
	size := proto.Size(f)
	if size > t.rs.h.codecCheck.Config().MaxFrameBytes {
		s.close(wire.Close{Code: wire.CloseTooBig, Text: "frame too big"}, true)
		return
	}
	t.mu.Lock()
	if len(t.inbox) > 0 && t.inBytes+size > t.rs.h.sess.OutboundBytes {
		t.mu.Unlock()
		s.close(wire.Close{Code: wire.CloseRateLimited, RetryAfter: time.Second, Text: "frames faster than the hub handles them"}, true)
		return
	}
	t.inbox = append(t.inbox, inFrame{f: f, size: size})
	t.inBytes += size
	start := !t.handling
	t.handling = true
	t.mu.Unlock()
	if start {
		t.rs.h.workers.Go(t.handleInbox)
	}
}

// handleInbox handles the inbox's frames in order until it is empty.
func (t *relayTransport) handleInbox() {
	s := t.s.Load()
	for {
		t.mu.Lock()
		if len(t.inbox) == 0 {
			t.inbox, t.handling = nil, false
			t.mu.Unlock()
			return
		}
		in := t.inbox[0]
		t.inbox[0] = inFrame{}
		t.inbox = t.inbox[1:]
		t.inBytes -= in.size
		t.mu.Unlock()
		s.handle(t.rs.ctx, in.f)
	}
}

// peerClose is the edge's RelayClose: the device is gone.
func (t *relayTransport) peerClose(rc *corralv1.RelayClose) {
	t.peerClosed.Store(true)
	code := wire.CloseCode(min(rc.GetCode(), math.MaxUint16))
	if code == 0 {
		code = wire.CloseNormal
	}
	text := rc.GetReason()
	if text == "" {
		text = "peer closed"
	}
	if s := t.s.Load(); s != nil {
		s.peerGone(wire.Close{Code: code, Text: truncate(text, 123)})
	}
}

// closeSession closes the session with c, announced.
func (t *relayTransport) closeSession(c wire.Close) {
	if s := t.s.Load(); s != nil {
		s.close(c, true)
	}
}
