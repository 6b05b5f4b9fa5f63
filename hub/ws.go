package hub

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/lxzan/gws"

	"github.com/corralhq/corral/wire"
	"github.com/corralhq/corral/wire/corralv1"
)

// WebSocket transport, on github.com/lxzan/gws (see README: the library
// sits behind the transport interface so it can be swapped for an
// event-driven one).

// wsHandler is the gws event handler of the hub.
type wsHandler struct{ h *Hub }

// wsTransport adapts a gws connection to a session.
type wsTransport struct {
	conn    *gws.Conn
	codec   *wire.Codec
	opcode  gws.Opcode
	timeout time.Duration
	buf     []byte
}

const sessionKey = "corral.session"

func (t *wsTransport) kind() string { return "ws" }

func (t *wsTransport) writeFrame(f *corralv1.ServerFrame) error {
	b, err := t.codec.AppendServerFrame(t.buf[:0], f)
	if err != nil {
		return err
	}
	t.buf = b[:0]
	if len(t.buf) > 64<<10 {
		t.buf = nil
	}
	_ = t.conn.SetWriteDeadline(time.Now().Add(t.timeout))
	return t.conn.WriteMessage(t.opcode, b)
}

func (t *wsTransport) writeDelivery(d *delivery) error {
	b, err := d.encoded(t.codec)
	if err != nil {
		return err
	}
	_ = t.conn.SetWriteDeadline(time.Now().Add(t.timeout))
	return t.conn.WriteMessage(t.opcode, b)
}

func (t *wsTransport) closeWith(c wire.Close) {
	_ = t.conn.SetWriteDeadline(time.Now().Add(time.Second))
	_ = t.conn.WriteClose(uint16(c.Code), []byte(c.Reason()))
}

// abort cuts the TCP connection without a close frame.
func (t *wsTransport) abort(wire.Close) { _ = t.conn.NetConn().Close() }

func (h *Hub) wsUpgrader() *gws.Upgrader {
	return gws.NewUpgrader(wsHandler{h: h}, &gws.ServerOption{
		ReadMaxPayloadSize: h.codecCheck.Config().MaxFrameBytes,
		HandshakeTimeout:   h.sess.HandshakeTimeout,
		SubProtocols:       wire.Subprotocols(),
		ParallelEnabled:    false,
	})
}

func (h *Hub) serveWS(up *gws.Upgrader) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if h.draining.Load() {
			http.Error(w, "hub: draining", http.StatusServiceUnavailable)
			return
		}
		conn, err := up.Upgrade(w, r)
		if err != nil {
			return // gws has answered the request
		}
		go conn.ReadLoop()
	}
}

func (wh wsHandler) OnOpen(c *gws.Conn) {
	h := wh.h
	format, err := wire.ParseSubprotocol(c.SubProtocol())
	if err != nil {
		_ = c.WriteClose(uint16(wire.CloseProtocolError), []byte("subprotocol "+wire.SubprotocolProto+" or "+wire.SubprotocolJSON+" required"))
		return
	}
	op := gws.OpcodeBinary
	if !format.Binary() {
		op = gws.OpcodeText
	}
	t := &wsTransport{conn: c, codec: h.codecs[format], opcode: op, timeout: h.sess.WriteTimeout}
	s := h.newSession(t)
	c.Session().Store(sessionKey, s)
}

func sessionOf(c *gws.Conn) *session {
	v, ok := c.Session().Load(sessionKey)
	if !ok {
		return nil
	}
	return v.(*session)
}

func (wh wsHandler) OnClose(c *gws.Conn, err error) {
	s := sessionOf(c)
	if s == nil {
		return
	}
	code := wire.CloseNormal
	var ce *gws.CloseError
	if errors.As(err, &ce) {
		code = wire.CloseCode(ce.Code)
	}
	s.peerGone(wire.Close{Code: code, Text: "peer closed"})
}

func (wh wsHandler) OnPing(c *gws.Conn, payload []byte) { _ = c.WritePong(payload) }

func (wh wsHandler) OnPong(c *gws.Conn, _ []byte) {
	if s := sessionOf(c); s != nil {
		s.lastRecv.Store(s.h.now().UnixNano())
	}
}

func (wh wsHandler) OnMessage(c *gws.Conn, m *gws.Message) {
	defer m.Close()
	s := sessionOf(c)
	if s == nil {
		return
	}
	t := s.tr.(*wsTransport)
	if (m.Opcode == gws.OpcodeBinary) != t.codec.Format().Binary() {
		code := wire.CloseProtocolError
		if !t.codec.Format().Binary() {
			code = wire.CloseInvalidPayload
		}
		s.close(wire.Close{Code: code, Text: "frame type does not match the subprotocol"}, false)
		return
	}
	var f corralv1.ClientFrame
	if err := t.codec.DecodeClientFrame(m.Bytes(), &f); err != nil {
		s.close(wire.CloseOf(err), false)
		return
	}
	s.handle(context.Background(), &f)
}
