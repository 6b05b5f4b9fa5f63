package kraken

import (
	"bytes"
	"context"
	"crypto/sha1"
	"crypto/tls"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/lesismal/nbio"

	"github.com/corralhq/corral/internal/nbclose"
	"github.com/corralhq/corral/wire"
	"github.com/corralhq/corral/wire/corralv1"
)

// The engine: every WebSocket of a run is a socket registered with one nbio
// poller (epoll). A held session owns no goroutine and no buffer: the
// poller reads into its shared buffer and hands the bytes to the
// session's parser, which keeps only the bytes of an unfinished frame.
// Dials block in a small pool of dialer goroutines (connect() on
// loopback is short); the upgrade answer, the Welcome and everything after
// arrive through the poller.

const (
	maxServerFrame = 1 << 20 // a server frame above this is a protocol error
	wsGUID         = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
)

// engine owns the nbio poller and the dialer pool.
type engine struct {
	nb   *nbio.Engine
	jobs chan dialJob
	wg   sync.WaitGroup
	// reg orders a connection's set-up by its dialer (every field of its
	// wsConn, the session set on the nbio Conn, the epoll registration)
	// before the poller's first look at it: the kernel's readiness event
	// is a happens-before edge the race detector cannot see.
	reg sync.RWMutex
}

// dialJob is one connection attempt for a dialer goroutine.
type dialJob struct {
	ctx     context.Context
	dev     *device
	gen     uint32
	src     netip.Addr
	timeout time.Duration
}

// endpoint is where one attempt goes.
type endpoint struct {
	addr string // host:port to connect to
	host string // the Host header (WebSocket), the authority (gRPC)
	path string // WebSocket only
	grpc bool   // a gRPC target
	tls  bool   // wss, grpcs
	name string // the URL's host: the TLS server name
}

func newEngine(pollers, dialers int) (*engine, error) {
	nb := nbio.NewEngine(nbio.Config{Name: "kraken", NPoller: pollers})
	e := &engine{nb: nb, jobs: make(chan dialJob, 1024)}
	nb.OnData(func(c *nbio.Conn, data []byte) {
		if w := e.session(c); w != nil {
			w.onData(data)
		}
	})
	nb.OnClose(func(c *nbio.Conn, err error) {
		if w := e.session(c); w != nil {
			w.onClose(err)
		}
	})
	if err := nb.Start(); err != nil {
		return nil, fmt.Errorf("kraken: starting the poller: %w", err)
	}
	for range dialers {
		e.wg.Add(1)
		go e.dialer()
	}
	return e, nil
}

// session returns the wsConn of c (nil for none).
func (e *engine) session(c *nbio.Conn) *wsConn {
	e.reg.RLock()
	w, _ := c.Session().(*wsConn)
	e.reg.RUnlock()
	return w
}

// stop ends the dialers and the poller (which closes every connection).
func (e *engine) stop() {
	close(e.jobs)
	e.wg.Wait()
	e.nb.Stop()
}

func (e *engine) dialer() {
	defer e.wg.Done()
	for j := range e.jobs {
		e.dial(j)
	}
}

// dial connects, sends the upgrade request and hands the socket to the
// poller. Failures go back to the device.
func (e *engine) dial(j dialJob) {
	ctx, cancel := context.WithTimeout(j.ctx, j.timeout)
	defer cancel()
	ep, err := j.dev.r.endpoint(ctx, j.dev)
	if err != nil {
		j.dev.dialFailed(j.gen, "resolve")
		return
	}
	if ep.grpc {
		e.dialGRPC(ctx, j, ep)
		return
	}
	d := net.Dialer{Control: bindNoPort}
	if j.src.IsValid() {
		d.LocalAddr = &net.TCPAddr{IP: j.src.AsSlice()}
	}
	nc, err := d.DialContext(ctx, "tcp", ep.addr)
	if err != nil {
		j.dev.dialFailed(j.gen, dialReason(err))
		return
	}
	j.dev.connected(j.gen)
	if ep.tls {
		e.dialWSS(ctx, j, ep, nc)
		return
	}
	k, req := upgradeRequest(ep)
	_ = nc.SetWriteDeadline(time.Now().Add(j.timeout))
	if _, err := nc.Write(req); err != nil {
		nc.Close()
		j.dev.dialFailed(j.gen, "write")
		return
	}
	nbc, err := nbio.NBConn(nc) // dups the descriptor and closes nc
	if err != nil {
		nc.Close()
		j.dev.dialFailed(j.gen, "poller")
		return
	}
	w := &wsConn{nc: nbc, dev: j.dev, accept: acceptKey(k)}
	if !j.dev.attach(j.gen, w) {
		nbc.Close()
		return
	}
	e.reg.Lock()
	nbc.SetSession(w)
	_, err = e.nb.AddConn(nbc)
	e.reg.Unlock()
	if err != nil {
		nbc.Close()
		j.dev.dialFailed(j.gen, "poller")
	}
}

// dialWSS makes the TLS handshake on nc, sends the upgrade request over
// it and starts the goroutine that reads the connection (the poller
// cannot drive crypto/tls).
func (e *engine) dialWSS(ctx context.Context, j dialJob, ep endpoint, nc net.Conn) {
	tc, reason := j.dev.r.handshake(ctx, j.dev, ep, nc)
	if tc == nil {
		j.dev.dialFailed(j.gen, reason)
		return
	}
	k, req := upgradeRequest(ep)
	_ = tc.SetWriteDeadline(time.Now().Add(j.timeout))
	if _, err := tc.Write(req); err != nil {
		_ = nc.Close()
		j.dev.dialFailed(j.gen, "write")
		return
	}
	_ = tc.SetWriteDeadline(time.Time{})
	w := &wsConn{tc: tc, dev: j.dev, accept: acceptKey(k)}
	if !j.dev.attach(j.gen, w) {
		_ = nc.Close()
		return
	}
	go w.readTLS()
}

// upgradeRequest returns a fresh Sec-WebSocket-Key and the upgrade
// request to ep with it.
func upgradeRequest(ep endpoint) (string, []byte) {
	var key [16]byte
	for i := range key {
		key[i] = byte(rand.Uint32())
	}
	k := base64.StdEncoding.EncodeToString(key[:])
	req := "GET " + ep.path + " HTTP/1.1\r\nHost: " + ep.host + "\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n" +
		"Sec-WebSocket-Key: " + k + "\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Protocol: " + wire.SubprotocolProto + "\r\n\r\n"
	return k, []byte(req)
}

func acceptKey(k string) string {
	h := sha1.Sum([]byte(k + wsGUID))
	return base64.StdEncoding.EncodeToString(h[:])
}

// dialReason names a failed TCP connect.
func dialReason(err error) string {
	var op *net.OpError
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		return "dial_refused"
	case errors.Is(err, syscall.EADDRNOTAVAIL), errors.Is(err, syscall.EADDRINUSE):
		return "dial_no_source_port"
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &op) && op.Timeout():
		return "dial_timeout"
	case errors.Is(err, context.Canceled):
		return "stopped"
	}
	return "dial_error"
}

// wsConn is the client side of one WebSocket: on the poller (nc), or
// over TLS (tc) read by a goroutine of its own (readTLS). Its parser
// state is touched only by the goroutine that reads its socket (onData,
// onClose); sendFrame may be called from anywhere (nbio's Conn.Write and
// crypto/tls's are safe for concurrent use).
type wsConn struct {
	nc     *nbio.Conn
	tc     *tls.Conn
	dev    *device
	accept string // the Sec-WebSocket-Accept the server must answer
	open   bool   // upgraded
	buf    []byte // bytes of an unfinished head or frame
	frag   []byte // a fragmented message so far
	done   atomic.Bool
}

var _ conn = (*wsConn)(nil)

// sendFrame writes f as one binary message (masked, as a client must).
func (w *wsConn) sendFrame(f *corralv1.ClientFrame) error {
	b, err := w.dev.r.codec.AppendClientFrame(nil, f)
	if err != nil {
		return err
	}
	return w.write(0x2, b)
}

// message decodes one server message for the device.
func (w *wsConn) message(data []byte) {
	var f corralv1.ServerFrame
	if err := w.dev.r.codec.DecodeServerFrame(data, &f); err != nil {
		w.fail(protoError{"undecodable server frame"})
		return
	}
	w.dev.frame(w, &f)
}

func (w *wsConn) write(op byte, payload []byte) error {
	n := len(payload)
	hdr := make([]byte, 0, 14+n)
	hdr = append(hdr, 0x80|op)
	switch {
	case n < 126:
		hdr = append(hdr, 0x80|byte(n))
	case n <= 0xffff:
		hdr = append(hdr, 0x80|126, byte(n>>8), byte(n))
	default:
		hdr = append(hdr, 0x80|127)
		hdr = binary.BigEndian.AppendUint64(hdr, uint64(n))
	}
	var mask [4]byte
	binary.LittleEndian.PutUint32(mask[:], rand.Uint32())
	hdr = append(hdr, mask[:]...)
	for i, b := range payload {
		hdr = append(hdr, b^mask[i&3])
	}
	if w.tc != nil {
		_, err := w.tc.Write(hdr)
		return err
	}
	_, err := w.nc.Write(hdr)
	return err
}

// readTLS reads a wss connection until it ends.
func (w *wsConn) readTLS() {
	buf := make([]byte, 4<<10)
	for {
		n, err := w.tc.Read(buf)
		if n > 0 {
			w.onData(buf[:n])
		}
		if err != nil {
			w.onClose(err)
			return
		}
	}
}

// shut closes the socket: through the poller (nbclose: a close from here
// could let a stale event cut the next device's fresh connection), or the
// TCP connection under TLS (no close_notify: as a drop).
func (w *wsConn) shut() {
	if w.tc != nil {
		_ = w.tc.NetConn().Close()
		return
	}
	_ = nbclose.Close(w.nc)
}

// close sends a close frame with code and closes the socket.
func (w *wsConn) close(code wire.CloseCode) {
	if code == closeNoStatus || code == closeAbnormal {
		code = wire.CloseNormal
	}
	var p [2]byte
	binary.BigEndian.PutUint16(p[:], uint16(code))
	_ = w.write(0x8, p[:])
	w.shut()
}

// cut closes the socket without a frame, as a network drop would.
func (w *wsConn) cut() { w.shut() }

// onData parses what the poller read.
func (w *wsConn) onData(data []byte) {
	if w.done.Load() {
		return
	}
	if len(w.buf) > 0 {
		w.buf = append(w.buf, data...)
		data = w.buf
	}
	rest, err := w.parse(data)
	if err != nil {
		w.fail(err)
		return
	}
	if len(rest) == 0 {
		w.buf = nil
		return
	}
	// Keep only the unfinished part, in a buffer of its own (data is
	// the poller's).
	w.buf = append(make([]byte, 0, len(rest)), rest...)
}

// protoError is a violation of the WebSocket protocol by the server.
type protoError struct{ what string }

func (e protoError) Error() string { return "kraken: " + e.what }

// httpRefusal is a refused upgrade.
type httpRefusal struct {
	status     int
	retryAfter time.Duration
}

func (e httpRefusal) Error() string { return "kraken: upgrade refused with " + strconv.Itoa(e.status) }

func (w *wsConn) parse(data []byte) ([]byte, error) {
	if !w.open {
		end := bytes.Index(data, []byte("\r\n\r\n"))
		if end < 0 {
			if len(data) > 16<<10 {
				return nil, protoError{"upgrade answer head over 16 KiB"}
			}
			return data, nil
		}
		if err := w.checkHead(data[:end]); err != nil {
			return nil, err
		}
		w.open = true
		data = data[end+4:]
		w.dev.upgraded(w)
	}
	for len(data) >= 2 && !w.done.Load() {
		b0, b1 := data[0], data[1]
		if b1&0x80 != 0 {
			return nil, protoError{"masked server frame"}
		}
		n, off := int64(b1&0x7f), 2
		switch n {
		case 126:
			if len(data) < 4 {
				return data, nil
			}
			n, off = int64(binary.BigEndian.Uint16(data[2:])), 4
		case 127:
			if len(data) < 10 {
				return data, nil
			}
			n, off = int64(binary.BigEndian.Uint64(data[2:])), 10
		}
		if n > maxServerFrame || n < 0 {
			return nil, protoError{"server frame over 1 MiB"}
		}
		if int64(len(data)-off) < n {
			return data, nil
		}
		payload := data[off : off+int(n)]
		data = data[off+int(n):]
		if err := w.frame(b0&0x80 != 0, b0&0x0f, payload); err != nil {
			return nil, err
		}
	}
	return data, nil
}

// checkHead checks the upgrade answer.
func (w *wsConn) checkHead(head []byte) error {
	lines := strings.Split(string(head), "\r\n")
	f := strings.Fields(lines[0])
	if len(f) < 2 {
		return protoError{"malformed upgrade answer"}
	}
	status, err := strconv.Atoi(f[1])
	if err != nil {
		return protoError{"malformed upgrade status"}
	}
	var accept, proto string
	var retry time.Duration
	for _, l := range lines[1:] {
		k, v, ok := strings.Cut(l, ":")
		if !ok {
			continue
		}
		v = strings.TrimSpace(v)
		switch strings.ToLower(strings.TrimSpace(k)) {
		case "sec-websocket-accept":
			accept = v
		case "sec-websocket-protocol":
			proto = v
		case "retry-after":
			if s, err := strconv.Atoi(v); err == nil && s > 0 {
				retry = time.Duration(s) * time.Second
			}
		}
	}
	if status != 101 {
		return httpRefusal{status: status, retryAfter: retry}
	}
	if accept != w.accept {
		return protoError{"wrong Sec-WebSocket-Accept"}
	}
	if proto != wire.SubprotocolProto {
		return protoError{"server chose subprotocol " + strconv.Quote(proto)}
	}
	return nil
}

// frame handles one frame.
func (w *wsConn) frame(fin bool, op byte, payload []byte) error {
	switch op {
	case 0x8: // close
		cl := wire.Close{Code: closeNoStatus}
		if len(payload) >= 2 {
			cl.Code = wire.CloseCode(binary.BigEndian.Uint16(payload))
			cl.RetryAfter, cl.RetryWithin, cl.Text = wire.ParseReason(string(payload[2:]))
		}
		w.endReason("", cl)
		w.close(cl.Code)
		return nil
	case 0x9: // ping
		return w.write(0xA, payload)
	case 0xA:
		return nil
	case 0x0:
		if w.frag == nil {
			return protoError{"continuation without a message"}
		}
		w.frag = append(w.frag, payload...)
		if len(w.frag) > maxServerFrame {
			return protoError{"server message over 1 MiB"}
		}
		if fin {
			m := w.frag
			w.frag = nil
			w.message(m)
		}
		return nil
	case 0x1, 0x2:
		if !fin {
			w.frag = append([]byte{}, payload...)
			return nil
		}
		w.message(payload)
		return nil
	}
	return protoError{"unknown opcode " + strconv.Itoa(int(op))}
}

// fail ends the connection on a protocol error or a refused upgrade.
func (w *wsConn) fail(err error) {
	var r httpRefusal
	if errors.As(err, &r) {
		w.endReason("http_"+strconv.Itoa(r.status), wire.Close{Code: wire.CloseTryAgainLater, RetryAfter: r.retryAfter, Text: err.Error()})
	} else {
		w.endReason("protocol", wire.Close{Code: wire.CloseProtocolError, Text: err.Error()})
	}
	w.close(wire.CloseProtocolError)
}

// endReason reports the end of the connection to the device, once.
func (w *wsConn) endReason(reason string, cl wire.Close) {
	if w.done.Swap(true) {
		return
	}
	w.dev.ended(w, reason, cl)
}

// onClose is the socket's end, whoever closed it.
func (w *wsConn) onClose(error) {
	w.endReason("cut", wire.Close{Code: closeAbnormal})
}
