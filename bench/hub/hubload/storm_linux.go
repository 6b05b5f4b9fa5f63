//go:build linux

package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"syscall"
	"time"

	"github.com/corralhq/corral/bench/hub/internal/wsframe"
)

// epollET is EPOLLET's bit (1 << 31 on every Linux architecture): package
// syscall spells it as a negative int on amd64 and a positive one on
// arm64 and riscv64, so no one expression of it fits a uint32 on all.
const epollET uint32 = 1 << 31

// The epoll dialer. With a goroutine per dial on Go's net package, the
// client cost more CPU per session than the hub (issue 10, item 13: the
// two hubload processes used 86-92 % of their core in the hub's turn while
// the hub's core was a quarter idle), so the client, not the hub, set the
// pace. Here one goroutine drives every dial in flight over raw
// non-blocking sockets and one epoll instance: per session a socket,
// TCP_NODELAY, a bind, a connect, one epoll_ctl, three writes and the
// reads that find data (Go's net adds four keep-alive options,
// getsockname, getpeername, SO_ERROR, a second epoll_ctl, a read that
// finds nothing before each answer, and the goroutine switches).

// esess is one session of the epoll storm, from its socket to Subscribed.
type esess struct {
	i        int // session index, 0 to n-1
	fd       int // -1 when closed or handed over
	attempt  int
	step     int  // 0: upgrade; 1: Hello sent; 2: Subscribe sent
	headSent bool // the upgrade request is written
	slot     int  // index in the storm's inflight
	t0, t    time.Time
	deadline time.Time
	buf      []byte // read and not yet consumed
	st       setup
}

// estorm is the state of one epoll storm.
type estorm struct {
	cfg              stormConfig
	p                protocol
	ep               int
	raddr            syscall.SockaddrInet4
	hello, subscribe []byte // payloads
	byFD             []*esess
	inflight         []*esess
	retries          []*esess // waiting retryPause, in order of their time
	retryAt          []time.Time
	fds              []int    // a session's descriptor once set up, or -1
	leftover         [][]byte // bytes read past a session's Subscribed
	res              stormResult
}

func epollStorm(cfg stormConfig) (stormResult, error) {
	ap, err := netip.ParseAddrPort(cfg.addr)
	if err != nil || !ap.Addr().Is4() {
		return stormResult{}, fmt.Errorf("-dialer epoll dials an IPv4 address and port, not %q", cfg.addr)
	}
	ep, err := syscall.EpollCreate1(syscall.EPOLL_CLOEXEC)
	if err != nil {
		return stormResult{}, fmt.Errorf("epoll: %w", err)
	}
	p := protocolOf(cfg.srv)
	s := &estorm{
		cfg: cfg, p: p, ep: ep,
		raddr: syscall.SockaddrInet4{Port: int(ap.Port()), Addr: ap.Addr().As4()},
		hello: p.hello(cfg.token), subscribe: p.subscribe(cfg.channel),
		fds: make([]int, cfg.n), leftover: make([][]byte, cfg.n),
		res: stormResult{conns: make([]net.Conn, cfg.n), readers: make([]*bufio.Reader, cfg.n)},
	}
	for i := range s.fds {
		s.fds[i] = -1
	}
	err = s.run()
	syscall.Close(ep)
	if err != nil {
		for _, es := range s.inflight {
			syscall.Close(es.fd)
		}
	}
	// Hand the sessions to Go's net for the rest of the run (the
	// latency reads); after the storm, outside its figures.
	for i, fd := range s.fds {
		if fd < 0 {
			continue
		}
		f := os.NewFile(uintptr(fd), "session")
		c, cerr := net.FileConn(f)
		f.Close()
		if cerr != nil {
			err = errors.Join(err, cerr)
			continue
		}
		var r io.Reader = c
		if len(s.leftover[i]) > 0 {
			r = io.MultiReader(bytes.NewReader(s.leftover[i]), c)
		}
		s.res.conns[i], s.res.readers[i] = c, bufio.NewReaderSize(r, 1024)
	}
	return s.res, err
}

func (s *estorm) run() error {
	events := make([]syscall.EpollEvent, 256)
	rbuf := make([]byte, 16<<10)
	next := 0
	var lastScan time.Time
	for next < s.cfg.n || len(s.inflight) > 0 || len(s.retries) > 0 {
		now := time.Now()
		for len(s.retries) > 0 && !now.Before(s.retryAt[0]) && len(s.inflight) < s.cfg.conc {
			es := s.retries[0]
			s.retries, s.retryAt = s.retries[1:], s.retryAt[1:]
			s.start(es)
		}
		for next < s.cfg.n && len(s.inflight)+len(s.retries) < s.cfg.conc {
			s.start(&esess{i: next, fd: -1})
			next++
		}
		wait := 50
		if len(s.retries) > 0 {
			wait = max(1, min(wait, int(time.Until(s.retryAt[0]).Milliseconds())+1))
		}
		n, err := syscall.EpollWait(s.ep, events, wait)
		if err != nil {
			if errors.Is(err, syscall.EINTR) {
				continue
			}
			return fmt.Errorf("epoll_wait: %w", err)
		}
		for _, ev := range events[:n] {
			if int(ev.Fd) < len(s.byFD) {
				if es := s.byFD[ev.Fd]; es != nil {
					s.event(es, ev.Events, rbuf)
				}
			}
		}
		if now = time.Now(); now.Sub(lastScan) >= 50*time.Millisecond {
			lastScan = now
			var late []*esess
			for _, es := range s.inflight {
				if now.After(es.deadline) {
					late = append(late, es)
				}
			}
			for _, es := range late {
				s.fail(es, fmt.Errorf("step %d: %w", es.step, os.ErrDeadlineExceeded), es.step == 1)
			}
		}
	}
	return nil
}

// start opens es's socket and connects it; the upgrade request goes out
// when epoll reports it writable.
func (s *estorm) start(es *esess) {
	es.t0 = time.Now()
	es.deadline = es.t0.Add(s.cfg.timeout)
	es.step, es.headSent, es.buf, es.st = 0, false, es.buf[:0], setup{}
	es.slot = len(s.inflight)
	s.inflight = append(s.inflight, es)
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM|syscall.SOCK_NONBLOCK|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		s.fail(es, fmt.Errorf("socket: %w", err), false)
		return
	}
	es.fd = fd
	for fd >= len(s.byFD) {
		s.byFD = append(s.byFD, nil)
	}
	s.byFD[fd] = es
	local := sourceAddr(s.cfg.first + es.i).(*net.TCPAddr)
	if err := syscall.SetsockoptInt(fd, syscall.IPPROTO_TCP, syscall.TCP_NODELAY, 1); err != nil {
		s.fail(es, fmt.Errorf("setsockopt: %w", err), false)
		return
	}
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte(local.IP.To4())}); err != nil {
		s.fail(es, fmt.Errorf("bind: %w", err), false)
		return
	}
	if err := syscall.Connect(fd, &s.raddr); err != nil && !errors.Is(err, syscall.EINPROGRESS) {
		s.fail(es, fmt.Errorf("connect: %w", err), false)
		return
	}
	ev := syscall.EpollEvent{Events: syscall.EPOLLIN | syscall.EPOLLOUT | syscall.EPOLLRDHUP | epollET, Fd: int32(fd)}
	if err := syscall.EpollCtl(s.ep, syscall.EPOLL_CTL_ADD, fd, &ev); err != nil {
		s.fail(es, fmt.Errorf("epoll_ctl: %w", err), false)
	}
}

// event handles what epoll reported for es.
func (s *estorm) event(es *esess, ev uint32, rbuf []byte) {
	if ev&syscall.EPOLLERR != 0 {
		err := errors.New("connection error")
		if n, gerr := syscall.GetsockoptInt(es.fd, syscall.SOL_SOCKET, syscall.SO_ERROR); gerr == nil && n != 0 {
			err = syscall.Errno(n)
		}
		s.fail(es, fmt.Errorf("step %d: %w", es.step, err), false)
		return
	}
	if ev&syscall.EPOLLOUT != 0 && !es.headSent {
		if !s.write(es, []byte(upgradeRequest(s.cfg.srv, s.cfg.addr))) {
			return
		}
		es.headSent = true
	}
	if ev&(syscall.EPOLLIN|syscall.EPOLLRDHUP|syscall.EPOLLHUP) == 0 {
		return
	}
	eof := false
	for {
		n, err := syscall.Read(es.fd, rbuf)
		if n > 0 {
			es.buf = append(es.buf, rbuf[:n]...)
			if n < len(rbuf) {
				// The socket is drained (a stream socket returns all it
				// holds, up to the buffer): data that comes later makes a
				// new edge, so the read that would find nothing is saved.
				break
			}
			continue
		}
		if n == 0 && err == nil {
			eof = true
			break
		}
		if errors.Is(err, syscall.EINTR) {
			continue
		}
		if errors.Is(err, syscall.EAGAIN) {
			break
		}
		s.fail(es, fmt.Errorf("step %d: read: %w", es.step, err), false)
		return
	}
	if !s.advance(es) && eof && es.fd >= 0 {
		s.fail(es, fmt.Errorf("step %d: %w", es.step, io.ErrUnexpectedEOF), false)
	}
}

// advance consumes what es has read: the 101 answer, then the answers to
// Hello and Subscribe. It reports whether es left the storm (set up, or
// failed).
func (s *estorm) advance(es *esess) bool {
	if es.step == 0 {
		end := bytes.Index(es.buf, []byte("\r\n\r\n"))
		if end < 0 {
			if len(es.buf) > 4<<10 {
				s.fail(es, errors.New("handshake: an answer head over 4 KiB"), false)
				return true
			}
			return false
		}
		status, _, _ := bytes.Cut(es.buf, []byte("\r\n"))
		if !bytes.Contains(status, []byte(" 101 ")) {
			s.fail(es, fmt.Errorf("handshake: %q", status), false)
			return true
		}
		es.buf = es.buf[end+4:]
		es.t = time.Now()
		es.st.upgrade = es.t.Sub(es.t0)
		es.deadline = es.t.Add(s.cfg.helloTimeout)
		if !s.write(es, wsframe.Masked(s.p.op, s.hello)) {
			return true
		}
		es.step = 1
	}
	for {
		op, payload, n, err := wsframe.Parse(es.buf)
		if err != nil {
			s.fail(es, err, false)
			return true
		}
		if n == 0 {
			return false
		}
		ok, err := s.p.reply(es.step, op, payload)
		es.buf = es.buf[n:]
		if err != nil {
			s.fail(es, err, false)
			return true
		}
		if !ok {
			continue
		}
		now := time.Now()
		if es.step == 2 {
			es.st.subscribed = now.Sub(es.t)
			s.done(es)
			return true
		}
		es.st.welcome = now.Sub(es.t)
		if s.cfg.channel == "" {
			s.done(es)
			return true
		}
		es.t = now
		if !s.write(es, wsframe.Masked(s.p.op, s.subscribe)) {
			return true
		}
		es.step = 2
	}
}

// write writes b whole on es's socket (a small write on a fresh socket
// never finds its buffer full); on failure es fails and write reports
// false.
func (s *estorm) write(es *esess, b []byte) bool {
	n, err := syscall.Write(es.fd, b)
	if err == nil && n == len(b) {
		return true
	}
	if err == nil {
		err = fmt.Errorf("short write of %d bytes of %d", n, len(b))
	}
	s.fail(es, fmt.Errorf("step %d: write: %w", es.step, err), false)
	return false
}

// leave takes es out of the storm's in-flight set and its descriptor out
// of the lookup.
func (s *estorm) leave(es *esess) {
	last := s.inflight[len(s.inflight)-1]
	s.inflight[es.slot], last.slot = last, es.slot
	s.inflight = s.inflight[:len(s.inflight)-1]
	if es.fd >= 0 {
		s.byFD[es.fd] = nil
	}
}

// done records a session set up; its descriptor stays open for the run.
func (s *estorm) done(es *esess) {
	s.leave(es)
	s.res.record(es.st, s.cfg.channel != "")
	s.cfg.window.setUp()
	s.fds[es.i] = es.fd
	if len(es.buf) > 0 {
		s.leftover[es.i] = bytes.Clone(es.buf)
	}
	es.fd = -1
}

// fail closes es's socket and retries it retryPause later, up to attempts
// times; lostHello counts a Hello that had no answer in time.
func (s *estorm) fail(es *esess, err error, lostHello bool) {
	s.leave(es)
	if es.fd >= 0 {
		syscall.Close(es.fd)
		es.fd = -1
	}
	if lostHello {
		s.res.lost++
	}
	es.attempt++
	if es.attempt < attempts {
		s.retries = append(s.retries, es)
		s.retryAt = append(s.retryAt, time.Now().Add(retryPause))
		return
	}
	s.res.failed++
	if s.res.firstErr == "" {
		s.res.firstErr = err.Error()
	}
}
