package wsserve

import (
	"syscall"

	"golang.org/x/sys/unix"
)

// unsent returns the bytes in the socket's kernel send queue, or 0 when it
// cannot tell.
func (c *Conn) unsent() int {
	n, _ := c.sendQueue()
	return n
}

// sendQueue returns the bytes in the socket's kernel send queue and the
// queue's current size (SO_SNDBUF), or 0, 0 when it cannot tell.
func (c *Conn) sendQueue() (unsent, size int) {
	sc, ok := c.ws.Conn.(syscall.Conn)
	if !ok {
		return 0, 0
	}
	raw, _ := sc.SyscallConn() // not kept: this is the slow path, and idle sessions stay small
	if raw == nil {
		return 0, 0
	}
	_ = raw.Control(func(fd uintptr) {
		unsent, _ = unix.IoctlGetInt(int(fd), unix.SIOCOUTQ)
		size, _ = unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_SNDBUF)
	})
	return unsent, size
}
