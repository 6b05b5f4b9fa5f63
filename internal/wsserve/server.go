package wsserve

import (
	"context"
	"errors"
	"net"
	"net/http"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/corralhq/corral/internal/nbclose"
	"github.com/lesismal/nbio"
	"github.com/lesismal/nbio/nbhttp"
	nbws "github.com/lesismal/nbio/nbhttp/websocket"
)

// pollerClosed is an upgraded connection's socket whose Close leaves the
// close to nbio's poller (nbclose.Close).
type pollerClosed struct{ *nbio.Conn }

func (c pollerClosed) Close() error { return nbclose.Close(c.Conn) }

// closeProtocolError is RFC 6455's close code for a protocol violation.
const closeProtocolError = 1002

// Handler is what a Server calls for each connection until it has a
// Session. Its methods are called concurrently.
type Handler interface {
	// Admit is asked before each upgrade, on the listener's path and on
	// net/http's: false refuses it with HTTP 503, the Refusal's reason as
	// the body and its RetryAfter as the Retry-After header.
	Admit() (Refusal, bool)
	// Open is called once nbio has written the 101 answer, with the
	// connection's Conn (its subprotocol is one of Config.Subprotocols).
	// It returns the connection's Session, which keeps conn by value and
	// returns its address from Session.Conn; the messages read before
	// Open returned are then handed to the Session, in order. nil refuses
	// the connection: Open has closed it (Conn.Close).
	Open(conn Conn) Session
}

// Refusal is why an upgrade is refused (Handler.Admit).
type Refusal struct {
	// Reason is the body of the 503 answer.
	Reason string
	// RetryAfter, rounded up to whole seconds, is the Retry-After header;
	// 0 sends none.
	RetryAfter time.Duration
}

// Session is the caller's side of one upgraded connection, set on nbio's
// connection (so an idle connection holds nothing of wsserve's but the
// Conn the session keeps). Message, ProtocolError and Pong are called one
// at a time, in the order the connection's bytes arrived; Closing and
// Closed may be called concurrently with them.
type Session interface {
	// Conn returns the Conn given to Handler.Open, kept by the session.
	Conn() *Conn
	// Message handles one data message; data is valid only during the
	// call. Text messages are not checked for UTF-8: the caller's decoder
	// must (and close with 1007).
	Message(binary bool, data []byte)
	// ProtocolError reports that the client broke RFC 6455's framing
	// (reason says how: "unmasked client frame", "empty data message",
	// ...): the session closes with 1002 and reason. Nothing the
	// connection reads afterwards is handed over.
	ProtocolError(reason string)
	// Pong reports a pong frame from the client.
	Pong()
	// Closing reports whether the session has begun to close: a close
	// frame from the peer then answers the session's own and is not
	// echoed.
	Closing() bool
	// Closed reports that the connection ended; code is the peer's close
	// code, 1000 when it sent none (a reset, EOF, a failed read).
	Closed(code int)
}

// Server serves WebSocket upgrades on a listener and hands every upgraded
// connection to nbio's epoll poller: no goroutine is held per connection.
// It reads the request head of each new connection itself and passes a
// plain upgrade of Config.Path straight to nbio; anything else goes to
// net/http (Serve). Create it with New; Start, then Serve; Shutdown and
// Stop end it. It is safe for concurrent use.
type Server struct {
	cfg      Config
	h        Handler
	engine   *nbhttp.Engine
	up       *nbws.Upgrader
	early    *early
	http     *http.Server
	required string // the close reason of a connection without a subprotocol of cfg's

	testHookOpen func(*early, *nbws.Conn) // tests: runs first in OnOpen
	testHookData func()                   // tests: runs last in onData, on nbio's poller
	tlsReadHeld  atomic.Int64             // readTLS's buffers out of the pool now (tls.go)
}

// New builds a server from a valid configuration; other is the handler
// of the requests that are not upgrades of cfg.Path (nil: 404). New does
// no I/O and starts no goroutine.
func New(cfg Config, h Handler, other http.Handler) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if h == nil {
		return nil, errors.New("wsserve: no handler")
	}
	if other == nil {
		other = http.NotFoundHandler()
	}
	cfg = cfg.WithDefaults()
	cfg.Subprotocols = slices.Clone(cfg.Subprotocols)
	s := &Server{cfg: cfg, h: h, early: &early{m: make(map[*nbws.Conn]*earlyConn)},
		required: "subprotocol " + strings.Join(cfg.Subprotocols, " or ") + " required"}
	s.engine = nbhttp.NewEngine(nbhttp.Config{
		ReleaseWebsocketPayload:      true,
		MaxWebsocketFramePayloadSize: cfg.MaxFrameBytes,
		ServerExecutor:               cfg.Workers.Go, // message handlers, in order per connection (nbio's job list)
	})
	s.engine.SyncCall = syncOnWorkers(cfg.Workers) // TLS connections' message handlers (tls.go)
	// Every close of an upgraded connection, ours and nbio's own (after a
	// close frame, on a worker), goes through its poller: a close from
	// another goroutine while the poller handles a batch of events let a
	// stale event of the closed socket cut the next connection given the
	// same descriptor number (internal/nbclose). The socket is swapped in
	// here, in nbio's open hook, which runs before the poller is told of
	// the connection.
	s.engine.Engine.OnOpen(func(c *nbio.Conn) {
		if wsc, ok := c.Session().(*nbws.Conn); ok && wsc.Conn == net.Conn(c) {
			wsc.Conn = pollerClosed{c}
		}
	})
	// UTF-8 of text frames is checked by the caller's decoder, which
	// closes with 1007 (nbio's own check would close with 1002).
	s.engine.CheckUtf8 = func([]byte) bool { return true }
	up := nbws.NewUpgrader()
	up.Engine = s.engine
	up.CheckOrigin = func(*http.Request) bool { return true }
	up.Subprotocols = cfg.Subprotocols
	up.KeepaliveTime = 0 // idle connections are kept by the caller's pings
	up.HandshakeTimeout = cfg.HandshakeTimeout
	up.MessageLengthLimit = cfg.MaxFrameBytes
	up.BlockingModHandleRead = false // TLS connections: onOpen starts their reading (tls.go)
	s.engine.OnData(s.onData)
	up.OnOpen(s.onOpen)
	up.OnMessage(s.onMessage)
	up.SetCloseHandler(s.onCloseFrame)
	up.OnClose(s.onClose)
	up.SetPongHandler(func(c *nbws.Conn, _ string) {
		if sess, ok := s.early.session(c); ok {
			sess.Pong()
		}
	})
	s.up = up
	s.http = &http.Server{
		Handler:           s.routes(other),
		ReadHeaderTimeout: cfg.HTTPReadHeaderTimeout,
		ReadTimeout:       cfg.HTTPReadTimeout,
		WriteTimeout:      cfg.HTTPWriteTimeout,
		IdleTimeout:       cfg.HTTPIdleTimeout,
	}
	return s, nil
}

// Start starts nbio's engine, which reads and writes the upgraded
// connections. Call it before Serve.
func (s *Server) Start() error {
	if err := s.engine.Start(); err != nil {
		return errors.New("wsserve: nbio engine: " + err.Error())
	}
	return nil
}

// Serve accepts connections on ln until ln is closed, and returns nil
// then, or net/http's error. Upgraded connections outlive it: they end
// with Stop. ln must yield *net.TCPConn (a net.Listen("tcp", ...)
// listener): nbio's poller takes plain TCP sockets only, and any other
// connection (crypto/tls's from tls.NewListener) is answered 500 and
// closed. For TLS set Config.TLS and pass the TCP listener.
func (s *Server) Serve(ln net.Listener) error {
	deferAccept(ln) // the head is there when accept returns (deferaccept_linux.go)
	if s.cfg.TLS != nil {
		ln = tlsListener{Listener: ln, s: s}
	}
	err := s.http.Serve(newListener(s, ln))
	if errors.Is(err, http.ErrServerClosed) || errors.Is(err, net.ErrClosed) {
		return nil
	}
	return err
}

// Shutdown closes the keep-alive connections net/http holds, waiting up
// to ctx for their requests to finish. It does not touch upgraded
// connections.
func (s *Server) Shutdown(ctx context.Context) error { return s.http.Shutdown(ctx) }

// Stop stops nbio's engine: every upgraded connection still open is cut.
// Close the sessions first for them to get their close frames.
func (s *Server) Stop() { s.engine.Stop() }

// routes serves upgrades of the path and hands the rest to other: a
// request for the path with another method is answered 405, as
// http.ServeMux answers a pattern "GET /path".
func (s *Server) routes(other http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != s.cfg.Path {
			other.ServeHTTP(w, r)
			return
		}
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, http.StatusText(http.StatusMethodNotAllowed), http.StatusMethodNotAllowed)
			return
		}
		if ref, ok := s.h.Admit(); !ok {
			if ref.RetryAfter > 0 {
				w.Header().Set("Retry-After", retryAfter(ref.RetryAfter))
			}
			http.Error(w, ref.Reason, http.StatusServiceUnavailable)
			return
		}
		hj := &tcpHijacker{ResponseWriter: w}
		if _, err := s.up.UpgradeAndTransferConnToPoller(hj, r, nil); err != nil && hj.conn != nil {
			s.unserved(hj.conn) // nbio's answer went to the hijacked writer
		} // else on failure nbio has answered
	})
}

// retryAfter returns d as a Retry-After value: whole seconds, rounded up.
func retryAfter(d time.Duration) string {
	return strconv.FormatInt(int64((d+time.Second-1)/time.Second), 10)
}

// onData is the engine's data handler, run on nbio's poller goroutine: it
// sees what nbio read from a connection before nbio parses it, stops a
// connection whose client breaks the framing rules nbio does not check,
// and lets the message handlers it dispatched run before the poller goes
// back to epoll_wait.
func (s *Server) onData(c *nbio.Conn, data []byte) {
	if wsc, ok := c.Session().(*nbws.Conn); ok {
		sess, v := s.early.feed(wsc, data)
		switch v {
		case frameOK:
		case frameDead:
			return
		default:
			sess.ProtocolError(v.reason())
			return
		}
	}
	if next := c.DataHandler(); next != nil {
		next(c, data)
	}
	// Yield to the handlers just dispatched before the poller reads on:
	// nbio's poller waits in epoll_wait as a plain system call, which
	// keeps its P, so with GOMAXPROCS=1 a Hello handed to the Workers
	// waited for sysmon to take the P back (20 us to 10 ms) while the
	// core sat idle (issue 10, item 13).
	runtime.Gosched()
	if s.testHookData != nil {
		s.testHookData()
	}
}

// onOpen runs after nbio has written the 101 answer: the handler makes the
// session, which gets what was read before (early).
func (s *Server) onOpen(c *nbws.Conn) {
	if s.testHookOpen != nil {
		s.testHookOpen(s.early, c)
	}
	if startReading := s.tlsOpen(c); startReading != nil {
		defer startReading() // once the session is set (tls.go)
	}
	if !slices.Contains(s.cfg.Subprotocols, c.Subprotocol()) {
		s.early.forget(c)
		_ = c.WriteClose(closeProtocolError, s.required)
		_ = c.Close()
		return
	}
	sess := s.h.Open(newConn(c, s.cfg.WriteTimeout))
	if sess == nil {
		s.early.forget(c)
		return
	}
	for {
		held, v := s.early.open(c, sess)
		if len(held) == 0 {
			if v != frameOK {
				sess.ProtocolError(v.reason())
			}
			return
		}
		for _, m := range held {
			sess.Message(m.binary, m.data)
		}
	}
}

// onMessage is nbio's message handler. A message read before onOpen has
// set the session is held for it (early).
func (s *Server) onMessage(c *nbws.Conn, mt nbws.MessageType, data []byte) {
	sess, ok := s.early.session(c)
	if !ok {
		if sess = s.early.hold(c, mt == nbws.BinaryMessage, data); sess == nil {
			return
		}
	}
	sess.Message(mt == nbws.BinaryMessage, data)
}

// onCloseFrame answers a close frame from the peer.
func (s *Server) onCloseFrame(c *nbws.Conn, code int, text string) {
	if sess, ok := s.early.session(c); ok && sess.Closing() {
		return // the peer answers our close frame: the handshake is complete
	}
	// The peer closes first: echo its code, as nbio's default does.
	if code == 1005 {
		_ = c.WriteMessage(nbws.CloseMessage, nil)
		return
	}
	_ = c.WriteClose(code, text)
}

// onClose runs when the connection has ended.
func (s *Server) onClose(c *nbws.Conn, err error) {
	sess, ok := s.early.end(c)
	if !ok {
		return
	}
	code := 1000
	var ce *nbws.CloseError
	if errors.As(err, &ce) {
		code = ce.Code
	}
	sess.Closed(code)
}
