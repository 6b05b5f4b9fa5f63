package wsserve

import (
	"crypto/tls"
	"net"
	"sync/atomic"
	"syscall"

	nbws "github.com/lesismal/nbio/nbhttp/websocket"
)

// WebSocket over TLS (Config.TLS). nbio's upgrader moves a plain TCP
// connection to its epoll engine but not a crypto/tls one: it serves that
// one in its blocking mode, a goroutine reading the connection (with a
// 4 KiB buffer) and one writing while frames wait, and the engine's data
// handler (onData), where the frame checks run, never sees its bytes. So
// each accepted connection is a tlsConn: its Read hands the plaintext to
// the same checks (early.feed) before nbio parses it, and its SyscallConn
// is the TCP socket's, so that Conn.Write's bound on the kernel send
// queue holds (the queue holds TLS records). The TLS handshake runs where
// the request head is read (listener.serve, on the Workers), bounded by
// the head's read deadline, HTTPReadHeaderTimeout: never on the accept
// loop. nbio's own reading goroutine (BlockingModHandleRead) is off: it
// would make SessionWithLock wait for a second SetSession after the
// upgrade, so onOpen starts the reading once the session is set.
//
// A wss connection therefore costs that goroutine and crypto/tls's
// buffers on top of a plain one (about 4 KiB of read buffer, the
// goroutine's stack, and the TLS record buffers).

// tlsListener makes every accepted connection a tlsConn.
type tlsListener struct {
	net.Listener
	s *Server
}

func (l tlsListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &tlsConn{Conn: tls.Server(c, l.s.cfg.TLS), s: l.s}, nil
}

// tlsConn is a server-side TLS connection of the listener.
type tlsConn struct {
	*tls.Conn
	s  *Server
	ws atomic.Pointer[nbws.Conn] // set by onOpen, before the reading starts
}

// Read returns the plaintext that passed the frame checks; after a
// violation the session has its ProtocolError and what follows is
// dropped, as onData does on plain TCP.
func (c *tlsConn) Read(p []byte) (int, error) {
	for {
		n, err := c.Conn.Read(p)
		ws := c.ws.Load()
		if n == 0 || ws == nil {
			return n, err // the request head, before the upgrade
		}
		sess, v := c.s.early.feed(ws, p[:n])
		switch v {
		case frameOK:
			return n, err
		case frameDead:
		default:
			sess.ProtocolError(v.reason())
		}
		if err != nil {
			return 0, err
		}
	}
}

// SyscallConn is the TCP socket's, for the kernel send queue bound.
func (c *tlsConn) SyscallConn() (syscall.RawConn, error) {
	sc, ok := c.NetConn().(syscall.Conn)
	if !ok {
		return nil, syscall.EINVAL
	}
	return sc.SyscallConn()
}

// tlsOpen runs first in onOpen: for a TLS connection it gives the tlsConn
// its WebSocket connection and returns the function that starts nbio's
// reading of it, for onOpen to call once the session is set (or the
// connection refused: the reading then ends it). For a plain connection
// it returns nil.
func (s *Server) tlsOpen(c *nbws.Conn) func() {
	tc, ok := c.Conn.(*tlsConn)
	if !ok {
		return nil
	}
	tc.ws.Store(c)
	return func() { go c.HandleRead(0) }
}
