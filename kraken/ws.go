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
// The upgrade answer, the Welcome and everything after arrive through the
// poller.
//
// Each attempt's set-up runs on its own, whatever the other devices'
// connects wait for: a connect whose SYN a full listen queue dropped
// waits until TCP sends the SYN again (1 s, then 3 s, 7 s ...), and a
// real device's dropped SYN delays that device only. (Until 2026-12
// kraken ran every connect on a pool of 64 dialer goroutines: in a herd
// each of them ended up blocked on a dropped SYN, and the whole agent
// idled for most of a second with the hub's queue empty, each stall
// ended by up to 128 SYN retransmissions, two agents' 64;
// docs/benchmarks.md, issue 15, session 7.)
//
// A WebSocket's TCP connect (ws and wss, to an IPv4 address) runs on the
// connector (connector_linux.go): a raw non-blocking socket on an epoll
// instance of kraken's own, no goroutine. Once connected, a ws socket
// gets its upgrade request and goes to the poller from the connector's
// goroutine; a wss one gets a goroutine for its TLS handshake, which
// starts the one that reads it (readTLS). A name is resolved on a
// goroutine of the attempt's own (Go's resolver blocks), which then hands
// the connect to the connector. gRPC attempts (grpc-go's connection and
// the stream's start block), IPv6 targets, and every attempt outside
// Linux (no connector) run their set-up on a goroutine each, Go's dialer
// included.
//
// Why a connector and not a goroutine per connect (what Go's dialer
// wants; a few lines): the goroutine parked in connect holds 8 KiB of
// stack, and the runtime keeps that memory after the goroutines end.
// Measured with 8,000 devices waiting on dropped SYNs: 11.9 KiB of RSS
// per device with a goroutine each (8 KiB of stack, 3 KiB of heap with
// the device's own), 1.75 KiB on the connector. And after a warm-up of
// 18,000 sessions on one hub (bench/kraken/held.sh, whose warm-up
// overflows the hub's listen queue of 4,096, so thousands of connects
// wait at once), a goroutine each read 4.94 KiB per held session
// (164 MiB of RSS, flat over 40 s), above the target of 4 KiB; the
// connector 2.28-2.55, the pool 2.34. nbio's own asynchronous dial
// (Engine.DialAsync) holds no goroutine either, but it cannot bind a
// source address (no local address, no socket option: each device's is
// bound with IP_BIND_ADDRESS_NO_PORT, bindNoPort) and it reads a failed
// connect as a connected socket that then ends with io.EOF (no
// dial_refused to count).

const (
	maxServerFrame = 1 << 20 // a server frame above this is a protocol error
	wsGUID         = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
)

// engine owns the nbio poller, the connector and the attempts' set-ups
// in flight.
type engine struct {
	nb *nbio.Engine
	cn *connector // nil outside Linux
	// slots has a place per set-up in flight. Each holds a descriptor,
	// so it is as large as the process may open (maxDevicesHere, the
	// bound of the devices of one process): it bounds what a burst can
	// ask of the file limit, never the devices' attempts otherwise (one
	// attempt per device at a time).
	slots chan struct{}
	// ctx ends every set-up in flight when the engine stops (a connect
	// waiting on a dropped SYN would wait out its connect timeout).
	ctx    context.Context
	cancel context.CancelFunc
	dials  sync.WaitGroup
	// reg orders a connection's set-up (every field of its wsConn, the
	// session set on the nbio Conn, the epoll registration) before the
	// poller's first look at it: the kernel's readiness event is a
	// happens-before edge the race detector cannot see.
	reg sync.RWMutex
}

// dialJob is one connection attempt.
type dialJob struct {
	dev      *device
	gen      uint32
	src      netip.Addr
	timeout  time.Duration
	deadline time.Time // the set-up's: its start plus timeout
	ep       endpoint  // where it goes, unless targets are set
	targets  []target  // set: the first of a round that resolves them (device.beginRound)
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

// newEngine starts the poller and the connector; ctx ends the set-ups in
// flight too.
func newEngine(ctx context.Context, pollers int) (*engine, error) {
	cn, err := newConnector()
	if err != nil {
		return nil, fmt.Errorf("kraken: starting the connector: %w", err)
	}
	nb := nbio.NewEngine(nbio.Config{Name: "kraken", NPoller: pollers})
	e := &engine{nb: nb, cn: cn, slots: make(chan struct{}, max(maxDevicesHere(), 1))}
	e.ctx, e.cancel = context.WithCancel(ctx)
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
		e.cancel()
		if cn != nil {
			cn.stop()
		}
		return nil, fmt.Errorf("kraken: starting the poller: %w", err)
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

// start begins j's set-up once a slot is free (at once but past the file
// limit): on the connector, or on a goroutine of its own; nothing when
// the engine stopped first. The caller must not call it once stop has
// begun.
func (e *engine) start(j dialJob) {
	select {
	case e.slots <- struct{}{}:
	case <-e.ctx.Done():
		return
	}
	e.dials.Add(1)
	j.deadline = time.Now().Add(j.timeout)
	if j.targets == nil {
		if dst, ok := e.connects(j.ep); ok {
			e.connect(j, j.ep, dst)
			return
		}
	}
	go e.dial(j)
}

// release ends a set-up: its slot is free.
func (e *engine) release() {
	<-e.slots
	e.dials.Done()
}

// stop ends the set-ups in flight, waits for them, and stops the poller
// (which closes every connection).
func (e *engine) stop() {
	e.cancel()
	if e.cn != nil {
		e.cn.stop()
	}
	e.dials.Wait()
	e.nb.Stop()
}

// connects reports whether ep's connect goes to the connector (a
// WebSocket's to an IPv4 address, on Linux), and its address.
func (e *engine) connects(ep endpoint) (netip.AddrPort, bool) {
	if e.cn == nil || ep.grpc {
		return netip.AddrPort{}, false
	}
	dst, err := netip.ParseAddrPort(ep.addr)
	return dst, err == nil && dst.Addr().Is4()
}

// connect hands j's TCP connect to ep to the connector; the set-up goes
// on in its callback: a ws socket gets its upgrade request and goes to
// the poller, a wss one to a goroutine for its TLS handshake.
func (e *engine) connect(j dialJob, ep endpoint, dst netip.AddrPort) {
	var key string
	var req []byte
	if !ep.tls {
		key, req = upgradeRequest(ep)
	}
	e.cn.connect(j.src, dst, j.deadline, req, func(nc net.Conn, err error) {
		if err != nil {
			if errors.As(err, new(writeError)) {
				j.dev.connected(j.gen)
				j.dev.dialFailed(j.gen, "write")
			} else {
				j.dev.dialFailed(j.gen, dialReason(err))
			}
			e.release()
			return
		}
		j.dev.connected(j.gen)
		if ep.tls {
			go func() {
				defer e.release()
				ctx, cancel := context.WithDeadline(e.ctx, j.deadline)
				defer cancel()
				e.dialWSS(ctx, j, ep, nc)
			}()
			return
		}
		e.handOver(j, nc, key)
		e.release()
	})
}

// dial runs j's set-up on this goroutine: for the first attempt of a
// round to names it resolves them and begins the round, then it hands the
// connect to the connector, or makes it here (gRPC, an IPv6 address, no
// connector). Failures go back to the device.
func (e *engine) dial(j dialJob) {
	ctx, cancel := context.WithDeadline(e.ctx, j.deadline)
	defer cancel()
	ep := j.ep
	if j.targets != nil {
		eps, err := j.dev.r.resolveRound(ctx, j.targets)
		if err != nil {
			j.dev.dialFailed(j.gen, "resolve")
			e.release()
			return
		}
		var ok bool
		if ep, ok = j.dev.beginRound(j.gen, eps); !ok {
			e.release()
			return
		}
	}
	if dst, ok := e.connects(ep); ok {
		e.connect(j, ep, dst)
		return
	}
	defer e.release()
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
	_ = nc.SetWriteDeadline(j.deadline)
	if _, err := nc.Write(req); err != nil {
		nc.Close()
		j.dev.dialFailed(j.gen, "write")
		return
	}
	e.handOver(j, nc, k)
}

// handOver gives nc, its upgrade request sent with key, to the poller as
// the attempt's wsConn.
func (e *engine) handOver(j dialJob, nc net.Conn, key string) {
	nbc, err := nbio.NBConn(nc) // dups the descriptor and closes nc
	if err != nil {
		nc.Close()
		j.dev.dialFailed(j.gen, "poller")
		return
	}
	w := &wsConn{nc: nbc, dev: j.dev, accept: acceptKey(key)}
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

// writeError is the failure of a connector's first write on a socket it
// connected.
type writeError struct{ err error }

func (e writeError) Error() string { return "kraken: writing the first bytes: " + e.err.Error() }
func (e writeError) Unwrap() error { return e.err }

// dialReason names a failed TCP connect.
func dialReason(err error) string {
	var op *net.OpError
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		return "dial_refused"
	case errors.Is(err, syscall.EADDRNOTAVAIL), errors.Is(err, syscall.EADDRINUSE):
		return "dial_no_source_port"
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, syscall.ETIMEDOUT), errors.As(err, &op) && op.Timeout():
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
