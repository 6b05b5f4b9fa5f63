package edge

import (
	"context"
	"crypto/tls"
	"errors"
	"math/rand/v2"
	"net"
	"time"

	"github.com/corralhq/corral/internal/wsserve"
	"github.com/corralhq/corral/wire"
	"github.com/corralhq/corral/wire/corralv1"
)

// The device WebSocket listener, on internal/wsserve (the hub's nbio
// server): GET /v1/ws with the subprotocols of wire; an idle session holds
// no goroutine. An upgrade the edge refuses (draining, or the lifeboat
// stage) is answered 503 with Retry-After. With tls the listener serves
// wss (and HTTPS for other paths) from the same certificate and ticket
// keys as the gRPC listener; wsserve's tls.go says what a wss connection
// costs beyond a plain one.

// wsCloseLinger is how long a close waits, once the device has the close
// frame, for the device's own close frame (the hub's close_timeout).
const wsCloseLinger = time.Second

// wsServer is the edge's WebSocket listener.
type wsServer struct {
	e    *Edge
	srv  *wsserve.Server
	ln   net.Listener
	done chan struct{}
}

func (e *Edge) newWSServer() (*wsServer, error) {
	w := &wsServer{e: e, done: make(chan struct{})}
	srv, err := wsserve.New(wsserve.Config{
		Path: "/v1/ws", Subprotocols: wire.Subprotocols(), MaxFrameBytes: e.check.Config().MaxFrameBytes,
		HandshakeTimeout: e.sess.HandshakeTimeout, WriteTimeout: e.sess.WriteTimeout, Workers: e.workers,
		TLS: e.wsTLS(), Unserved: e.metrics.unserved.Inc, // TLS nil: plaintext
	}, wsHandler{e: e}, nil)
	if err != nil {
		return nil, err
	}
	w.srv = srv
	return w, nil
}

// wsTLS is the TLS configuration of the WebSocket listener, nil without
// tls.
func (e *Edge) wsTLS() *tls.Config {
	if e.tls == nil {
		return nil
	}
	return e.tls.ServerConfig("http/1.1")
}

// start binds addr and serves it.
func (w *wsServer) start(ctx context.Context, addr string) error {
	// No TCP keep-alive: sessions are kept by the edge's pings (as on the
	// hub).
	ln, err := (&net.ListenConfig{KeepAlive: -1}).Listen(ctx, "tcp", addr)
	if err != nil {
		return err
	}
	if err := w.srv.Start(); err != nil {
		_ = ln.Close()
		return err
	}
	w.ln = ln
	go func() {
		defer close(w.done)
		if err := w.srv.Serve(ln); err != nil {
			w.e.log.Warn("edge: http", "err", err)
		}
	}()
	return nil
}

func (w *wsServer) addr() net.Addr { return w.ln.Addr() }

// addrString is the address for logs, "" without a listener.
func (w *wsServer) addrString() string {
	if w == nil {
		return ""
	}
	return w.ln.Addr().String()
}

func (w *wsServer) closeListener() { _ = w.ln.Close() }

// stop ends the listener and cuts what is left (Run's end, after the
// sessions were sent their closes). A nil w does nothing.
func (w *wsServer) stop() {
	if w == nil {
		return
	}
	w.closeListener()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_ = w.srv.Shutdown(ctx)
	<-w.done
	w.srv.Stop()
}

// wsHandler admits upgrades and makes their sessions.
type wsHandler struct{ e *Edge }

func (h wsHandler) Admit() (wsserve.Refusal, bool) {
	if r, refuse := h.e.refuseConnection(); refuse {
		// HTTP's Retry-After carries a point: drawn from the window, and
		// the client's policy spreads above it.
		return wsserve.Refusal{Reason: "edge: overloaded or draining", RetryAfter: r.At(rand.Float64())}, false
	}
	return wsserve.Refusal{}, true
}

func (h wsHandler) Open(conn wsserve.Conn) wsserve.Session {
	format, err := wire.ParseSubprotocol(conn.Subprotocol())
	if err != nil {
		conn.Close(int(wire.CloseProtocolError), "subprotocol "+wire.SubprotocolProto+" or "+wire.SubprotocolJSON+" required", 0)
		return nil
	}
	d := &wsDevice{conn: conn, codec: h.e.codecs[format]}
	d.s = h.e.newSession(d)
	return d
}

// wsDevice is one device WebSocket: the wsserve.Session of the connection
// and the session's device.
type wsDevice struct {
	conn  wsserve.Conn
	codec *wire.Codec
	s     *session
}

var (
	_ wsserve.Session = (*wsDevice)(nil)
	_ device          = (*wsDevice)(nil)
)

func (d *wsDevice) Conn() *wsserve.Conn { return &d.conn }

// Message decodes one message of the device and hands it to the session.
func (d *wsDevice) Message(binary bool, data []byte) {
	if want := d.codec.Format().Binary(); binary != want {
		code := wire.CloseProtocolError
		if !want {
			code = wire.CloseInvalidPayload
		}
		d.s.close(wire.Close{Code: code, Text: "frame type does not match the subprotocol"}, false)
		return
	}
	f := new(corralv1.ClientFrame)
	if err := d.codec.DecodeClientFrame(data, f); err != nil {
		d.s.close(wire.CloseOf(err), false)
		return
	}
	d.s.handle(f)
}

func (d *wsDevice) ProtocolError(reason string) {
	d.s.close(wire.Close{Code: wire.CloseProtocolError, Text: reason}, false)
}

func (d *wsDevice) Pong() { d.s.lastRecv.Store(d.s.e.now().UnixNano()) }

func (d *wsDevice) Closing() bool { return d.s.isClosing() }

func (d *wsDevice) Closed(code int) {
	d.s.peerGone(wire.Close{Code: wire.CloseCode(code), Text: "device closed"})
}

func (d *wsDevice) kind() string { return "ws" }

func (d *wsDevice) remoteAddr() string {
	if a := d.conn.WS().RemoteAddr(); a != nil {
		return a.String()
	}
	return ""
}

func (d *wsDevice) write(f *corralv1.ServerFrame) error {
	b, err := d.codec.AppendServerFrame(nil, f)
	if err != nil {
		return err
	}
	if err := d.conn.Write(d.codec.Format().Binary(), b); err != nil {
		if errors.Is(err, wsserve.ErrStalled) {
			return errStalled
		}
		return err
	}
	return nil
}

func (d *wsDevice) closeWith(c wire.Close) {
	d.conn.Close(int(c.Code), c.Reason(), wsCloseLinger)
}

func (d *wsDevice) abort() { d.conn.Abort() }
