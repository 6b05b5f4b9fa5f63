//go:build linux

package wsserve

import (
	"net"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/corralhq/corral/internal/testkit"
)

// TestServeDefersAccept checks that Serve sets TCP_DEFER_ACCEPT on its
// listener, so that a new connection reaches the head read with its head
// already readable (no EAGAIN and park on Go's netpoller per session).
func TestServeDefersAccept(t *testing.T) {
	s, err := New(Config{Path: "/v1/ws", Subprotocols: testSubprotocols, MaxFrameBytes: 1 << 10}, new(testHandler), nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	defer s.Stop()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- s.Serve(ln) }()
	raw, err := ln.(*net.TCPListener).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, 10*time.Second, "TCP_DEFER_ACCEPT on the listener", func() bool {
		v := 0
		_ = raw.Control(func(fd uintptr) { v, _ = unix.GetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_DEFER_ACCEPT) })
		return v > 0
	})
	_ = ln.Close()
	if err := <-served; err != nil {
		t.Fatal(err)
	}
}
