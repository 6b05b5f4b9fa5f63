//go:build !linux || !(amd64 || arm64)

package authdns

import (
	"errors"
	"net"
)

// serveUDP answers datagrams one at a time until the socket is closed.
func (w *worker) serveUDP(c *net.UDPConn) {
	in := make([]byte, 4096)
	out := make([]byte, 4096+512)
	for {
		n, from, err := c.ReadFromUDPAddrPort(in)
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			continue
		}
		w.st.batches.Add(1)
		resp, o := w.handle(in[:n], from.Addr().Unmap(), false, out)
		if o == outAnswer {
			_, _ = c.WriteToUDPAddrPort(resp, from)
		}
	}
}
