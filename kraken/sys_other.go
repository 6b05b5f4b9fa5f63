//go:build !linux

package kraken

import (
	"os/exec"
	"syscall"
)

// bindNoPort: the socket option is Linux's; elsewhere the kernel picks
// the source port at bind() time.
func bindNoPort(_, _ string, _ syscall.RawConn) error { return nil }

// maxDevicesHere: no file limit is read outside Linux.
func maxDevicesHere() int { return 1 << 20 }

// setDeathSignal: no parent-death signal outside Linux; the coordinator
// kills its local agents when it ends.
func setDeathSignal(_ *exec.Cmd) {}

// closeOnExecAll: outside Linux the descriptors are not listed; a child
// inherits what is not close-on-exec.
func closeOnExecAll() {}
