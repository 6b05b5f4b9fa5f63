//go:build !windows

package kraken

import "syscall"

// The freeze and thaw signals of a storm's kill with freeze.
const (
	sigStop = syscall.SIGSTOP
	sigCont = syscall.SIGCONT
)

// sendSignal sends sig to process pid.
func sendSignal(pid int, sig syscall.Signal) error { return syscall.Kill(pid, sig) }
