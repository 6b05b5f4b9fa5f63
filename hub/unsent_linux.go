package hub

import (
	"syscall"

	"golang.org/x/sys/unix"
)

// unsent returns the bytes in the socket's kernel send queue, or 0 when it
// cannot tell.
func (t *wsTransport) unsent() int {
	sc, ok := t.conn.Conn.(syscall.Conn)
	if !ok {
		return 0
	}
	raw, _ := sc.SyscallConn() // not kept: this is the slow path, and idle sessions stay small
	if raw == nil {
		return 0
	}
	n := 0
	_ = raw.Control(func(fd uintptr) {
		n, _ = unix.IoctlGetInt(int(fd), unix.SIOCOUTQ)
	})
	return n
}
