package authdns

import (
	"context"
	"fmt"
	"net"
	"syscall"
)

// udpReadBuffer is the receive buffer asked for each UDP socket (the kernel
// caps it at net.core.rmem_max): room for about 15,000 queries, so that a
// server preempted for a few milliseconds drops none.
const udpReadBuffer = 4 << 20

// listen binds n UDP sockets and one TCP listener to addr, all with
// SO_REUSEPORT where the platform has it. With port 0, the port the first
// UDP socket gets is used by the others and by TCP; if TCP cannot have it,
// a new port is tried.
func listen(addr string, n int) ([]*net.UDPConn, net.Listener, error) {
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, nil, err
	}
	lc := net.ListenConfig{Control: func(_, _ string, c syscall.RawConn) error {
		var serr error
		if err := c.Control(func(fd uintptr) { serr = reusePort(fd) }); err != nil {
			return err
		}
		return serr
	}}
	if !reusePortSupported {
		n = 1
	}
	ctx := context.Background()
	var lastErr error
	for attempt := 0; attempt < 5; attempt++ {
		first, err := lc.ListenPacket(ctx, "udp", addr)
		if err != nil {
			return nil, nil, err
		}
		bound := first.LocalAddr().String()
		conns := []*net.UDPConn{first.(*net.UDPConn)}
		_ = conns[0].SetReadBuffer(udpReadBuffer)
		closeAll := func() {
			for _, c := range conns {
				_ = c.Close()
			}
		}
		for len(conns) < n {
			c, err := lc.ListenPacket(ctx, "udp", bound)
			if err != nil {
				closeAll()
				return nil, nil, fmt.Errorf("socket %d of %d: %w", len(conns)+1, n, err)
			}
			uc := c.(*net.UDPConn)
			_ = uc.SetReadBuffer(udpReadBuffer)
			conns = append(conns, uc)
		}
		tl, err := lc.Listen(ctx, "tcp", bound)
		if err == nil {
			return conns, tl, nil
		}
		closeAll()
		lastErr = err
		if port != "0" {
			break
		}
	}
	return nil, nil, lastErr
}
