//go:build linux

package wsserve

import (
	"net"

	"golang.org/x/sys/unix"
)

// deferAcceptSeconds is the listener's TCP_DEFER_ACCEPT: the kernel hands
// a connection to accept only once its first bytes (the request head, a
// TLS ClientHello) have arrived, or after about this long without any.
// The head read then finds the head there instead of failing with EAGAIN
// and parking on Go's netpoller (0.4 of a read system call and a
// goroutine park per session under a dial storm, issue 10, item 13); a
// connection that sends nothing is accepted a second later and then
// closed by HTTPReadHeaderTimeout as before.
const deferAcceptSeconds = 1

// deferAccept sets TCP_DEFER_ACCEPT on ln when it is a TCP listener.
func deferAccept(ln net.Listener) {
	tl, ok := ln.(*net.TCPListener)
	if !ok {
		return
	}
	raw, err := tl.SyscallConn()
	if err != nil {
		return
	}
	_ = raw.Control(func(fd uintptr) {
		_ = unix.SetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_DEFER_ACCEPT, deferAcceptSeconds)
	})
}
