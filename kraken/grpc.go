package kraken

import (
	"context"
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/corralhq/corral/wire"
	"github.com/corralhq/corral/wire/corralv1"
)

// gRPC devices (population.protocol: grpc). Each device holds what a
// real gRPC device holds: its own HTTP/2 connection (a grpc-go
// ClientConn of one TCP connection from the device's source address) and
// one corral.v1 Connect stream on it. The stream's frames go to the same
// device code as a WebSocket's (device.frame, device.upgraded,
// device.ended), so reconnects, resume positions, acknowledgements and
// every count are the WebSocket devices' own.
//
// grpc-go has no event-driven mode: a held gRPC device costs the
// goroutine that waits in Recv, and grpc-go's own per connection (its
// HTTP/2 reader, its writer, the ClientConn's serializers) with their
// buffers. kraken/README.md ("gRPC devices") gives the measured cost.

// grpcConn is one attempt's gRPC connection and Connect stream.
type grpcConn struct {
	dev    *device
	cc     *grpc.ClientConn
	stream corralv1.Corral_ConnectClient
	cancel context.CancelFunc

	sendMu sync.Mutex // grpc-go's Send is not safe for concurrent use

	tcp       atomic.Pointer[net.Conn] // the connection the dialer made, for a cut
	dialed    atomic.Bool              // the ClientConn dialled once: never again
	dialErr   atomic.Pointer[error]    // the TCP connect's failure
	tlsFailed atomic.Bool              // the TLS handshake failed (grpcs)
	ourCut    atomic.Bool              // cut by kraken (a drop, a timeout)
	done      atomic.Bool              // the end was reported
}

var _ conn = (*grpcConn)(nil)

// grpcBuffer is the size of each gRPC connection's read and write
// buffers, in place of grpc-go's 32 KiB (the write buffer is released
// while idle, grpc-go's default): the session protocol's frames are
// small, and the defaults cost 14 KiB more per held device.
const grpcBuffer = 4 << 10

// dialGRPC opens the device's ClientConn and Connect stream to ep, sends
// Hello and starts the goroutine that reads the stream. It runs on the
// attempt's own goroutine (grpc-go's connect and the stream's start
// block); failures go back to the device.
func (e *engine) dialGRPC(ctx context.Context, j dialJob, ep endpoint) {
	g := &grpcConn{dev: j.dev}
	dialer := func(ctx context.Context, addr string) (net.Conn, error) {
		if g.dialed.Swap(true) {
			// grpc-go re-dials a broken connection by itself; a device's
			// reconnect is kraken's (its backoff), never grpc-go's.
			return nil, errors.New("kraken: one connection per attempt")
		}
		d := net.Dialer{Control: bindNoPort}
		if j.src.IsValid() {
			d.LocalAddr = &net.TCPAddr{IP: j.src.AsSlice()}
		}
		c, err := d.DialContext(ctx, "tcp", addr)
		if err != nil {
			g.dialErr.Store(&err)
			return nil, err
		}
		g.tcp.Store(&c)
		j.dev.connected(j.gen)
		return c, nil
	}
	// The authority is the URL's host:port; over TLS grpc-go takes it
	// from the server name (the URL's host), and refuses both.
	creds := grpc.WithTransportCredentials(insecure.NewCredentials())
	authority := grpc.WithAuthority(ep.host)
	if ep.tls {
		creds = grpc.WithTransportCredentials(timedCreds{TransportCredentials: credentials.NewTLS(j.dev.r.tlsConfig(j.dev, ep, "h2")), r: j.dev.r, failed: &g.tlsFailed})
		authority = grpc.EmptyDialOption{}
	}
	cc, err := grpc.NewClient("passthrough:///"+ep.addr, creds, authority,
		grpc.WithContextDialer(dialer),
		grpc.WithDisableRetry(),
		grpc.WithDisableServiceConfig(),
		grpc.WithReadBufferSize(grpcBuffer),
		grpc.WithWriteBufferSize(grpcBuffer),
	)
	if err != nil {
		j.dev.dialFailed(j.gen, "dial_error")
		return
	}
	g.cc = cc
	sctx, cancel := context.WithCancel(context.Background())
	g.cancel = cancel
	stop := context.AfterFunc(ctx, cancel) // the dial's timeout bounds the stream's start only
	g.stream, err = corralv1.NewCorralClient(cc).Connect(sctx, grpc.WaitForReady(false))
	stopped := stop()
	if err != nil || !stopped {
		g.shut()
		reason := "dial_error"
		if p := g.dialErr.Load(); p != nil {
			reason = dialReason(*p)
		} else if ctx.Err() != nil {
			reason = dialReason(ctx.Err())
		} else if g.tlsFailed.Load() {
			reason = "tls"
		}
		j.dev.dialFailed(j.gen, reason)
		return
	}
	if !j.dev.attach(j.gen, g) {
		g.shut()
		return
	}
	j.dev.upgraded(g) // sends Hello
	go g.read()
}

// read hands every frame of the stream to the device, then its end.
func (g *grpcConn) read() {
	for {
		f, err := g.stream.Recv()
		if err != nil {
			reason, cl := g.endOf(err)
			g.end(reason, cl)
			g.shut()
			return
		}
		g.dev.frame(g, f)
	}
}

// endOf reads the end of the stream as the device counts it: a stream
// the server ended with a status is its close (the close code corral's
// statuses carry, the retry hint of their RetryInfo or of the
// grpc-retry-pushback-ms trailer; OK is a normal close); a connection
// that broke (grpc-go's own Unavailable, with no detail: the transport
// ended without a status) or that kraken cut is "cut", as a WebSocket
// closed without a frame is.
func (g *grpcConn) endOf(err error) (string, wire.Close) {
	if g.ourCut.Load() {
		return "cut", wire.Close{Code: closeAbnormal}
	}
	if errors.Is(err, io.EOF) {
		return "", wire.Close{Code: wire.CloseNormal}
	}
	st, ok := status.FromError(err)
	if !ok || st.Code() == codes.Unavailable && len(st.Details()) == 0 || st.Code() == codes.Canceled {
		return "cut", wire.Close{Code: closeAbnormal}
	}
	return "", wire.CloseFromStream(err, g.stream.Trailer())
}

// end reports the end of the connection to the device, once.
func (g *grpcConn) end(reason string, cl wire.Close) {
	if g.done.Swap(true) {
		return
	}
	g.dev.ended(g, reason, cl)
}

// shut releases the stream and the ClientConn.
func (g *grpcConn) shut() {
	if g.cancel != nil {
		g.cancel()
	}
	if g.cc != nil {
		_ = g.cc.Close()
	}
}

func (g *grpcConn) sendFrame(f *corralv1.ClientFrame) error {
	g.sendMu.Lock()
	defer g.sendMu.Unlock()
	return g.stream.Send(f)
}

// cut closes the TCP connection under the stream, as a network drop
// would: the server sees the connection break, not the stream end.
func (g *grpcConn) cut() {
	g.ourCut.Store(true)
	if c := g.tcp.Load(); c != nil {
		_ = (*c).Close()
		return
	}
	g.shut()
}

// close ends the stream as a client that leaves (the server reads its
// end, then the connection closes).
func (g *grpcConn) close(wire.CloseCode) {
	g.done.Store(true) // the device is stopping: nothing to report
	g.sendMu.Lock()
	_ = g.stream.CloseSend()
	g.sendMu.Unlock()
	g.shut()
}
