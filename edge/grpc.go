package edge

import (
	"errors"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/corralhq/corral/internal/sendwatch"
	"github.com/corralhq/corral/wire"
	"github.com/corralhq/corral/wire/corralv1"
)

// The device gRPC listener: Corral.Connect, the same session as over
// WebSocket; Publish is forwarded to a hub (publish.go); Relay is not
// served at the edge (Unimplemented).

// grpcService implements the Connect and Publish methods of
// corralv1.CorralServer.
type grpcService struct {
	corralv1.UnimplementedCorralServer
	e *Edge
}

func (e *Edge) newGRPCServer() *grpc.Server {
	max := e.check.Config().MaxFrameBytes
	var creds []grpc.ServerOption
	if e.tls != nil {
		creds = append(creds, grpc.Creds(credentials.NewTLS(e.tls.ServerConfig("h2"))))
	}
	s := grpc.NewServer(append(creds,
		grpc.MaxRecvMsgSize(max),
		grpc.MaxSendMsgSize(wire.HardMaxFrameBytes),
		// Every connection is bounded, as on the hub: a silent TCP
		// connection by the handshake timeout, one without a stream by
		// MaxConnectionIdle, a vanished peer by keepalive pings, a client
		// pinging too often by the enforcement policy.
		grpc.ConnectionTimeout(e.sess.HandshakeTimeout),
		grpc.KeepaliveParams(keepalive.ServerParameters{MaxConnectionIdle: 60 * time.Second, Time: 30 * time.Second, Timeout: 10 * time.Second}),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: 10 * time.Second}),
	)...)
	corralv1.RegisterCorralServer(s, &grpcService{e: e})
	healthpb.RegisterHealthServer(s, e.health)
	return s
}

// healthServices are the service names the edge's grpc.health.v1 reports,
// as the hub's: the whole server and the session service.
var healthServices = []string{"", corralv1.Corral_ServiceDesc.ServiceName}

// newHealthServer returns the health service, NOT_SERVING until Run
// follows Ready.
func newHealthServer() *health.Server {
	hs := health.NewServer()
	for _, svc := range healthServices {
		hs.SetServingStatus(svc, healthpb.HealthCheckResponse_NOT_SERVING)
	}
	return hs
}

// syncHealth sets the health service from Ready (NOT_SERVING while
// draining or before an origin is known).
func (e *Edge) syncHealth() {
	st := healthpb.HealthCheckResponse_SERVING
	if e.Ready() != nil {
		st = healthpb.HealthCheckResponse_NOT_SERVING
	}
	for _, svc := range healthServices {
		e.health.SetServingStatus(svc, st)
	}
}

// errStalled is the write error of a device that has read nothing for
// the write timeout.
var errStalled = errors.New("edge: write timeout: the device does not read")

func errStalledIs(err error) bool { return errors.Is(err, errStalled) }

// grpcDevice adapts a Connect stream to a session.
type grpcDevice struct {
	stream corralv1.Corral_ConnectServer
	addr   string
	once   sync.Once
	done   chan struct{}
	final  wire.Close // written before done is closed

	// A Send blocks while the device does not read (flow control): the
	// watch closes the session with 4000 when one has been blocked for
	// the write timeout.
	s     atomic.Pointer[session]
	watch sendwatch.Watch // Send from the writer goroutine only
}

func (d *grpcDevice) kind() string       { return "grpc" }
func (d *grpcDevice) remoteAddr() string { return d.addr }

func (d *grpcDevice) write(f *corralv1.ServerFrame) error {
	return d.watch.Send(func() error { return d.stream.Send(f) })
}

// stalled runs when a Send is still blocked after the write timeout.
func (d *grpcDevice) stalled() {
	if s := d.s.Load(); s != nil {
		s.close(wire.Close{Code: wire.CloseSlowConsumer, Text: "the device does not read"}, true)
	}
}

func (d *grpcDevice) closeWith(c wire.Close) {
	d.once.Do(func() {
		d.final = c
		close(d.done)
	})
}

func (d *grpcDevice) abort() {
	if s := d.s.Load(); s != nil {
		s.mu.Lock()
		c := wire.Close{Code: wire.CloseGoingAway, Text: "aborted"}
		if s.closeMsg != nil {
			c = *s.closeMsg
		}
		s.mu.Unlock()
		d.closeWith(c)
		return
	}
	d.closeWith(wire.Close{Code: wire.CloseGoingAway, Text: "aborted"})
}

// Connect is one device session over gRPC. The handler's goroutine waits
// for the session to end and returns its close as the stream status (with
// grpc-retry-pushback-ms for a close with a retry hint); a second
// goroutine reads frames.
func (g *grpcService) Connect(stream corralv1.Corral_ConnectServer) error {
	e := g.e
	if r, refuse := e.refuseConnection(); refuse {
		return grpcStatus(stream, refusal(wire.CloseTryAgainLater, r, "edge overloaded or draining"))
	}
	d := &grpcDevice{stream: stream, done: make(chan struct{})}
	d.watch.Timeout, d.watch.Stalled = e.sess.WriteTimeout, d.stalled
	if p, ok := peer.FromContext(stream.Context()); ok && p.Addr != nil {
		d.addr = p.Addr.String()
	}
	s := e.newSession(d)
	d.s.Store(s)
	ctx := stream.Context()
	go func() {
		for {
			f, err := stream.Recv()
			if err != nil {
				c := wire.Close{Code: wire.CloseNormal, Text: "device closed"}
				if !errors.Is(err, io.EOF) && status.Code(err) != codes.Canceled {
					c = wire.CloseFromStatus(err)
					if status.Code(err) == codes.ResourceExhausted {
						c = wire.Close{Code: wire.CloseTooBig, Text: "frame too big"}
					}
				}
				if c.Code == wire.CloseNormal {
					s.peerGone(c)
				} else {
					s.close(c, true)
				}
				return
			}
			if f.GetFrame() == nil {
				s.close(wire.Close{Code: wire.CloseProtocolError, Text: "empty frame"}, true)
				return
			}
			s.handle(f)
		}
	}()
	select {
	case <-d.done:
	case <-ctx.Done():
		s.peerGone(wire.Close{Code: wire.CloseNormal, Text: "stream ended"})
		<-d.done
	}
	return grpcStatus(stream, d.final)
}

// grpcStatus returns the stream status of c, and sets the
// grpc-retry-pushback-ms trailer when c carries a retry hint.
func grpcStatus(stream grpc.ServerStream, c wire.Close) error {
	if c.Code == wire.CloseNormal {
		return nil
	}
	if md := wire.PushbackTrailer(c); md != nil {
		stream.SetTrailer(md)
	}
	return c.Status().Err()
}
