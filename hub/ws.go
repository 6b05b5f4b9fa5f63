package hub

import (
	"bufio"
	"errors"
	"math"
	"net"
	"net/http"
	"time"
	"unsafe"

	"github.com/lesismal/nbio"
	"github.com/lesismal/nbio/nbhttp"
	nbws "github.com/lesismal/nbio/nbhttp/websocket"

	"github.com/corralhq/corral/wire"
	"github.com/corralhq/corral/wire/corralv1"
)

// WebSocket transport on github.com/lesismal/nbio (the library wire chose
// by measurement): an epoll engine, no goroutine per connection. An idle
// session holds no goroutine at all: frames are handled by nbio's pool and
// the session's writer goroutine exists only while its queue is not empty.
//
// nbio's writes never block: what the socket does not take, nbio buffers.
// To keep the hub's own bounded, priority-aware queue in charge, the writer
// hands a frame to nbio only while the kernel's send queue of the socket
// holds less than sendQueueLimit bytes, and otherwise waits (polling, only
// for that slow session) up to the write timeout.
//
// nbio v1.6.8 accepts unmasked client frames and drops empty data messages
// without a word. The hub sees the raw bytes first (the engine's data
// handler, before nbio parses them): a frameTrack per connection (8 bytes,
// in wsTransport) follows the frame headers and closes the session with
// 1002 on either, and on the framing errors nbio answers by cutting TCP
// without a close frame (wsframes.go).

// sendQueueLimit is the unsent bytes in the kernel above which the writer
// waits before handing nbio another frame.
const sendQueueLimit = 256 << 10

// checkEvery is how many bytes are written between two kernel queue checks.
const checkEvery = 32 << 10

// wsTransport is on every idle WebSocket session: 32 bytes.
type wsTransport struct {
	conn      *nbws.Conn
	codec     *wire.Codec
	since     int32 // bytes written since the last queue check
	timeoutMS int32 // write timeout in milliseconds
	frames    frameTrack
}

const _ = -uint(unsafe.Sizeof(wsTransport{}) / 33) // fails to compile above 32 bytes

func (t *wsTransport) kind() string { return "ws" }

// mt returns the WebSocket message type of the session's subprotocol.
func (t *wsTransport) mt() nbws.MessageType {
	if t.codec.Format().Binary() {
		return nbws.BinaryMessage
	}
	return nbws.TextMessage
}

// msTimeout converts a write timeout to whole milliseconds (at least 1)
// that fit wsTransport.
func msTimeout(d time.Duration) int32 {
	return int32(min(max(d.Milliseconds(), 1), math.MaxInt32))
}

// full reports whether the kernel holds enough unsent bytes that the next
// write would end in nbio's own (unbounded) buffer: above sendQueueLimit,
// or above half the socket's send buffer when that is smaller (a send
// buffer of 208 KiB, Linux's default, never holds 256 KiB: without this
// bound a peer that reads nothing would make nbio buffer without end).
func (t *wsTransport) full() bool {
	n, size := t.sendQueue()
	limit := sendQueueLimit
	if size > 0 {
		limit = min(limit, size/2)
	}
	return n > limit
}

// room waits until the kernel takes more, or the write timeout passes.
func (t *wsTransport) room(size int) error {
	t.since += int32(size)
	if t.since < checkEvery {
		return nil
	}
	t.since = 0
	deadline := time.Now().Add(time.Duration(t.timeoutMS) * time.Millisecond)
	for d := time.Millisecond; t.full(); d = min(2*d, 20*time.Millisecond) {
		if time.Now().After(deadline) {
			return errStalled
		}
		time.Sleep(d)
	}
	return nil
}

func (t *wsTransport) writeFrame(f *corralv1.ServerFrame) error {
	b, err := t.codec.AppendServerFrame(nil, f) // control frames are rare: no buffer kept
	if err != nil {
		return err
	}
	if err := t.room(len(b)); err != nil {
		return err
	}
	return t.conn.WriteMessage(t.mt(), b)
}

func (t *wsTransport) writeDelivery(d *delivery) error {
	b, err := d.encoded(t.codec)
	if err != nil {
		return err
	}
	if err := t.room(len(b)); err != nil {
		return err
	}
	return t.conn.WriteMessage(t.mt(), b)
}

// closeWith sends the close frame and completes the closing handshake
// (RFC 6455 section 7.1.1: the server closes TCP after the close frames
// crossed), so that a peer still sending gets the close frame and not a
// reset: it waits until the peer's close frame ended the connection (nbio
// closes it on receipt), or, once the kernel has delivered every byte, for
// linger; while bytes are still on their way it waits as long as the peer
// reads, and gives up after the write timeout without progress.
func (t *wsTransport) closeWith(c wire.Close, linger time.Duration) {
	_ = t.conn.WriteClose(int(c.Code), c.Reason())
	if linger > 0 {
		t.linger(linger)
	}
	_ = t.conn.Close()
}

func (t *wsTransport) linger(linger time.Duration) {
	closed, ok := t.conn.Conn.(interface{ IsClosed() (bool, error) })
	if !ok {
		return
	}
	stall := time.Duration(t.timeoutMS) * time.Millisecond
	progress, delivered := time.Now(), time.Time{}
	last := -1
	for d := 200 * time.Microsecond; ; d = min(2*d, 20*time.Millisecond) {
		if c, _ := closed.IsClosed(); c {
			return
		}
		now := time.Now()
		switch n := t.unsent(); {
		case n == 0:
			if delivered.IsZero() {
				delivered = now
			}
			if now.Sub(delivered) >= linger {
				return
			}
		default:
			delivered = time.Time{}
			if last < 0 || n < last {
				progress = now
			}
			if now.Sub(progress) >= stall {
				return
			}
			last = n
		}
		time.Sleep(d)
	}
}

// abort cuts the TCP connection without a close frame.
func (t *wsTransport) abort(wire.Close) { _ = t.conn.Conn.Close() }

// newWSEngine builds the nbio engine that reads and writes upgraded
// WebSocket connections, and the upgrader that hands them to it. The HTTP
// handshake is read by wsListener (wsaccept.go), or by net/http (httpMux)
// for what wsListener leaves to it; nbio's own HTTP listener is not used.
func (h *Hub) newWSEngine() (*nbhttp.Engine, *nbws.Upgrader, *wsEarly) {
	engine := nbhttp.NewEngine(nbhttp.Config{
		ReleaseWebsocketPayload:      true,
		MaxWebsocketFramePayloadSize: h.codecCheck.Config().MaxFrameBytes,
		ServerExecutor:               h.workers.Go, // message handlers, in order per connection (nbio's job list)
	})
	// UTF-8 of text frames is checked by the codec, which closes with 1007
	// (nbio's own check would close with 1002).
	engine.CheckUtf8 = func([]byte) bool { return true }
	up := nbws.NewUpgrader()
	up.Engine = engine
	up.CheckOrigin = func(*http.Request) bool { return true }
	up.Subprotocols = wire.Subprotocols()
	up.KeepaliveTime = 0 // idle sessions are kept by the hub's pings
	up.HandshakeTimeout = h.sess.HandshakeTimeout
	up.MessageLengthLimit = h.codecCheck.Config().MaxFrameBytes
	early := &wsEarly{m: make(map[*nbws.Conn]*earlyConn)}
	engine.OnData(func(c *nbio.Conn, data []byte) { h.wsData(early, c, data) })
	up.OnOpen(func(c *nbws.Conn) { h.wsOpen(early, c) })
	up.OnMessage(func(c *nbws.Conn, mt nbws.MessageType, data []byte) { h.wsMessage(early, c, mt, data) })
	up.SetCloseHandler(func(c *nbws.Conn, code int, text string) {
		if s, ok := c.SessionWithLock().(*session); ok && s.isClosing() {
			return // the peer answers our close frame: the handshake is complete
		}
		// The peer closes first: echo its code, as nbio's default does.
		if code == 1005 {
			_ = c.WriteMessage(nbws.CloseMessage, nil)
			return
		}
		_ = c.WriteClose(code, text)
	})
	up.OnClose(func(c *nbws.Conn, err error) {
		early.forget(c)
		h.wsClosed(c, err)
	})
	up.SetPongHandler(func(c *nbws.Conn, _ string) {
		if s, ok := c.SessionWithLock().(*session); ok {
			s.lastRecv.Store(h.now().UnixNano())
		}
	})
	return engine, up, early
}

// serveWS upgrades a request and hands the connection to nbio's poller.
func (h *Hub) serveWS(up *nbws.Upgrader) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if h.draining.Load() {
			http.Error(w, "hub: draining", http.StatusServiceUnavailable)
			return
		}
		_, _ = up.UpgradeAndTransferConnToPoller(tcpHijacker{w}, r, nil) // on failure nbio has answered
	}
}

// tcpHijacker hijacks to the TCP connection under wsListener's replayConn
// once its replayed bytes are read (net/http reads them first), so that
// nbio's upgrader moves the connection to its poller as on the fast path:
// given any other connection type it would serve it in blocking mode, a
// goroutine per connection, without the hub's frame checks.
type tcpHijacker struct{ http.ResponseWriter }

func (w tcpHijacker) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	hj, ok := w.ResponseWriter.(http.Hijacker)
	if !ok {
		return nil, nil, http.ErrNotSupported
	}
	c, brw, err := hj.Hijack()
	if rc, ok := c.(*replayConn); ok && len(rc.pre) == 0 {
		c = rc.Conn
	}
	return c, brw, err
}

// wsOpen runs after nbio has written the 101 answer: it makes the session
// and hands it what was read before (wsEarly).
func (h *Hub) wsOpen(early *wsEarly, c *nbws.Conn) {
	if h.testHookWSOpen != nil {
		h.testHookWSOpen(early, c)
	}
	format, err := wire.ParseSubprotocol(c.Subprotocol())
	if err != nil {
		early.forget(c)
		_ = c.WriteClose(int(wire.CloseProtocolError), "subprotocol "+wire.SubprotocolProto+" or "+wire.SubprotocolJSON+" required")
		_ = c.Close()
		return
	}
	t := &wsTransport{conn: c, codec: h.codecs[format], timeoutMS: msTimeout(h.sess.WriteTimeout)}
	s := h.newSession(t)
	for {
		held, v := early.open(c, s, t)
		if len(held) == 0 {
			if v != frameOK {
				s.close(wire.Close{Code: wire.CloseProtocolError, Text: v.reason()}, false)
			}
			return
		}
		for _, m := range held {
			h.wsHandle(s, t, m.mt, m.data)
		}
	}
}

// wsMessage is nbio's message handler. A message read before OnOpen has
// set the session is held for it (wsEarly).
func (h *Hub) wsMessage(early *wsEarly, c *nbws.Conn, mt nbws.MessageType, data []byte) {
	s, ok := c.SessionWithLock().(*session)
	if !ok {
		if s = early.hold(c, mt, data); s == nil {
			return
		}
	}
	h.wsHandle(s, s.tr.(*wsTransport), mt, data)
}

// wsHandle decodes one message of session s and handles it.
func (h *Hub) wsHandle(s *session, t *wsTransport, mt nbws.MessageType, data []byte) {
	binary := t.codec.Format().Binary()
	if (mt == nbws.BinaryMessage) != binary {
		code := wire.CloseProtocolError
		if !binary {
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
	s.handle(h.runCtx, &f)
}

func (h *Hub) wsClosed(c *nbws.Conn, err error) {
	s, ok := c.SessionWithLock().(*session)
	if !ok {
		return
	}
	code := wire.CloseNormal
	var ce *nbws.CloseError
	if errors.As(err, &ce) {
		code = wire.CloseCode(ce.Code)
	}
	s.peerGone(wire.Close{Code: code, Text: "peer closed"})
}
