//go:build !linux

package kraken

import (
	"errors"
	"net"
	"net/netip"
	"time"
)

// connector: Linux's (connector_linux.go). Elsewhere there is none, and
// every attempt's set-up runs on a goroutine of its own, Go's dialer
// included (ws.go, the engine).
type connector struct{}

func newConnector() (*connector, error) { return nil, nil }

func (*connector) connect(_ netip.Addr, _ netip.AddrPort, _ time.Time, _ []byte, done func(net.Conn, error)) {
	done(nil, errors.New("kraken: no connector outside Linux"))
}

func (*connector) stop() {}
