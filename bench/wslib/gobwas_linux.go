package main

import (
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/gobwas/ws"
	"github.com/gobwas/ws/wsutil"
	"golang.org/x/sys/unix"
)

// gobwasServer is gobwas/ws on a raw listener with an epoll instance of its
// own: an idle connection is a net.Conn registered (one-shot) in epoll, with
// no goroutine and no buffer. When it becomes readable a goroutine reads
// one message, answers, and re-arms the registration.
type gobwasServer struct {
	open  atomic.Int64
	ln    net.Listener
	epfd  int
	mu    sync.Mutex
	conns map[int32]*gobwasConn
	up    ws.Upgrader
}

type gobwasConn struct {
	conn net.Conn
	fd   int32
}

func newGobwasServer() *gobwasServer {
	return &gobwasServer{conns: make(map[int32]*gobwasConn), up: ws.Upgrader{
		Protocol: func(p []byte) bool {
			for _, sp := range subprotocols {
				if string(p) == sp {
					return true
				}
			}
			return false
		},
	}}
}

func (s *gobwasServer) Open() int64 { return s.open.Load() }
func (s *gobwasServer) Close()      { _ = s.ln.Close(); _ = unix.Close(s.epfd) }

func (s *gobwasServer) Start(addr string) (string, error) {
	epfd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return "", err
	}
	s.epfd = epfd
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return "", err
	}
	s.ln = ln
	go s.acceptLoop()
	go s.pollLoop()
	return ln.Addr().String(), nil
}

func (s *gobwasServer) acceptLoop() {
	for {
		c, err := s.ln.Accept()
		if err != nil {
			return
		}
		go s.upgrade(c)
	}
}

func (s *gobwasServer) upgrade(c net.Conn) {
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := s.up.Upgrade(c); err != nil {
		_ = c.Close()
		return
	}
	_ = c.SetDeadline(time.Time{})
	sc, ok := c.(syscall.Conn)
	if !ok {
		_ = c.Close()
		return
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		_ = c.Close()
		return
	}
	var fd int32
	_ = raw.Control(func(f uintptr) { fd = int32(f) })
	gc := &gobwasConn{conn: c, fd: fd}
	s.mu.Lock()
	s.conns[fd] = gc
	s.mu.Unlock()
	s.open.Add(1)
	if err := unix.EpollCtl(s.epfd, unix.EPOLL_CTL_ADD, int(fd), &unix.EpollEvent{Events: unix.EPOLLIN | unix.EPOLLRDHUP | unix.EPOLLONESHOT, Fd: fd}); err != nil {
		s.drop(gc)
	}
}

func (s *gobwasServer) drop(gc *gobwasConn) {
	s.mu.Lock()
	_, ok := s.conns[gc.fd]
	delete(s.conns, gc.fd)
	s.mu.Unlock()
	if ok {
		_ = unix.EpollCtl(s.epfd, unix.EPOLL_CTL_DEL, int(gc.fd), nil)
		_ = gc.conn.Close()
		s.open.Add(-1)
	}
}

func (s *gobwasServer) pollLoop() {
	events := make([]unix.EpollEvent, 256)
	for {
		n, err := unix.EpollWait(s.epfd, events, -1)
		if err != nil {
			if errors.Is(err, unix.EINTR) {
				continue
			}
			return
		}
		for i := 0; i < n; i++ {
			s.mu.Lock()
			gc := s.conns[events[i].Fd]
			s.mu.Unlock()
			if gc != nil {
				go s.serve(gc)
			}
		}
	}
}

// serve reads one message (or control frame) and re-arms the connection.
func (s *gobwasServer) serve(gc *gobwasConn) {
	if err := s.readOne(gc.conn); err != nil {
		s.drop(gc)
		return
	}
	if err := unix.EpollCtl(s.epfd, unix.EPOLL_CTL_MOD, int(gc.fd), &unix.EpollEvent{Events: unix.EPOLLIN | unix.EPOLLRDHUP | unix.EPOLLONESHOT, Fd: gc.fd}); err != nil {
		s.drop(gc)
	}
}

func (s *gobwasServer) readOne(c net.Conn) error {
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	defer c.SetReadDeadline(time.Time{})
	control := func(h ws.Header, r io.Reader) error {
		return wsutil.ControlHandler{Src: r, Dst: c, State: ws.StateServerSide, DisableSrcCiphering: true}.Handle(h)
	}
	rd := wsutil.Reader{
		Source:         c,
		State:          ws.StateServerSide,
		CheckUTF8:      true,
		MaxFrameSize:   maxMessage,
		MaxMessageSize: maxMessage,
		OnIntermediate: control,
	}
	h, err := rd.NextFrame()
	if err != nil {
		return s.fail(c, err)
	}
	if h.OpCode.IsControl() {
		if err := control(h, &rd); err != nil {
			return s.fail(c, err)
		}
		return nil
	}
	data, err := io.ReadAll(&rd)
	if err != nil {
		return s.fail(c, err)
	}
	if string(data) == closeTrigger {
		_ = ws.WriteFrame(c, ws.NewCloseFrame(ws.NewCloseFrameBody(closeCode, closeReason)))
		return errors.New("closed by the server")
	}
	return wsutil.WriteServerMessage(c, h.OpCode, data)
}

// fail sends the close frame that matches err (when there is one to send)
// and returns err so the caller drops the connection.
func (s *gobwasServer) fail(c net.Conn, err error) error {
	var closed wsutil.ClosedError
	if errors.As(err, &closed) {
		return err // the control handler already answered the close
	}
	var code ws.StatusCode
	var pe ws.ProtocolError
	switch {
	case errors.Is(err, wsutil.ErrFrameTooLarge), errors.Is(err, wsutil.ErrMessageTooLarge):
		code = ws.StatusMessageTooBig
	case errors.Is(err, wsutil.ErrInvalidUTF8):
		code = ws.StatusInvalidFramePayloadData
	case errors.As(err, &pe):
		code = ws.StatusProtocolError
	default:
		return err
	}
	_ = ws.WriteFrame(c, ws.NewCloseFrame(ws.NewCloseFrameBody(code, "")))
	return err
}
