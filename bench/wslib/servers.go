package main

import (
	"context"
	"errors"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	coder "github.com/coder/websocket"
	"github.com/gorilla/websocket"
	"github.com/lesismal/nbio/nbhttp"
	nbws "github.com/lesismal/nbio/nbhttp/websocket"
	"github.com/lxzan/gws"
)

// Subprotocols every server offers, as the hub will.
var subprotocols = []string{"corral.v1.proto", "corral.v1.json"}

// closeTrigger is the message that makes every server close the connection
// itself with closeCode and closeReason, as the hub does when it sheds.
const (
	closeTrigger = "please-close"
	closeCode    = 4000
	closeReason  = "retry_after_ms=1500 slow consumer"
)

// server is one candidate: an echo server (every data message is sent
// back with the same type) with the read limit maxMessage, that counts its
// open WebSocket connections.
type server interface {
	// Start listens on addr ("127.0.0.1:0") and returns the bound address.
	Start(addr string) (string, error)
	// Open returns the number of open WebSocket connections.
	Open() int64
	Close()
}

var servers = map[string]func() server{
	"gorilla": func() server { return &gorillaServer{} },
	"coder":   func() server { return &coderServer{} },
	"gws":     func() server { return &gwsServer{} },
	"nbio":    func() server { return &nbioServer{} },
	// nbio-app: nbio with its UTF-8 check handed to the application, as
	// the hub does with wire's codec (invalid text closes with 1007).
	"nbio-app": func() server { return &nbioServer{appUTF8: true} },
	"gobwas":   func() server { return newGobwasServer() },
}

// httpServe runs h on a listener for addr and returns the address.
func httpServe(addr string, h http.Handler) (string, *http.Server, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return "", nil, err
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	return ln.Addr().String(), srv, nil
}

// gorilla: a goroutine per connection blocked in ReadMessage, the
// hijacked net/http buffers reused for reading, a pooled write buffer.
type gorillaServer struct {
	open atomic.Int64
	srv  *http.Server
}

func (s *gorillaServer) Start(addr string) (string, error) {
	up := websocket.Upgrader{
		CheckOrigin:     func(*http.Request) bool { return true },
		WriteBufferPool: &sync.Pool{},
		Subprotocols:    subprotocols,
	}
	a, srv, err := httpServe(addr, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, err := up.Upgrade(w, r, nil)
		if err != nil {
			return
		}
		s.open.Add(1)
		defer s.open.Add(-1)
		defer c.Close()
		c.SetReadLimit(maxMessage)
		for {
			mt, data, err := c.ReadMessage()
			if err != nil {
				return
			}
			if string(data) == closeTrigger {
				_ = c.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(closeCode, closeReason), time.Now().Add(time.Second))
				return
			}
			if err := c.WriteMessage(mt, data); err != nil {
				return
			}
		}
	}))
	s.srv = srv
	return a, err
}
func (s *gorillaServer) Open() int64 { return s.open.Load() }
func (s *gorillaServer) Close()      { _ = s.srv.Close() }

// coder: a goroutine per connection blocked in Read.
type coderServer struct {
	open atomic.Int64
	srv  *http.Server
}

func (s *coderServer) Start(addr string) (string, error) {
	a, srv, err := httpServe(addr, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, err := coder.Accept(w, r, &coder.AcceptOptions{InsecureSkipVerify: true, Subprotocols: subprotocols})
		if err != nil {
			return
		}
		s.open.Add(1)
		defer s.open.Add(-1)
		defer c.CloseNow()
		c.SetReadLimit(maxMessage)
		ctx := context.Background()
		for {
			mt, data, err := c.Read(ctx)
			if err != nil {
				return
			}
			if string(data) == closeTrigger {
				_ = c.Close(closeCode, closeReason)
				return
			}
			if err := c.Write(ctx, mt, data); err != nil {
				return
			}
		}
	}))
	s.srv = srv
	return a, err
}
func (s *coderServer) Open() int64 { return s.open.Load() }
func (s *coderServer) Close()      { _ = s.srv.Close() }

// gws: its own listener and HTTP parsing (gws.Server), a goroutine per
// connection in ReadLoop.
type gwsServer struct {
	open atomic.Int64
}

type gwsHandler struct{ s *gwsServer }

func (h gwsHandler) OnOpen(*gws.Conn)         { h.s.open.Add(1) }
func (h gwsHandler) OnClose(*gws.Conn, error) { h.s.open.Add(-1) }
func (h gwsHandler) OnPing(c *gws.Conn, p []byte) {
	_ = c.WritePong(p)
}
func (h gwsHandler) OnPong(*gws.Conn, []byte) {}
func (h gwsHandler) OnMessage(c *gws.Conn, m *gws.Message) {
	defer m.Close()
	if m.Data.String() == closeTrigger {
		_ = c.WriteClose(closeCode, []byte(closeReason))
		return
	}
	_ = c.WriteMessage(m.Opcode, m.Bytes())
}

func (s *gwsServer) Start(addr string) (string, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return "", err
	}
	srv := gws.NewServer(gwsHandler{s}, &gws.ServerOption{
		ReadMaxPayloadSize: maxMessage,
		CheckUtf8Enabled:   true,
		SubProtocols:       subprotocols,
	})
	go func() { _ = srv.RunListener(ln) }()
	return ln.Addr().String(), nil
}
func (s *gwsServer) Open() int64 { return s.open.Load() }

// Close leaves the listener open: gws.Server.RunListener logs and retries
// forever once its listener is closed, and the process exits right after.
func (s *gwsServer) Close() {}

// nbio: nbhttp's event-driven engine (epoll, non-blocking mode); no
// goroutine per connection, messages handled by a pool.
type nbioServer struct {
	appUTF8 bool
	open    atomic.Int64
	engine  *nbhttp.Engine
}

func (s *nbioServer) Start(addr string) (string, error) {
	up := nbws.NewUpgrader()
	up.CheckOrigin = func(*http.Request) bool { return true }
	up.Subprotocols = subprotocols
	// No read deadline: idle sessions are kept by application pings.
	up.KeepaliveTime = 0
	up.MessageLengthLimit = maxMessage
	up.OnOpen(func(*nbws.Conn) { s.open.Add(1) })
	up.OnClose(func(*nbws.Conn, error) { s.open.Add(-1) })
	up.OnMessage(func(c *nbws.Conn, mt nbws.MessageType, data []byte) {
		if s.appUTF8 && mt == nbws.TextMessage && !utf8.Valid(data) {
			_ = c.WriteClose(1007, "")
			_ = c.Close()
			return
		}
		if string(data) == closeTrigger {
			_ = c.WriteClose(closeCode, closeReason)
			_ = c.Close()
			return
		}
		_ = c.WriteMessage(mt, data)
	})
	mux := http.NewServeMux()
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		if _, err := up.Upgrade(w, r, nil); err != nil {
			return
		}
	})
	bound := make(chan string, 1)
	s.engine = nbhttp.NewEngine(nbhttp.Config{
		Network:                      "tcp",
		Addrs:                        []string{addr},
		Handler:                      mux,
		ReleaseWebsocketPayload:      true,
		MaxWebsocketFramePayloadSize: maxMessage,
		Listen: func(network, a string) (net.Listener, error) {
			ln, err := net.Listen(network, a)
			if err == nil {
				bound <- ln.Addr().String()
			}
			return ln, err
		},
	})
	if s.appUTF8 {
		s.engine.CheckUtf8 = func([]byte) bool { return true }
	}
	if err := s.engine.Start(); err != nil {
		return "", err
	}
	select {
	case a := <-bound:
		return a, nil
	case <-time.After(5 * time.Second):
		return "", errors.New("nbio: no listener")
	}
}
func (s *nbioServer) Open() int64 { return s.open.Load() }
func (s *nbioServer) Close()      { s.engine.Stop() }
