package wsserve

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"net"
	"net/http"
	"strconv"
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
		u := upgrades.Get().(*upgrade)
		defer u.release()
		if r, ok := upgradeRequest(buf[:end], l.s.cfg.Path, l.s.cfg.Subprotocols, u); ok {
			if ref, ok := l.s.h.Admit(); !ok {
				l.s.refuse(c, ref)
				return
			}
			_ = c.SetReadDeadline(time.Time{})
			w := &u.w
			*w = hijackWriter{c: c}
			if _, err := l.s.up.UpgradeAndTransferConnToPoller(w, r, nil); err != nil {
				if w.hijacked {
					l.s.unserved(c)
					return
				}
				_, _ = c.Write([]byte("HTTP/1.1 400 Bad Request\r\nConnection: close\r\nContent-Length: 0\r\n\r\n"))
				_ = c.Close()
			}
			return
		}
	}
	l.handOver(c, buf[:n])
}

// upgrade is what the fast path hands nbio's upgrader for one connection:
// the request, its header map and the response writer, reused from
// upgrades. nbio's Upgrade (v1.6.8) reads the request and its header
// (the checks, the key, the subprotocol, our CheckOrigin, which reads
// nothing) and keeps none of them once it returns: the connection keeps
// the subprotocol, the server's own string (upgradeRequest). Made for
// each upgrade (the request, the map and its group, the values, the
// writer) they were 5 allocations and 800 B of a hub session set-up's
// 5,050 B, and 3,500 of its 117,800 user-mode instructions with GOGC=off,
// besides the collector's work on those bytes (bench/hub/run.sh
// instructions; issue 10, item 13).
type upgrade struct {
	req  http.Request
	hdr  http.Header // the five headers of upgradeRequest, assigned each time
	vals [2]string   // the key and the subprotocol
	w    hijackWriter
}

var upgrades = sync.Pool{New: func() any { return &upgrade{hdr: make(http.Header, 5)} }}

// release drops what u refers to and returns it to upgrades.
func (u *upgrade) release() {
	u.req = http.Request{}
	u.vals = [2]string{}
	u.w = hijackWriter{}
	for k := range u.hdr {
		u.hdr[k] = nil
	}
	upgrades.Put(u)
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

// Header values the upgrader reads, shared by every fast-path request
// (nbio only reads them).
var (
	hdrWebsocket = []string{"websocket"}
	hdrUpgrade   = []string{"Upgrade"}
	hdrVersion   = []string{"13"}
)

// upgradeRequest parses head, a complete request head, and returns the
// request for nbio's upgrader when it is a plain WebSocket upgrade of path
// that the upgrader accepts and that offers one of subprotocols. The
// request holds nothing of head: its Sec-WebSocket-Protocol is the one
// subprotocol chosen (the first of subprotocols the client offers, in any
// of its Sec-WebSocket-Protocol headers), a string of subprotocols, which
// nbio keeps as the connection's subprotocol for as long as it lives; a
// string cut from head would keep all of head alive with every idle
// session. The request, its header and their values are u's (reused: see
// upgrade); it allocates the key (and the target when it has a query),
// nothing else.
func upgradeRequest(head []byte, path string, subprotocols []string, u *upgrade) (*http.Request, bool) {
	rest := head[:len(head)-4]
	line, rest := cutLine(rest)
	target, ok := bytes.CutPrefix(line, []byte("GET "))
	if !ok {
		return nil, false
	}
	target, proto, ok := bytes.Cut(target, []byte(" "))
	if !ok || string(proto) != "HTTP/1.1" {
		return nil, false
	}
	if p, _, _ := bytes.Cut(target, []byte("?")); string(p) != path {
		return nil, false
	}
	var key []byte
	var upgrade, connection, version bool
	chosen := len(subprotocols) // index in subprotocols of the best one offered
	for len(rest) > 0 {
		var f []byte
		f, rest = cutLine(rest)
		name, value, ok := bytes.Cut(f, []byte(":"))
		if !ok || len(name) == 0 || len(bytes.TrimSpace(name)) != len(name) {
			return nil, false // obs-fold, a space before the colon: net/http judges
		}
		value = bytes.TrimSpace(value)
		switch {
		case asciiEqualFold(name, "Upgrade"):
			upgrade = upgrade || hasToken(value, "websocket")
		case asciiEqualFold(name, "Connection"):
			connection = connection || hasToken(value, "upgrade")
		case asciiEqualFold(name, "Sec-WebSocket-Version"):
			if version || string(value) != "13" {
				return nil, false
			}
			version = true
		case asciiEqualFold(name, "Sec-WebSocket-Key"):
			if key != nil || len(value) == 0 {
				return nil, false
			}
			key = value
		case asciiEqualFold(name, "Sec-WebSocket-Protocol"):
			for i, p := range subprotocols[:chosen] {
				if hasToken(value, p) {
					chosen = i
					break
				}
			}
		}
	}
	if !upgrade || !connection || !version || key == nil || chosen == len(subprotocols) {
		return nil, false
	}
	uri := path
	if len(target) != len(path) {
		uri = string(target) // with its query
	}
	u.vals = [2]string{string(key), subprotocols[chosen]}
	hdr := u.hdr
	hdr["Upgrade"] = hdrWebsocket
	hdr["Connection"] = hdrUpgrade
	hdr["Sec-Websocket-Version"] = hdrVersion
	hdr["Sec-Websocket-Key"] = u.vals[0:1:1]
	hdr["Sec-Websocket-Protocol"] = u.vals[1:2:2]
	u.req = http.Request{Method: http.MethodGet, Header: hdr, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1, RequestURI: uri}
	return &u.req, true
}

// cutLine returns b's first line (without its CRLF) and what follows.
func cutLine(b []byte) (line, rest []byte) {
	line, rest, _ = bytes.Cut(b, []byte("\r\n"))
	return line, rest
}

// asciiEqualFold reports whether b equals s, ASCII case-insensitive.
func asciiEqualFold(b []byte, s string) bool {
	if len(b) != len(s) {
		return false
	}
	for i := range len(b) {
		x, y := b[i], s[i]
		if 'A' <= x && x <= 'Z' {
			x += 'a' - 'A'
		}
		if 'A' <= y && y <= 'Z' {
			y += 'a' - 'A'
		}
		if x != y {
			return false
		}
	}
	return true
}

// hasToken reports whether the comma-separated list v holds token (ASCII
// case-insensitive).
func hasToken(v []byte, token string) bool {
	for len(v) > 0 {
		var t []byte
		t, v, _ = bytes.Cut(v, []byte(","))
		if asciiEqualFold(bytes.TrimSpace(t), token) {
			return true
		}
	}
	return false
}

// tcpHijacker hijacks to the TCP connection under listener's replayConn
// once its replayed bytes are read (net/http reads them first), so that
// nbio's upgrader moves the connection to its poller as on the fast path:
// given any other connection type it would serve it in blocking mode, a
// goroutine per connection, without the frame checks.
type tcpHijacker struct {
	http.ResponseWriter
	conn net.Conn // what Hijack returned
}

// WriteHeader and Write after the hijack are nbio's answer to an upgrade
// it gave up on (Server.unserved answers it on the connection instead);
// net/http would log each to the standard logger ("response.WriteHeader
// on hijacked connection"), a line per device of a herd at the
// descriptor limit. They are dropped.
func (w *tcpHijacker) WriteHeader(code int) {
	if w.conn == nil {
		w.ResponseWriter.WriteHeader(code)
	}
}

func (w *tcpHijacker) Write(b []byte) (int, error) {
	if w.conn != nil {
		return len(b), nil
	}
	return w.ResponseWriter.Write(b)
}

func (w *tcpHijacker) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	hj, ok := w.ResponseWriter.(http.Hijacker)
	if !ok {
		return nil, nil, http.ErrNotSupported
	}
	c, brw, err := hj.Hijack()
	if rc, ok := c.(*replayConn); ok && len(rc.pre) == 0 {
		c = rc.Conn
	}
	w.conn = c
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

// UnservedRetryAfter is the Retry-After of an upgrade the server could not
// take onto its poller (Config.Unserved): one second, the smallest hint
// the header carries; the clients' policies spread their returns above it.
const UnservedRetryAfter = time.Second

// unserved answers an upgrade that nbio gave up on after it had taken the
// connection (the hijack): 503 with Retry-After, then the connection is
// closed. nbio moves a socket to its poller on a duplicate of its
// descriptor, so a process at its descriptor limit (a herd arriving while
// the sessions it replaces are still being torn down) fails there with
// EMFILE; nbio's own answer goes to the hijacked writer, which writes
// nothing, and the connection stayed open until the collector's finalizer
// closed it, seconds later and without a word: a device cut without a
// hint, which comes back at once (kraken counted these as "cut" in the
// calibration's storms of 16,700 sessions a hub with 20,000 descriptors).
// When nbio had duplicated the descriptor (it failed later: the 101 to a
// peer gone, its poller full) it has closed c: the answer goes nowhere
// (Go's closed net.Conn refuses the write before any system call) and
// is not counted.
func (s *Server) unserved(c net.Conn) {
	err := s.answer503(c, Refusal{Reason: "server: out of resources for the connection", RetryAfter: UnservedRetryAfter})
	if f := s.cfg.Unserved; f != nil && err == nil {
		f() // before the close: counted by the time the device sees the end
	}
	_ = c.Close()
}

// refuse answers an upgrade that Handler.Admit refused: 503 with the
// reason and the hint, then the connection is closed.
func (s *Server) refuse(c net.Conn, ref Refusal) {
	_ = s.answer503(c, ref)
	_ = c.Close()
}

// answer503 writes the 503 of ref on c and returns the write's error.
func (s *Server) answer503(c net.Conn, ref Refusal) error {
	body := ref.Reason + "\n"
	b := make([]byte, 0, 192+len(body))
	b = append(b, "HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain; charset=utf-8\r\nX-Content-Type-Options: nosniff\r\n"...)
	if ref.RetryAfter > 0 {
		b = append(b, "Retry-After: "+retryAfter(ref.RetryAfter)+"\r\n"...)
	}
	b = append(b, "Content-Length: "+strconv.Itoa(len(body))+"\r\nConnection: close\r\n\r\n"+body...)
	_ = c.SetWriteDeadline(time.Now().Add(s.cfg.HTTPWriteTimeout))
	_, err := c.Write(b)
	return err
}
