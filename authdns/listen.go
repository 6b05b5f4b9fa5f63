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
// SO_REUSEPORT where the platform has it. With port 0, the TCP listener
// takes a free port and the UDP sockets are bound to it; if UDP cannot
// have it, a new port is tried. TCP chooses because its ports are the
// scarce ones: every outgoing connection holds one of the ephemeral range,
// so a port a UDP socket got was often taken for TCP on a busy machine
// (16,500 TCP sockets in the 28,000 ports of the range on 2026-12-01:
// all 5 tries failed in 2 of about 12 runs of edge's TestOriginsLookup).
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
		var tl net.Listener
		bind := addr
		if port == "0" {
			if tl, err = lc.Listen(ctx, "tcp", addr); err != nil {
				return nil, nil, err
			}
			bind = tl.Addr().String()
		}
		conns, err := listenUDP(ctx, lc, bind, n)
		if err != nil {
			if tl != nil {
				_ = tl.Close()
			}
			lastErr = err
			if port != "0" {
				break
			}
			continue
		}
		if tl == nil {
			if tl, err = lc.Listen(ctx, "tcp", conns[0].LocalAddr().String()); err != nil {
				for _, c := range conns {
					_ = c.Close()
				}
				return nil, nil, err
			}
		}
		return conns, tl, nil
	}
	return nil, nil, lastErr
}

// listenUDP binds n UDP sockets to addr (the first one's port for the
// others when addr's port is 0).
func listenUDP(ctx context.Context, lc net.ListenConfig, addr string, n int) ([]*net.UDPConn, error) {
	first, err := lc.ListenPacket(ctx, "udp", addr)
	if err != nil {
		return nil, err
	}
	bound := first.LocalAddr().String()
	conns := []*net.UDPConn{first.(*net.UDPConn)}
	_ = conns[0].SetReadBuffer(udpReadBuffer)
	for len(conns) < n {
		c, err := lc.ListenPacket(ctx, "udp", bound)
		if err != nil {
			for _, c := range conns {
				_ = c.Close()
			}
			return nil, fmt.Errorf("socket %d of %d: %w", len(conns)+1, n, err)
		}
		uc := c.(*net.UDPConn)
		_ = uc.SetReadBuffer(udpReadBuffer)
		conns = append(conns, uc)
	}
	return conns, nil
}
