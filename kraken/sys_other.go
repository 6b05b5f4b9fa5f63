//go:build !linux

package kraken

import "syscall"

// bindNoPort: the socket option is Linux's; elsewhere the kernel picks
// the source port at bind() time.
func bindNoPort(_, _ string, _ syscall.RawConn) error { return nil }

// maxDevicesHere: no file limit is read outside Linux.
func maxDevicesHere() int { return 1 << 20 }
