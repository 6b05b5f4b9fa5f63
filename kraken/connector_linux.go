package kraken

import (
	"context"
	"encoding/binary"
	"errors"
	"net"
	"net/netip"
	"os"
	"runtime"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// connector runs TCP connects without a goroutine each: raw non-blocking
// sockets, bound to their device's source address, on one epoll
// instance read by a goroutine per processor (GOMAXPROCS: each hands its
// connected sockets on, some 20 system calls each, and one goroutine
// would queue a herd's). A connect waiting on a dropped SYN is its
// socket, its entry here and its timer, where a goroutine parked in Go's
// connect holds 8 KiB of stack that the runtime keeps once the herd is
// back (ws.go, the engine, has the figures). It is safe for concurrent
// use.
//
// Each connect is a slot of pending; the epoll event of its socket
// carries the slot and its generation, so that an event that comes after
// the connect ended (timed out, or stopped) is never taken for the next
// connect of the slot, or of the descriptor number.
type connector struct {
	ep    int // the epoll instance
	wake  int // an eventfd: written by stop to end the loops
	loops sync.WaitGroup

	mu      sync.Mutex
	pending []*pendingConnect // by slot; nil: free
	gens    []uint32          // by slot: its current generation
	free    []int32
	stopped bool
}

// pendingConnect is one connect in flight.
type pendingConnect struct {
	fd    int
	first []byte // written on the socket once it connects
	done  func(net.Conn, error)
	timer *time.Timer
}

// wakeSlot marks the eventfd's epoll event.
const wakeSlot = -1

func newConnector() (*connector, error) {
	ep, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return nil, os.NewSyscallError("epoll_create1", err)
	}
	wake, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		_ = unix.Close(ep)
		return nil, os.NewSyscallError("eventfd", err)
	}
	if err := unix.EpollCtl(ep, unix.EPOLL_CTL_ADD, wake, &unix.EpollEvent{Events: unix.EPOLLIN, Fd: wakeSlot}); err != nil {
		_ = unix.Close(ep)
		_ = unix.Close(wake)
		return nil, os.NewSyscallError("epoll_ctl", err)
	}
	c := &connector{ep: ep, wake: wake}
	for range runtime.GOMAXPROCS(0) {
		c.loops.Go(c.loop)
	}
	return c, nil
}

// connect connects a socket from src (no address: the kernel's choice)
// to dst, an IPv4 address, by deadline; once connected it writes first
// on it and calls done with the connection (a *net.TCPConn: Go's
// defaults of a dialled one, no delay and keep-alives of 15 s, are set),
// else with the error: the connect's (an errno: ECONNREFUSED,
// EADDRNOTAVAIL...), context.DeadlineExceeded, context.Canceled once
// stopped, or a writeError. done is called once, on this goroutine when
// the connect fails at once, else on the connector's or a timer's.
func (c *connector) connect(src netip.Addr, dst netip.AddrPort, deadline time.Time, first []byte, done func(net.Conn, error)) {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		done(nil, os.NewSyscallError("socket", err))
		return
	}
	if src.IsValid() {
		// The kernel picks the source port at connect(), by the whole
		// 4-tuple (bindNoPort).
		if err := unix.SetsockoptInt(fd, unix.IPPROTO_IP, unix.IP_BIND_ADDRESS_NO_PORT, 1); err != nil {
			_ = unix.Close(fd)
			done(nil, os.NewSyscallError("setsockopt", err))
			return
		}
		if err := unix.Bind(fd, &unix.SockaddrInet4{Addr: src.As4()}); err != nil {
			_ = unix.Close(fd)
			done(nil, os.NewSyscallError("bind", err))
			return
		}
	}
	switch err := unix.Connect(fd, &unix.SockaddrInet4{Addr: dst.Addr().As4(), Port: int(dst.Port())}); err {
	case nil, unix.EINPROGRESS, unix.EALREADY, unix.EINTR, unix.EISCONN:
		// Connected or connecting: epoll says which (a connected
		// socket is writable at once).
	default:
		_ = unix.Close(fd)
		done(nil, os.NewSyscallError("connect", err))
		return
	}
	p := &pendingConnect{fd: fd, first: first, done: done}
	c.mu.Lock()
	if c.stopped {
		c.mu.Unlock()
		_ = unix.Close(fd)
		done(nil, context.Canceled)
		return
	}
	slot := c.slotLocked(p)
	gen := c.gens[slot]
	p.timer = time.AfterFunc(time.Until(deadline), func() { c.expire(slot, gen) })
	// Registered under mu: the event cannot be handled before the slot
	// is complete.
	err = unix.EpollCtl(c.ep, unix.EPOLL_CTL_ADD, fd, &unix.EpollEvent{Events: unix.EPOLLOUT | unix.EPOLLONESHOT, Fd: slot, Pad: int32(gen)})
	if err != nil {
		c.takeLocked(slot, gen)
	}
	c.mu.Unlock()
	if err != nil {
		p.timer.Stop()
		_ = unix.Close(fd)
		done(nil, os.NewSyscallError("epoll_ctl", err))
	}
}

// slotLocked puts p in a free slot and returns it (caller holds mu).
func (c *connector) slotLocked(p *pendingConnect) int32 {
	if n := len(c.free); n > 0 {
		s := c.free[n-1]
		c.free = c.free[:n-1]
		c.pending[s] = p
		return s
	}
	c.pending = append(c.pending, p)
	c.gens = append(c.gens, 0)
	return int32(len(c.pending) - 1)
}

// takeLocked ends the connect of slot at generation gen and returns it;
// nil when it ended already (caller holds mu).
func (c *connector) takeLocked(slot int32, gen uint32) *pendingConnect {
	if slot < 0 || int(slot) >= len(c.pending) || c.gens[slot] != gen || c.pending[slot] == nil {
		return nil
	}
	p := c.pending[slot]
	c.pending[slot] = nil
	c.gens[slot]++
	c.free = append(c.free, slot)
	return p
}

func (c *connector) take(slot int32, gen uint32) *pendingConnect {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.takeLocked(slot, gen)
}

// loop reads the epoll instance until stop. Each socket's event goes to
// one loop (EPOLLONESHOT); the eventfd's, level-triggered and never
// read, to every one.
func (c *connector) loop() {
	events := make([]unix.EpollEvent, 32) // a small batch: the loops share a herd's events
	for {
		n, err := unix.EpollWait(c.ep, events, -1)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			// Only a bad epoll descriptor fails epoll_wait: not
			// reachable while the connector lives. The connects in
			// flight end by their timers.
			return
		}
		for _, ev := range events[:n] {
			if ev.Fd == wakeSlot {
				return
			}
			c.ready(ev.Fd, uint32(ev.Pad))
		}
	}
}

// ready is the event of slot's socket: connected, or failed.
func (c *connector) ready(slot int32, gen uint32) {
	c.mu.Lock()
	if slot < 0 || int(slot) >= len(c.pending) || c.gens[slot] != gen || c.pending[slot] == nil {
		c.mu.Unlock() // it ended already
		return
	}
	p := c.pending[slot]
	soErr, err := unix.GetsockoptInt(p.fd, unix.SOL_SOCKET, unix.SO_ERROR)
	if err == nil && (soErr == int(unix.EINPROGRESS) || soErr == int(unix.EALREADY) || soErr == int(unix.EINTR)) {
		// Not connected yet (as Go's connect loop allows): wait again.
		err = unix.EpollCtl(c.ep, unix.EPOLL_CTL_MOD, p.fd, &unix.EpollEvent{Events: unix.EPOLLOUT | unix.EPOLLONESHOT, Fd: slot, Pad: int32(gen)})
		if err == nil {
			c.mu.Unlock()
			return
		}
		err = os.NewSyscallError("epoll_ctl", err)
	} else if err != nil {
		err = os.NewSyscallError("getsockopt", err)
	}
	c.takeLocked(slot, gen)
	c.mu.Unlock()
	p.timer.Stop()
	// The socket leaves the epoll set before it is handed on: its
	// descriptor is duplicated below, and epoll keeps a registration
	// while any duplicate lives.
	_ = unix.EpollCtl(c.ep, unix.EPOLL_CTL_DEL, p.fd, nil)
	switch {
	case err != nil:
	case soErr != 0:
		err = os.NewSyscallError("connect", unix.Errno(soErr))
	case len(p.first) > 0:
		err = writeAll(p.fd, p.first)
	}
	if err != nil {
		_ = unix.Close(p.fd)
		p.done(nil, err)
		return
	}
	f := os.NewFile(uintptr(p.fd), "")
	nc, err := net.FileConn(f) // a duplicate: f's descriptor closes below
	_ = f.Close()
	if err != nil {
		p.done(nil, err)
		return
	}
	p.done(nc, nil)
}

// writeAll writes b on the fresh socket fd without blocking: it fits in
// an empty send buffer, so a short write is a failure.
func writeAll(fd int, b []byte) error {
	for {
		n, err := unix.Write(fd, b)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return writeError{err}
		}
		if n < len(b) {
			return writeError{errors.New("short write")}
		}
		return nil
	}
}

// expire ends slot's connect at its deadline.
func (c *connector) expire(slot int32, gen uint32) {
	if p := c.take(slot, gen); p != nil {
		c.abort(p, context.DeadlineExceeded)
	}
}

// abort closes p's socket (its only descriptor: the close takes it out
// of the epoll set) and reports err.
func (c *connector) abort(p *pendingConnect, err error) {
	p.timer.Stop()
	_ = unix.Close(p.fd)
	p.done(nil, err)
}

// stop ends every connect in flight (context.Canceled) and the loop;
// later connects fail at once.
func (c *connector) stop() {
	c.mu.Lock()
	c.stopped = true
	var ps []*pendingConnect
	for s, p := range c.pending {
		if p != nil {
			ps = append(ps, c.takeLocked(int32(s), c.gens[s]))
		}
	}
	c.mu.Unlock()
	for _, p := range ps {
		c.abort(p, context.Canceled)
	}
	var one [8]byte
	binary.NativeEndian.PutUint64(one[:], 1)
	_, _ = unix.Write(c.wake, one[:])
	c.loops.Wait()
	_ = unix.Close(c.ep)
	_ = unix.Close(c.wake)
}
