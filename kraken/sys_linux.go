package kraken

import (
	"errors"
	"os"
	"os/exec"
	"strconv"
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

// closeOnExecAll marks every open descriptor of the process (but stdin,
// stdout and stderr) close-on-exec, so that a child started now inherits
// none. Go opens its own files that way, but a descriptor made by dup(2)
// is not (nbio's NBConn dups every socket it takes over: a hub's accepted
// connections, a kraken's dialed ones). A local agent that inherited a
// hub's socket keeps it open after the hub closed its own descriptor, and
// the hub's epoll set then keeps reporting that socket's events under the
// descriptor number the hub reuses for a new connection, which it then
// closes (seen as a storm of cut sessions).
func closeOnExecAll() {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return
	}
	for _, e := range ents {
		if fd, err := strconv.Atoi(e.Name()); err == nil && fd > 2 {
			syscall.CloseOnExec(fd)
		}
	}
}
