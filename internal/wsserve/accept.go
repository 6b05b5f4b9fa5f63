package wsserve

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// The WebSocket handshake without net/http. A CPU profile of a dial storm
// (issue 10, item 13) put a third of a session set-up's CPU in net/http's
// connection serving: two 4 KiB bufio buffers per connection that a
// hijack never returns to their pools (half of all bytes allocated), the
// request and header maps, the background read and its goroutine, the mux.
// listener sits between the TCP listener and net/http: it reads the
// request head of every new connection itself, with one pooled buffer,
// and a plain, well-formed `GET <Config.Path>` upgrade goes straight to
// nbio's upgrader (with a request of the five headers it reads), or is
// refused with 503 when Handler.Admit says so; anything else (other
// paths, a malformed or unusual upgrade, a head over 4 KiB, bytes after
// the head) goes to net/http with the bytes read replayed, and is answered
// there as before.

// errNotTCP answers a connection that is not a plain TCP connection.
const errNotTCP = "wsserve: the listener must yield plain TCP connections (TLS goes through Config.TLS)"

// headMax bounds the request head read before net/http takes over.
const headMax = 4 << 10

var headBufs = sync.Pool{New: func() any { return new([headMax]byte) }}

// listener is the listener net/http serves. Its methods are safe for
// concurrent use.
type listener struct {
	net.Listener // the TCP listener: Addr; Close stops the accept loop
	s            *Server
	conns        chan net.Conn // handed to net/http
	done         chan struct{} // closed when the accept loop ends
	err          error         // why it ended; set before done closes
}

// newListener starts accepting from ln.
func newListener(s *Server, ln net.Listener) *listener {
	l := &listener{Listener: ln, s: s, conns: make(chan net.Conn), done: make(chan struct{})}
	go l.acceptLoop()
	return l
}

// Accept returns the next connection for net/http.
func (l *listener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, l.err
	}
}

func (l *listener) acceptLoop() {
	var backoff time.Duration
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				l.err = err
				close(l.done)
				return
			}
			// Out of descriptors, or another passing error: wait and
			// retry, as net/http does.
			backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
			time.Sleep(backoff)
			continue
		}
		backoff = 0
		l.s.cfg.Workers.Go(func() { l.serve(c) })
	}
}

// servable reports whether c is a connection served with the frame checks
// and the write pacing: plain TCP, or TCP under Config.TLS (tlsConn).
func servable(c net.Conn) bool {
	switch c := c.(type) {
	case *net.TCPConn:
		return true
	case *tlsConn:
		_, ok := c.NetConn().(*net.TCPConn)
		return ok
	}
	return false
}

// serve reads c's request head and upgrades it, or hands it to net/http.
func (l *listener) serve(c net.Conn) {
	if !servable(c) {
		// nbio's poller takes a plain TCP socket only: any other
		// connection (a crypto/tls one) it would serve with a goroutine
		// per connection, without the frame checks and the write pacing.
		// Refuse it loudly rather than serve it so.
		_ = c.SetWriteDeadline(time.Now().Add(l.s.cfg.HTTPWriteTimeout))
		_, _ = io.WriteString(c, "HTTP/1.1 500 Internal Server Error\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: "+
			strconv.Itoa(len(errNotTCP)+1)+"\r\nConnection: close\r\n\r\n"+errNotTCP+"\n")
		_ = c.Close()
		return
	}
	buf := headBufs.Get().(*[headMax]byte)
	defer headBufs.Put(buf)
	_ = c.SetReadDeadline(time.Now().Add(l.s.cfg.HTTPReadHeaderTimeout))
	n := 0
	end := -1
	for end < 0 && n < len(buf) {
		m, err := c.Read(buf[n:])
		if m > 0 {
			// The head ends with an empty line; look where it can end.
			from := max(n-3, 0)
			n += m
			if i := bytes.Index(buf[from:n], []byte("\r\n\r\n")); i >= 0 {
				end = from + i + 4
			}
		}
		if err != nil && end < 0 { // the handshake timeout, or the client left
			_ = c.Close()
			return
		}
	}
	if end == n {
		if r, ok := upgradeRequest(buf[:end], l.s.cfg.Path, l.s.cfg.Subprotocols); ok {
			if ref, ok := l.s.h.Admit(); !ok {
				l.refuse(c, ref)
				return
			}
			_ = c.SetReadDeadline(time.Time{})
			w := &hijackWriter{c: c}
			if _, err := l.s.up.UpgradeAndTransferConnToPoller(w, r, nil); err != nil && !w.hijacked {
				_, _ = c.Write([]byte("HTTP/1.1 400 Bad Request\r\nConnection: close\r\nContent-Length: 0\r\n\r\n"))
				_ = c.Close()
			}
			return
		}
	}
	l.handOver(c, buf[:n])
}

// handOver gives c to net/http, which reads pre first.
func (l *listener) handOver(c net.Conn, pre []byte) {
	_ = c.SetReadDeadline(time.Time{})
	rc := &replayConn{Conn: c, pre: bytes.Clone(pre)}
	select {
	case l.conns <- rc:
	case <-l.done:
		_ = c.Close()
	}
}

// upgradeRequest parses head, a complete request head, and returns the
// request for nbio's upgrader when it is a plain WebSocket upgrade of path
// that the upgrader accepts and that offers one of subprotocols.
func upgradeRequest(head []byte, path string, subprotocols []string) (*http.Request, bool) {
	s := string(head[:len(head)-4])
	line, rest, _ := strings.Cut(s, "\r\n")
	target, ok := strings.CutPrefix(line, "GET ")
	if !ok {
		return nil, false
	}
	target, proto, ok := strings.Cut(target, " ")
	if !ok || proto != "HTTP/1.1" {
		return nil, false
	}
	if p, _, _ := strings.Cut(target, "?"); p != path {
		return nil, false
	}
	hdr := make(http.Header, 5)
	var upgrade, connection, version, key bool
	for rest != "" {
		var f string
		f, rest, _ = strings.Cut(rest, "\r\n")
		name, value, ok := strings.Cut(f, ":")
		if !ok || name == "" || strings.TrimSpace(name) != name {
			return nil, false // obs-fold, a space before the colon: net/http judges
		}
		value = strings.TrimSpace(value)
		switch {
		case strings.EqualFold(name, "Upgrade"):
			upgrade = upgrade || hasToken(value, "websocket")
		case strings.EqualFold(name, "Connection"):
			connection = connection || hasToken(value, "upgrade")
		case strings.EqualFold(name, "Sec-WebSocket-Version"):
			if version || value != "13" {
				return nil, false
			}
			version = true
		case strings.EqualFold(name, "Sec-WebSocket-Key"):
			if key || value == "" {
				return nil, false
			}
			key = true
			hdr["Sec-Websocket-Key"] = []string{value}
		case strings.EqualFold(name, "Sec-WebSocket-Protocol"):
			hdr["Sec-Websocket-Protocol"] = append(hdr["Sec-Websocket-Protocol"], value)
		}
	}
	if !upgrade || !connection || !version || !key || !offersSubprotocol(hdr["Sec-Websocket-Protocol"], subprotocols) {
		return nil, false
	}
	hdr["Upgrade"] = []string{"websocket"}
	hdr["Connection"] = []string{"Upgrade"}
	hdr["Sec-Websocket-Version"] = []string{"13"}
	return &http.Request{Method: http.MethodGet, Header: hdr, Proto: proto, ProtoMajor: 1, ProtoMinor: 1, RequestURI: target}, true
}

// hasToken reports whether the comma-separated list v holds token (ASCII
// case-insensitive).
func hasToken(v, token string) bool {
	for v != "" {
		var t string
		t, v, _ = strings.Cut(v, ",")
		if strings.EqualFold(strings.TrimSpace(t), token) {
			return true
		}
	}
	return false
}

// offersSubprotocol reports whether the Sec-WebSocket-Protocol values
// offer one of subprotocols.
func offersSubprotocol(values, subprotocols []string) bool {
	for _, v := range values {
		for _, p := range subprotocols {
			if hasToken(v, p) {
				return true
			}
		}
	}
	return false
}

// tcpHijacker hijacks to the TCP connection under listener's replayConn
// once its replayed bytes are read (net/http reads them first), so that
// nbio's upgrader moves the connection to its poller as on the fast path:
// given any other connection type it would serve it in blocking mode, a
// goroutine per connection, without the frame checks.
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

// hijackWriter is the response writer nbio's upgrader gets on the fast
// path: it hijacks to the connection; nothing is written through it (the
// request was checked, and after the hijack nbio answers on the
// connection itself).
type hijackWriter struct {
	c        net.Conn
	h        http.Header
	hijacked bool
}

func (w *hijackWriter) Header() http.Header {
	if w.h == nil {
		w.h = make(http.Header)
	}
	return w.h
}
func (w *hijackWriter) Write(b []byte) (int, error) { return len(b), nil }
func (w *hijackWriter) WriteHeader(int)             {}
func (w *hijackWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	w.hijacked = true
	return w.c, nil, nil
}

// replayConn is a connection whose first bytes were read already.
type replayConn struct {
	net.Conn
	pre []byte
}

func (c *replayConn) Read(p []byte) (int, error) {
	if len(c.pre) > 0 {
		n := copy(p, c.pre)
		c.pre = c.pre[n:]
		return n, nil
	}
	return c.Conn.Read(p)
}

// CloseWrite half-closes the TCP connection (net/http uses it to let the
// client read an error answer before the close).
func (c *replayConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

// refuse answers an upgrade that Handler.Admit refused on the listener's
// path: 503 with the reason and the hint, then the connection is closed.
func (l *listener) refuse(c net.Conn, ref Refusal) {
	body := ref.Reason + "\n"
	b := make([]byte, 0, 192+len(body))
	b = append(b, "HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain; charset=utf-8\r\nX-Content-Type-Options: nosniff\r\n"...)
	if ref.RetryAfter > 0 {
		b = append(b, "Retry-After: "+retryAfter(ref.RetryAfter)+"\r\n"...)
	}
	b = append(b, "Content-Length: "+strconv.Itoa(len(body))+"\r\nConnection: close\r\n\r\n"+body...)
	_ = c.SetWriteDeadline(time.Now().Add(l.s.cfg.HTTPWriteTimeout))
	_, _ = c.Write(b)
	_ = c.Close()
}
