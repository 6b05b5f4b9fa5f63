package wsserve

import (
	"crypto/tls"
	"errors"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

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
// upgrade, so onOpen starts the reading once the session is set, with
// readTLS below rather than nbio's HandleRead.
//
// A wss connection therefore costs a reading goroutine and crypto/tls's
// buffers on top of a plain one. An idle one used to hold 26 KB against
// a plain one's 2.5 KB (bench/edge/run.sh idle with TLS=1, 9,000 sessions):
// nbio's 4 KiB read buffer, and a reader's stack grown to 8 KiB by the
// message handlers that nbio runs on it (SyncCall, inline by default: a
// Hello's decode and its token). readTLS holds no buffer while it waits,
// and New runs SyncCall on the Workers, so the reader's stack is a read's.

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
	return func() { go s.readTLS(c, tc) }
}

// tlsReadBuf is the size of readTLS's pooled buffers, nbio's
// DefaultBlockingReadBufferSize.
const tlsReadBuf = 4 << 10

var tlsReadBufs = sync.Pool{New: func() any { return new([tlsReadBuf]byte) }}

// aLongTimeAgo is a read deadline that has passed: a read with it returns
// at once what crypto/tls holds already, and a timeout otherwise.
var aLongTimeAgo = time.Unix(1, 0)

// readTLS reads a wss connection until it ends, as nbio's HandleRead
// does, handing the plaintext to nbio's parser (which copies what it
// keeps) and closing the connection with the error that ended it. It
// waits for the next record with a one-byte read, holding no buffer, then
// takes what crypto/tls has decrypted or buffered beyond that byte into a
// pooled buffer with a read whose deadline has passed: it returns what is
// there without waiting, and a timeout leaves crypto/tls's connection
// usable (net/http cancels its background reads the same way). Nothing
// else sets read deadlines on an upgraded connection.
func (s *Server) readTLS(c *nbws.Conn, tc *tlsConn) {
	var err error
	defer func() { c.CloseAndClean(err) }()
	var one [1]byte
	for {
		var n int
		n, err = tc.Read(one[:])
		if n == 0 {
			if err != nil {
				return
			}
			continue
		}
		buf := tlsReadBufs.Get().(*[tlsReadBuf]byte)
		s.tlsReadHeld.Add(1)
		buf[0] = one[0]
		if err == nil {
			_ = tc.SetReadDeadline(aLongTimeAgo)
			var more int
			more, err = tc.Read(buf[1:])
			n += more
			_ = tc.SetReadDeadline(time.Time{})
			if errors.Is(err, os.ErrDeadlineExceeded) {
				err = nil
			}
		}
		if perr := c.Parse(buf[:n]); perr != nil && err == nil {
			err = perr
		}
		tlsReadBufs.Put(buf)
		s.tlsReadHeld.Add(-1)
		if err != nil {
			return
		}
	}
}

// syncOnWorkers runs f on a worker of w and waits for it: nbio's SyncCall,
// which runs the message handlers of the connections it serves in its
// blocking mode (TLS) from their reading goroutines. The reader's stack
// stays a read's, the handlers run on a kept goroutine whose stack has
// grown already, one at a time and in order since the reader waits. A
// panic of f is raised again in the reader, inside nbio's Parse, which
// recovers it as it did when f ran there.
func syncOnWorkers(w *Workers) func(func()) {
	return func(f func()) {
		var p any
		done := make(chan struct{})
		w.Go(func() {
			defer close(done)
			defer func() { p = recover() }()
			f()
		})
		<-done
		if p != nil {
			panic(p)
		}
	}
}
