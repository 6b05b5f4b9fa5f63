package hub

import (
	"time"
	"unsafe"

	"github.com/corralhq/corral/internal/wsserve"
	"github.com/corralhq/corral/wire"
	"github.com/corralhq/corral/wire/corralv1"
)

// WebSocket sessions are served by internal/wsserve (github.com/lesismal/
// nbio, the library wire chose by measurement, shared with the edge): an
// epoll engine, no goroutine per connection, the request head read by the
// server itself, and the frame checks nbio v1.6.8 does not make. An idle
// session holds no goroutine at all: frames are handled by the workers'
// goroutines and the session's writer goroutine exists only while its
// queue is not empty. This file is the hub's side: the session of an
// upgraded connection (wsHandler.Open), its messages decoded by the
// subprotocol's codec, and its writes.

// wsTransport is on every idle WebSocket session: 32 bytes.
type wsTransport struct {
	conn  wsserve.Conn // the connection, write pacing and frame tracker
	codec *wire.Codec
}

const _ = -uint(unsafe.Sizeof(wsTransport{}) / 33) // fails to compile above 32 bytes

func (t *wsTransport) kind() string { return "ws" }

func (t *wsTransport) writeFrame(f *corralv1.ServerFrame) error {
	b, err := t.codec.AppendServerFrame(nil, f) // control frames are rare: no buffer kept
	if err != nil {
		return err
	}
	return t.conn.Write(t.codec.Format().Binary(), b)
}

func (t *wsTransport) writeDelivery(d *delivery) error {
	b, err := d.encoded(t.codec)
	if err != nil {
		return err
	}
	return t.conn.Write(t.codec.Format().Binary(), b)
}

// closeWith sends the close frame and completes the closing handshake,
// waiting up to linger for the peer's close frame (wsserve.Conn.Close).
func (t *wsTransport) closeWith(c wire.Close, linger time.Duration) {
	t.conn.Close(int(c.Code), c.Reason(), linger)
}

// abort cuts the TCP connection without a close frame.
func (t *wsTransport) abort(wire.Close) { t.conn.Abort() }

// wsConfig is the configuration of the hub's WebSocket server.
func (h *Hub) wsConfig() wsserve.Config {
	return wsserve.Config{
		Path:                  "/v1/ws",
		Subprotocols:          wire.Subprotocols(),
		MaxFrameBytes:         h.codecCheck.Config().MaxFrameBytes,
		HandshakeTimeout:      h.sess.HandshakeTimeout,
		HTTPReadHeaderTimeout: h.conns.HTTPReadHeaderTimeout,
		HTTPReadTimeout:       h.conns.HTTPReadTimeout,
		HTTPWriteTimeout:      h.conns.HTTPWriteTimeout,
		HTTPIdleTimeout:       h.conns.HTTPIdleTimeout,
		WriteTimeout:          h.sess.WriteTimeout,
		Workers:               h.workers,
		TLS:                   h.wsTLS(), // nil: plaintext (tls.go)
		Unserved:              h.metrics.unserved.Inc,
	}
}

// wsHandler is the hub as wsserve's Handler.
type wsHandler struct{ h *Hub }

var _ wsserve.Handler = wsHandler{}

// Admit refuses upgrades while the hub drains.
func (w wsHandler) Admit() (wsserve.Refusal, bool) {
	if w.h.draining.Load() {
		return wsserve.Refusal{Reason: "hub: draining"}, false
	}
	return wsserve.Refusal{}, true
}

// Open makes the session of an upgraded connection.
func (w wsHandler) Open(conn wsserve.Conn) wsserve.Session {
	h := w.h
	format, _ := wire.ParseSubprotocol(conn.Subprotocol()) // one of wire.Subprotocols: wsserve checked
	t := &wsTransport{conn: conn, codec: h.codecs[format]}
	return (*wsSession)(h.newSession(t))
}

// wsSession is a session over WebSocket as wsserve sees it: the same
// struct, so that the connection holds no other value.
type wsSession session

var _ wsserve.Session = (*wsSession)(nil)

func (w *wsSession) s() *session         { return (*session)(w) }
func (w *wsSession) t() *wsTransport     { return w.tr.(*wsTransport) }
func (w *wsSession) Conn() *wsserve.Conn { return &w.t().conn }

// Message decodes one message and handles it.
func (w *wsSession) Message(binary bool, data []byte) {
	s, t := w.s(), w.t()
	if fb := t.codec.Format().Binary(); binary != fb {
		code := wire.CloseProtocolError
		if !fb {
			code = wire.CloseInvalidPayload
		}
		s.close(wire.Close{Code: code, Text: "frame type does not match the subprotocol"}, false)
		return
	}
	var f corralv1.ClientFrame
	if err := t.codec.DecodeClientFrame(data, &f); err != nil {
		s.close(wire.CloseOf(err), false)
		return
	}
	s.handle(s.h.runCtx, &f)
}

// ProtocolError closes the session with 1002 and the reason.
func (w *wsSession) ProtocolError(reason string) {
	w.s().close(wire.Close{Code: wire.CloseProtocolError, Text: reason}, false)
}

// Pong counts as a frame received.
func (w *wsSession) Pong() { w.lastRecv.Store(w.h.now().UnixNano()) }

// Closing reports whether the session is closing.
func (w *wsSession) Closing() bool { return w.s().isClosing() }

// Closed ends the session from the peer's side.
func (w *wsSession) Closed(code int) {
	w.s().peerGone(wire.Close{Code: wire.CloseCode(code), Text: "peer closed"})
}
