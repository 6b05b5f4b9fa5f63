package client

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/lxzan/gws"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/corralhq/corral/internal/tlssession"
	"github.com/corralhq/corral/wire"
	"github.com/corralhq/corral/wire/corralv1"
)

// conn is one connection to a server, over either transport.
type conn interface {
	send(f *corralv1.ClientFrame) error
	// recv returns the next frame, or the Close that ended the connection.
	recv() (*corralv1.ServerFrame, error)
	close()
}

// dial connects to ep: to its resolved address, with the name as given
// for TLS (ServerName from tlsCfg or the host) and the WebSocket Host, and
// tlsCfg's session cache seen per resolved address.
func dial(ctx context.Context, ep endpoint, tlsCfg *tls.Config, json bool) (conn, error) {
	var tc *tls.Config
	if ep.secure {
		tc = &tls.Config{MinVersion: tls.VersionTLS12}
		if tlsCfg != nil {
			tc = tlsCfg.Clone()
		}
		if tc.ServerName == "" {
			tc.ServerName = ep.host
		}
		// Tickets per address dialled, not per server name: the servers
		// behind one name each seal tickets with keys of their own.
		tc.ClientSessionCache = tlssession.PerAddress(tc.ClientSessionCache, ep.dialAddr())
	}
	if ep.transport == "grpc" {
		return dialGRPC(ctx, ep, tc)
	}
	return dialWS(ctx, ep, tc, json)
}

// gRPC.

type grpcConn struct {
	cc     *grpc.ClientConn
	stream corralv1.Corral_ConnectClient
	cancel context.CancelFunc
}

func dialGRPC(ctx context.Context, ep endpoint, tc *tls.Config) (*grpcConn, error) {
	// The name as given is the authority: the TLS server name (which
	// grpc-go takes as the authority) or host:port.
	opts := []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithAuthority(net.JoinHostPort(ep.host, ep.port))}
	if tc != nil {
		opts = []grpc.DialOption{grpc.WithTransportCredentials(credentials.NewTLS(tc))}
	}
	target := ep.dialAddr()
	cc, err := grpc.NewClient("passthrough:///"+target, opts...)
	if err != nil {
		return nil, fmt.Errorf("client: %w", err)
	}
	sctx, cancel := context.WithCancel(context.Background())
	stop := context.AfterFunc(ctx, cancel) // the dial deadline applies to the stream start only
	stream, err := corralv1.NewCorralClient(cc).Connect(sctx, grpc.WaitForReady(false))
	stop()
	if err != nil {
		cancel()
		_ = cc.Close()
		return nil, fmt.Errorf("client: connect %s: %w", target, err)
	}
	return &grpcConn{cc: cc, stream: stream, cancel: cancel}, nil
}

func (g *grpcConn) send(f *corralv1.ClientFrame) error { return g.stream.Send(f) }

func (g *grpcConn) recv() (*corralv1.ServerFrame, error) {
	f, err := g.stream.Recv()
	if errors.Is(err, io.EOF) {
		return nil, wire.Close{Code: wire.CloseNormal, Text: "stream ended"} // the server ended the stream with OK
	}
	if err != nil {
		// A google.rpc.RetryInfo detail is its hint, else the
		// grpc-retry-pushback-ms trailer.
		return nil, wire.CloseFromStream(err, g.stream.Trailer())
	}
	return f, nil
}

func (g *grpcConn) close() {
	g.cancel()
	_ = g.cc.Close()
}

// WebSocket.

type wsConn struct {
	c     *gws.Conn
	codec *wire.Codec
	op    gws.Opcode
	in    chan *corralv1.ServerFrame
	once  sync.Once
	done  chan struct{}
	mu    sync.Mutex
	final error
}

type wsEvents struct{ w *wsConn }

func (e wsEvents) OnOpen(*gws.Conn)               {}
func (e wsEvents) OnPing(c *gws.Conn, p []byte)   { _ = c.WritePong(p) }
func (e wsEvents) OnPong(*gws.Conn, []byte)       {}
func (e wsEvents) OnClose(_ *gws.Conn, err error) { e.w.finish(closeOfWS(err)) }
func (e wsEvents) OnMessage(_ *gws.Conn, m *gws.Message) {
	defer m.Close()
	w := e.w
	var f corralv1.ServerFrame
	if err := w.codec.DecodeServerFrame(m.Bytes(), &f); err != nil {
		w.finish(wire.CloseOf(err))
		w.c.WriteClose(uint16(wire.CloseOf(err).Code), nil)
		return
	}
	select {
	case w.in <- &f:
	case <-w.done:
	}
}

func closeOfWS(err error) error {
	var ce *gws.CloseError
	if errors.As(err, &ce) {
		retry, within, text := wire.ParseReason(string(ce.Reason))
		return wire.Close{Code: wire.CloseCode(ce.Code), RetryAfter: retry, RetryWithin: within, Text: text}
	}
	return wire.Close{Code: wire.CloseGoingAway, Text: fmt.Sprint(err)}
}

// wsDialer connects a WebSocket to the endpoint's resolved address
// whatever the URL's host is.
type wsDialer struct {
	ctx  context.Context
	addr string
}

func (d wsDialer) Dial(network, _ string) (net.Conn, error) {
	var nd net.Dialer
	return nd.DialContext(d.ctx, network, d.addr)
}

func dialWS(ctx context.Context, ep endpoint, tc *tls.Config, json bool) (*wsConn, error) {
	url := ep.url()
	format := wire.FormatProto
	op := gws.OpcodeBinary
	if json {
		format, op = wire.FormatJSON, gws.OpcodeText
	}
	codec, err := wire.NewCodec(format, wire.Config{MaxFrameBytes: 16 << 20})
	if err != nil {
		return nil, err
	}
	w := &wsConn{codec: codec, op: op, in: make(chan *corralv1.ServerFrame, 64), done: make(chan struct{})}
	dl, _ := ctx.Deadline()
	opt := &gws.ClientOption{
		Addr:               url,
		RequestHeader:      http.Header{"Sec-WebSocket-Protocol": []string{format.Subprotocol()}},
		ReadMaxPayloadSize: 16 << 20,
		TlsConfig:          tc,
		NewDialer:          func() (gws.Dialer, error) { return wsDialer{ctx: ctx, addr: ep.dialAddr()}, nil },
	}
	if !dl.IsZero() {
		opt.HandshakeTimeout = max(1, time.Until(dl))
	}
	c, resp, err := gws.NewClient(wsEvents{w: w}, opt)
	if err != nil {
		if cl, ok := refusedUpgrade(resp); ok {
			return nil, cl
		}
		return nil, fmt.Errorf("client: dial %s: %w", url, err)
	}
	w.c = c
	go c.ReadLoop()
	return w, nil
}

// refusedUpgrade reads an HTTP answer that refused the WebSocket upgrade:
// a 503 (a server or proxy shedding load, or draining) or a 429 is a 1013
// close with its Retry-After (delta-seconds or an HTTP date) as the retry
// hint, so that it goes through the reconnect schedule as a GoAway hint
// does. Any other answer is not a close (ok false).
func refusedUpgrade(resp *http.Response) (wire.Close, bool) {
	if resp == nil || resp.StatusCode != http.StatusServiceUnavailable && resp.StatusCode != http.StatusTooManyRequests {
		return wire.Close{}, false
	}
	return wire.Close{Code: wire.CloseTryAgainLater, Text: "upgrade refused: HTTP " + resp.Status, RetryAfter: retryAfterHeader(resp.Header.Get("Retry-After"), time.Now())}, true
}

// retryAfterHeader parses an HTTP Retry-After value (RFC 9110 10.2.3):
// delta-seconds, or an HTTP date taken relative to now. Anything else, or
// a date in the past, is no hint (0).
func retryAfterHeader(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	if n, err := strconv.ParseUint(v, 10, 32); err == nil {
		return time.Duration(n) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return t.Sub(now)
	}
	return 0
}

func (w *wsConn) finish(err error) {
	w.once.Do(func() {
		w.mu.Lock()
		w.final = err
		w.mu.Unlock()
		close(w.done)
	})
}

func (w *wsConn) send(f *corralv1.ClientFrame) error {
	b, err := w.codec.AppendClientFrame(nil, f)
	if err != nil {
		return err
	}
	return w.c.WriteMessage(w.op, b)
}

func (w *wsConn) recv() (*corralv1.ServerFrame, error) {
	select {
	case f := <-w.in:
		return f, nil
	case <-w.done:
		select {
		case f := <-w.in:
			return f, nil
		default:
		}
		w.mu.Lock()
		defer w.mu.Unlock()
		return nil, w.final
	}
}

func (w *wsConn) close() {
	_ = w.c.WriteClose(uint16(wire.CloseNormal), nil)
	w.finish(wire.Close{Code: wire.CloseNormal, Text: "client closed"})
}
