package edge

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"net"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/corralhq/corral/wire"
	"github.com/corralhq/corral/wire/corralv1"
)

// The upstream side: one grpc.ClientConn (one HTTP/2 connection) per origin
// address, relay.streams Relay streams on it, and the device sessions
// spread over the streams, each tagged with a number unique on its stream.
// Each stream has one receiving goroutine, which hands every frame to its
// session's bounded queue (never blocking on a device), and one sending
// goroutine, which drains the stream's send queue.

// upstream holds the connections to the origins.
type upstream struct {
	e      *Edge
	ctx    context.Context // the streams' context, cancelled by close
	cancel context.CancelFunc

	mu    sync.Mutex
	conns map[string]*originConn
	shut  bool
}

func newUpstream(e *Edge) *upstream {
	ctx, cancel := context.WithCancel(context.Background())
	return &upstream{e: e, ctx: ctx, cancel: cancel, conns: make(map[string]*originConn)}
}

// originConn is the connection to one origin address and its streams.
type originConn struct {
	u    *upstream
	addr string
	cc   *grpc.ClientConn

	mu      sync.Mutex // serialises opening streams
	streams []*relayStream

	// stateMu orders the reports of the transport's state (watch and a
	// failed stream open) so that the last one reflects the newest state.
	// Lock order: oc.mu, then stateMu, then Origins.mu (Lookup).
	stateMu sync.Mutex
	lost    bool // guarded by stateMu: the connection failed since it was last READY
}

// relayStream is one Relay stream and the sessions on it.
type relayStream struct {
	oc     *originConn
	stream corralv1.Corral_RelayClient
	cancel context.CancelFunc

	mu       sync.Mutex
	sessions map[uint64]*session
	nextTag  uint64
	broken   bool

	sendMu    sync.Mutex
	sendCond  *sync.Cond // on sendMu: the queue has frames, or room
	sendQ     []*corralv1.RelayFrame
	sendBytes int
	sendDone  bool // the stream is over: frames are dropped
}

// open puts s on a Relay stream of an origin picked for it, and tells the
// hub (RelayOpen). It returns false when no origin can take the session.
func (u *upstream) open(s *session, key string) bool {
	e := u.e
	for attempt := 0; attempt < 2; attempt++ {
		o, err := e.origins.Pick(key)
		if err != nil {
			return false
		}
		rs, err := u.stream(o.Addr())
		if err != nil {
			// stream marked the transport down if the connection is
			// refused or lost (originConn.report), so the next attempt
			// picks another origin without waiting for the watcher.
			e.log.Warn("edge: relay stream failed to open", "origin", o.Addr(), "err", err)
			o.HandshakeDone(OriginFailure)
			continue
		}
		tag, ok := rs.add(s, &corralv1.RelayOpen{RemoteAddr: s.dev.remoteAddr(), Transport: s.dev.kind()})
		if !ok {
			o.HandshakeDone(OriginNeutral)
			continue
		}
		s.mu.Lock()
		closing := s.closing
		if !closing {
			s.up, s.tag, s.origin, s.hsOpen = rs, tag, o, true
			s.helloAt.Store(e.now().UnixNano())
			s.state.Store(stateHello)
		}
		s.mu.Unlock()
		if closing {
			// Closed meanwhile: the hub has the Open, so it gets the end.
			rs.remove(tag)
			rs.send(&corralv1.RelayFrame{Session: tag, Frame: &corralv1.RelayFrame_Close{Close: &corralv1.RelayClose{
				Code: uint32(wire.CloseNormal), Reason: "device gone",
			}}}, false)
			o.HandshakeDone(OriginNeutral)
			return true
		}
		return true
	}
	return false
}

// stream returns the least loaded live stream to addr, opening the
// connection and streams as needed.
func (u *upstream) stream(addr string) (*relayStream, error) {
	oc, err := u.conn(addr)
	if err != nil {
		return nil, err
	}
	oc.mu.Lock()
	defer oc.mu.Unlock()
	var best *relayStream
	bestN, free := -1, -1
	for i, rs := range oc.streams {
		if rs == nil || rs.isBroken() {
			if free < 0 {
				free = i
			}
			continue
		}
		if n := rs.count(); best == nil || n < bestN {
			best, bestN = rs, n
		}
	}
	if free >= 0 && (best == nil || bestN > 0) {
		rs, err := oc.openStream()
		if err != nil {
			if best != nil {
				return best, nil
			}
			oc.report(true)
			return nil, err
		}
		oc.streams[free] = rs
		return rs, nil
	}
	if best == nil {
		return nil, errors.New("edge: no relay stream")
	}
	return best, nil
}

// conn returns the connection to addr, creating it (without I/O: gRPC
// connects on the first stream).
func (u *upstream) conn(addr string) (*originConn, error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.shut {
		return nil, errors.New("edge: stopped")
	}
	if oc, ok := u.conns[addr]; ok {
		return oc, nil
	}
	maxMsg := wire.HardMaxFrameBytes + 1<<10
	cc, err := grpc.NewClient("passthrough:///"+addr,
		grpc.WithTransportCredentials(u.credentials(addr)),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(maxMsg), grpc.MaxCallSendMsgSize(maxMsg)),
		grpc.WithConnectParams(grpc.ConnectParams{Backoff: redialBackoff, MinConnectTimeout: 5 * time.Second}),
		// The edge holds the connection while the origin is in the
		// answer: an idle channel would read as a lost transport.
		grpc.WithIdleTimeout(0),
		// The hub's enforcement policy allows a ping every 10 s with
		// streams open.
		grpc.WithKeepaliveParams(keepalive.ClientParameters{Time: 30 * time.Second, Timeout: 10 * time.Second}),
	)
	if err != nil {
		return nil, err
	}
	oc := &originConn{u: u, addr: addr, cc: cc, streams: make([]*relayStream, u.e.relayCfg.Streams)}
	u.conns[addr] = oc
	go oc.watch()
	return oc, nil
}

// redialBackoff is the backoff between connection attempts to an origin
// whose transport is down: gRPC's connection backoff (1 s, times 1.6,
// +-20 % jitter) with its cap cut from 120 s to 30 s, so that a hub back
// on its address is found within about 30 s.
var redialBackoff = backoff.Config{BaseDelay: time.Second, Multiplier: 1.6, Jitter: 0.2, MaxDelay: 30 * time.Second}

// watch follows the connection's state until it is closed or the upstream
// stops, reports it to the origin (report), and re-dials a connection
// that went IDLE (after a transport was lost gRPC waits for an RPC;
// a failed attempt is retried by gRPC itself, with redialBackoff).
func (oc *originConn) watch() {
	ctx := oc.u.ctx
	for {
		st := oc.cc.GetState()
		if st == connectivity.Idle {
			oc.cc.Connect()
		}
		oc.report(false)
		if st == connectivity.Shutdown || !oc.cc.WaitForStateChange(ctx, st) {
			return
		}
	}
}

// report derives from the connection's state now, and failed (a stream
// failed to open on it), whether the origin's transport is down, and
// tells the origin of the address: down while the connection is not
// READY and failed since it last was (TRANSIENT_FAILURE, which gRPC keeps
// until a new attempt succeeds, or a stream refused). IDLE and CONNECTING
// alone are not down: a connection never tried yet, or one the hub closed
// with a GOAWAY (an idle connection after grpc_max_connection_idle), is
// re-dialled at once; a lost one fails that attempt. A connection closed
// (the origin left the answer) is no longer down.
func (oc *originConn) report(failed bool) {
	oc.stateMu.Lock()
	defer oc.stateMu.Unlock()
	switch st := oc.cc.GetState(); st {
	case connectivity.Ready, connectivity.Shutdown:
		oc.lost = false
	case connectivity.TransientFailure:
		oc.lost = true
	default: // IDLE, CONNECTING
		oc.lost = oc.lost || failed
	}
	if o := oc.u.e.origins.Lookup(oc.addr); o != nil {
		o.SetTransportDown(oc.lost)
	}
}

// credentials are those of the connection to addr: TLS with
// origins.tls, verifying the hub's certificate for server_name, else the
// origins' name, else the address's IP; plaintext without.
func (u *upstream) credentials(addr string) credentials.TransportCredentials {
	if u.e.upTLS == nil {
		return insecure.NewCredentials()
	}
	name := strings.TrimSuffix(u.e.cfg.Origins.Name, ".")
	if name == "" {
		name, _, _ = net.SplitHostPort(addr)
	}
	return credentials.NewTLS(u.e.upTLS.Config(addr, name)) // server_name, when set, wins
}

// openStream opens one Relay stream, authenticated with the relay key,
// and starts its two goroutines. oc.mu is held.
func (oc *originConn) openStream() (*relayStream, error) {
	e := oc.u.e
	ctx, cancel := context.WithCancel(oc.u.ctx)
	ctx = metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+e.relayKey)
	st, err := corralv1.NewCorralClient(oc.cc).Relay(ctx)
	if err != nil {
		cancel()
		return nil, err
	}
	rs := &relayStream{oc: oc, stream: st, cancel: cancel, sessions: make(map[uint64]*session)}
	rs.sendCond = sync.NewCond(&rs.sendMu)
	e.metrics.relayStreams.WithLabelValues(oc.addr).Inc()
	// The origin's failure count exists from its first stream, at zero, so
	// that rate() and alerts over it have a series before the first failure.
	e.metrics.streamFailures.WithLabelValues(oc.addr)
	go rs.recvLoop()
	go rs.sendLoop()
	return rs, nil
}

func (rs *relayStream) isBroken() bool {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	return rs.broken
}

func (rs *relayStream) count() int {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	return len(rs.sessions)
}

// add gives s a tag on the stream and queues its RelayOpen. The hub
// refuses an Open whose tag is not above the last one it saw (so a late
// frame of a closed session can never open a new one), so tags go up the
// stream in the order they are given: the Open is queued under the same
// lock that hands out the tag (lock order: relayStream.mu, then sendMu).
func (rs *relayStream) add(s *session, open *corralv1.RelayOpen) (uint64, bool) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if rs.broken {
		return 0, false
	}
	rs.nextTag++
	rs.sessions[rs.nextTag] = s
	rs.send(&corralv1.RelayFrame{Session: rs.nextTag, Frame: &corralv1.RelayFrame_Open{Open: open}}, false)
	return rs.nextTag, true
}

func (rs *relayStream) remove(tag uint64) {
	rs.mu.Lock()
	delete(rs.sessions, tag)
	rs.mu.Unlock()
}

// forget removes a torn-down session from its stream.
func (rs *relayStream) forget(s *session) {
	rs.mu.Lock()
	if rs.sessions[s.tag] == s {
		delete(rs.sessions, s.tag)
	}
	rs.mu.Unlock()
}

// send queues f for the stream. With wait, the caller (a device's reader)
// waits while the queue is full, which stops reading that device; without
// it (RelayOpen, RelayClose, frames from the receiving goroutine) f is
// queued whatever the bound.
func (rs *relayStream) send(f *corralv1.RelayFrame, wait bool) {
	size := proto.Size(f)
	limit := rs.oc.u.e.relayCfg.SendQueueBytes
	rs.sendMu.Lock()
	defer rs.sendMu.Unlock()
	for wait && !rs.sendDone && rs.sendBytes > 0 && rs.sendBytes+size > limit {
		rs.sendCond.Wait()
	}
	if rs.sendDone {
		return
	}
	rs.sendQ = append(rs.sendQ, f)
	rs.sendBytes += size
	rs.sendCond.Broadcast()
}

// sendLoop writes the queued frames to the stream, in order.
func (rs *relayStream) sendLoop() {
	for {
		rs.sendMu.Lock()
		for len(rs.sendQ) == 0 && !rs.sendDone {
			rs.sendCond.Wait()
		}
		if rs.sendDone {
			rs.sendMu.Unlock()
			return
		}
		batch := rs.sendQ
		rs.sendQ = nil
		rs.sendMu.Unlock()
		for i, f := range batch {
			if err := rs.stream.Send(f); err != nil {
				// Recv sees the cause and breaks the stream.
				rs.finishSends()
				return
			}
			size := proto.Size(f)
			batch[i] = nil
			rs.sendMu.Lock()
			rs.sendBytes -= size
			rs.sendCond.Broadcast()
			rs.sendMu.Unlock()
		}
	}
}

// finishSends ends the send side: queued frames are dropped and waiting
// devices released.
func (rs *relayStream) finishSends() {
	rs.sendMu.Lock()
	rs.sendDone = true
	rs.sendQ, rs.sendBytes = nil, 0
	rs.sendCond.Broadcast()
	rs.sendMu.Unlock()
}

// recvLoop demultiplexes the hub's frames by tag until the stream ends.
func (rs *relayStream) recvLoop() {
	e := rs.oc.u.e
	for {
		f, err := rs.stream.Recv()
		if err != nil {
			rs.fail(err)
			return
		}
		rs.mu.Lock()
		s := rs.sessions[f.GetSession()]
		rs.mu.Unlock()
		if s == nil {
			continue // a session that closed meanwhile
		}
		switch fr := f.GetFrame().(type) {
		case *corralv1.RelayFrame_Server:
			s.fromUpstream(fr.Server)
		case *corralv1.RelayFrame_Close:
			rs.remove(f.GetSession())
			s.upstreamClosed(wire.CloseFromRelay(fr.Close))
		default:
			e.log.Debug("edge: unexpected relay frame from the origin", "origin", rs.oc.addr)
		}
	}
}

// fail ends the stream after err: every session on it gets its GoAway and
// the origin is told.
func (rs *relayStream) fail(err error) {
	e := rs.oc.u.e
	rs.mu.Lock()
	rs.broken = true
	sessions := rs.sessions
	rs.sessions = make(map[uint64]*session)
	rs.mu.Unlock()
	rs.finishSends()
	rs.cancel()
	e.metrics.relayStreams.WithLabelValues(rs.oc.addr).Dec()
	stopping := rs.oc.u.ctx.Err() != nil
	if !stopping {
		code := status.Code(err)
		if code == codes.Unauthenticated || code == codes.PermissionDenied {
			e.log.Error("edge: the origin refused the relay key", "origin", rs.oc.addr, "err", err)
		} else if !errors.Is(err, io.EOF) {
			e.log.Warn("edge: relay stream broke", "origin", rs.oc.addr, "sessions", len(sessions), "err", err)
		}
		if o := rs.origin(); o != nil {
			o.Report(OriginFailure)
		}
		e.origins.Refresh() // the origin may have left the answer
		e.metrics.streamFailures.WithLabelValues(rs.oc.addr).Inc()
	}
	for _, s := range sessions {
		s.streamBroken()
	}
}

// retire closes the connections to the addresses that left the answer
// and carry no session any more (those with sessions stay until the
// sessions end: max_session_age moves them).
func (u *upstream) retire(list []*Origin) {
	in := make(map[string]bool, len(list))
	for _, o := range list {
		in[o.Addr()] = true
	}
	u.mu.Lock()
	var idle []*originConn
	for addr, oc := range u.conns {
		if !in[addr] && oc.idle() {
			idle = append(idle, oc)
			delete(u.conns, addr)
		}
	}
	u.mu.Unlock()
	for _, oc := range idle {
		_ = oc.cc.Close()
	}
}

// idle reports whether no stream of oc carries a session.
func (oc *originConn) idle() bool {
	oc.mu.Lock()
	defer oc.mu.Unlock()
	for _, rs := range oc.streams {
		if rs != nil && rs.count() > 0 {
			return false
		}
	}
	return true
}

// close ends every stream and connection (Run's end).
func (u *upstream) close() {
	u.mu.Lock()
	u.shut = true
	conns := u.conns
	u.conns = map[string]*originConn{}
	u.mu.Unlock()
	u.cancel()
	for _, oc := range conns {
		_ = oc.cc.Close()
	}
}

// tokenTenantHint reads the tenant claim of a JWT without verifying it:
// only to route (shard) the session. The hub verifies the token; nothing
// the edge trusts comes from here.
func tokenTenantHint(tok string) string {
	parts := strings.SplitN(tok, ".", 3)
	if len(parts) != 3 || len(parts[1]) > 8<<10 {
		return ""
	}
	b, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return ""
	}
	var c struct {
		Tenant string `json:"tenant"`
	}
	if json.Unmarshal(b, &c) != nil {
		return ""
	}
	return c.Tenant
}

// origin returns the Origin of the stream's address in the current set,
// nil when it left the answer.
func (rs *relayStream) origin() *Origin {
	for _, o := range rs.oc.u.e.origins.List() {
		if o.Addr() == rs.oc.addr {
			return o
		}
	}
	return nil
}
