package kraken

import (
	"errors"
	"os/exec"
	"syscall"

	"golang.org/x/sys/unix"
)

// bindNoPort asks the kernel to choose the source port at connect() time,
// by the whole 4-tuple, instead of at bind() by the source address alone:
// many sources then share the ephemeral range.
func bindNoPort(_, _ string, c syscall.RawConn) error {
	var serr error
	err := c.Control(func(fd uintptr) {
		serr = unix.SetsockoptInt(int(fd), unix.IPPROTO_IP, unix.IP_BIND_ADDRESS_NO_PORT, 1)
	})
	return errors.Join(err, serr)
}

// maxDevicesHere bounds the devices of one process: each holds a socket,
// within the file limit less room for the process's other files.
func maxDevicesHere() int {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		return 1 << 20
	}
	return max(int(rl.Cur)-256, 0)
}

// setDeathSignal has the kernel kill cmd's process when the process that
// started it dies, so that a local agent is never orphaned.
func setDeathSignal(cmd *exec.Cmd) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
}
