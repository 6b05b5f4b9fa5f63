//go:build linux || darwin || netbsd || freebsd || openbsd || dragonfly

package nbclose

import (
	"errors"
	"syscall"

	"github.com/lesismal/nbio"
)

// Close shuts c down for its poller to close (see the package comment).
// It is a no-op on a connection already closed. A socket the peer has
// reset cannot be shut down (ENOTCONN); it reports EPOLLHUP (EV_EOF) until
// it is closed, so its poller closes it as well. Where shutdown fails
// otherwise, Close closes c at once, as nbio's Close does.
func Close(c *nbio.Conn) error {
	if !c.IsTCP() && !c.IsUnix() {
		return c.Close()
	}
	// nbio sets closed under the connection's lock before it frees the
	// descriptor: while the lock is held and closed is false, the number
	// is still this connection's, never a newer one's.
	c.Lock()
	closed, _ := c.IsClosed()
	var err error
	if !closed {
		var raw syscall.RawConn
		if raw, err = c.SyscallConn(); err == nil {
			_ = raw.Control(func(fd uintptr) { err = syscall.Shutdown(int(fd), syscall.SHUT_RDWR) })
		}
	}
	c.Unlock()
	if closed {
		return nil
	}
	if err != nil && !errors.Is(err, syscall.ENOTCONN) {
		return c.Close()
	}
	return nil
}
