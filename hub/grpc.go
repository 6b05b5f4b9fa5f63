package hub

import (
	"context"
	"errors"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/corralhq/corral/internal/sendwatch"
	"github.com/corralhq/corral/wire"
	"github.com/corralhq/corral/wire/corralv1"
)

// grpcService implements corralv1.CorralServer.
type grpcService struct {
	corralv1.UnimplementedCorralServer
	h *Hub
}

func (h *Hub) newGRPCServer() *grpc.Server {
	c := h.conns
	var creds []grpc.ServerOption
	if h.tls != nil { // grpcs; the handshake is bounded by ConnectionTimeout
		creds = append(creds, grpc.Creds(credentials.NewTLS(h.tls.ServerConfig("h2"))))
	}
	s := grpc.NewServer(append(creds,
		// Room for a frame of max_frame_bytes in a RelayFrame, and on
		// receipt for one up to twice that, which closes its own session
		// (1009) rather than the whole Relay stream: Connect and Relay
		// hold the frames themselves to max_frame_bytes.
		grpc.MaxRecvMsgSize(relayRecvLimit(h.codecCheck.Config().MaxFrameBytes)),
		grpc.MaxSendMsgSize(h.codecCheck.Config().MaxFrameBytes+relayFrameOverhead),
		// Every connection is bounded: a silent TCP connection by the
		// handshake timeout, one with no stream (a bare HTTP/2 preface
		// included) by MaxConnectionIdle, a vanished peer by the
		// keepalive pings, a client pinging too often by the policy.
		grpc.ConnectionTimeout(c.GRPCHandshakeTimeout),
		grpc.KeepaliveParams(keepalive.ServerParameters{
			MaxConnectionIdle: c.GRPCMaxConnectionIdle,
			Time:              c.GRPCKeepaliveTime,
			Timeout:           c.GRPCKeepaliveTimeout,
		}),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: c.GRPCMinPingInterval}),
	)...)
	corralv1.RegisterCorralServer(s, &grpcService{h: h})
	h.registerGRPCOps(s)
	return s
}

// grpcTransport adapts a Connect stream to a session.
type grpcTransport struct {
	stream corralv1.Corral_ConnectServer
	once   sync.Once
	done   chan struct{}
	final  wire.Close // written before done is closed

	// A Send blocks while the peer does not read (flow control). The
	// watch closes the session with 4000 when one has been blocked for
	// the write timeout (then abort unblocks it).
	s     atomic.Pointer[session]
	watch sendwatch.Watch // Send from the writer goroutine only
}

func (t *grpcTransport) kind() string { return "grpc" }

func (t *grpcTransport) writeFrame(f *corralv1.ServerFrame) error { return t.send(f) }

func (t *grpcTransport) writeDelivery(d *delivery) error { return t.send(d.frame) }

func (t *grpcTransport) send(f *corralv1.ServerFrame) error {
	return t.watch.Send(func() error { return t.stream.Send(f) })
}

// stalled runs when a Send is still blocked after the write timeout: the
// peer reads nothing.
func (t *grpcTransport) stalled() {
	if s := t.s.Load(); s != nil {
		s.close(wire.Close{Code: wire.CloseSlowConsumer, Text: "the peer does not read"}, true)
	}
}

// blocksWrites marks grpcTransport as a blockingWriter.
func (t *grpcTransport) blocksWrites() {}

func (t *grpcTransport) closeWith(c wire.Close, _ time.Duration) {
	t.once.Do(func() {
		t.final = c
		close(t.done)
	})
}

// abort ends the stream now: the handler returns, which cancels the
// stream's context and unblocks a Send stuck on flow control.
func (t *grpcTransport) abort(c wire.Close) { t.closeWith(c, 0) }

// Connect is one session over gRPC. The handler's goroutine waits for the
// session to end and returns its close as the stream status; a second
// goroutine reads frames.
func (g *grpcService) Connect(stream corralv1.Corral_ConnectServer) error {
	h := g.h
	if h.draining.Load() {
		return h.goAwayClose("hub draining").Status().Err()
	}
	t := &grpcTransport{stream: stream, done: make(chan struct{})}
	t.watch.Timeout, t.watch.Stalled = h.sess.WriteTimeout, t.stalled
	s := h.newSession(t)
	t.s.Store(s)
	ctx := stream.Context()
	go func() {
		for {
			f, err := stream.Recv()
			if err != nil {
				c := wire.Close{Code: wire.CloseNormal, Text: "peer closed"}
				if !errors.Is(err, io.EOF) && status.Code(err) != codes.Canceled {
					c = wire.CloseOf(err)
					if status.Code(err) == codes.ResourceExhausted {
						c = wire.Close{Code: wire.CloseTooBig, Text: "frame too big"}
					}
				}
				s.mu.Lock()
				alreadyClosing := s.closing
				s.mu.Unlock()
				if !alreadyClosing {
					s.close(c, c.Code != wire.CloseNormal)
				}
				return
			}
			if f.GetFrame() == nil {
				s.close(wire.Close{Code: wire.CloseProtocolError, Text: "empty frame"}, true)
				return
			}
			if proto.Size(f) > h.codecCheck.Config().MaxFrameBytes {
				s.close(wire.Close{Code: wire.CloseTooBig, Text: "frame too big"}, true)
				return
			}
			s.handle(ctx, f)
		}
	}()
	select {
	case <-t.done:
	case <-ctx.Done():
		s.peerGone(wire.Close{Code: wire.CloseNormal, Text: "stream ended"})
		<-t.done
	}
	if t.final.Code == wire.CloseNormal {
		return nil
	}
	return t.final.Status().Err()
}

// Publish is the gRPC publish API for backends, authenticated by an API key
// in the "authorization" metadata ("Bearer <key>").
func (g *grpcService) Publish(ctx context.Context, req *corralv1.PublishRequest) (*corralv1.Published, error) {
	h := g.h
	key := ""
	if md, ok := metadata.FromIncomingContext(ctx); ok {
		if v := md.Get("authorization"); len(v) > 0 {
			key = strings.TrimPrefix(v[0], "Bearer ")
		}
	}
	if err := h.checkAPIKey(key, req.GetTenant()); err != nil {
		return nil, wire.CloseOf(err).Status().Err()
	}
	p := req.GetPublish()
	// publishVia validates the publish, as for every publish path.
	res, err := h.publishVia(ctx, PublishRequest{
		Tenant: req.GetTenant(), Channel: p.GetChannel(), Priority: p.GetPriority(), Data: p.GetData(), ClientMessageID: p.GetClientMessageId(),
	}, "grpc")
	if err != nil {
		return nil, wire.CloseOf(err).Status().Err()
	}
	return res, nil
}
