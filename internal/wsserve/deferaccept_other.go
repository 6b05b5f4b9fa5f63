//go:build !linux

package wsserve

import "net"

// deferAccept does nothing: TCP_DEFER_ACCEPT is Linux's (see
// deferaccept_linux.go).
func deferAccept(net.Listener) {}
