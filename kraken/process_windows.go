package kraken

import (
	"fmt"
	"os"
	"syscall"
)

// Windows has no stop and continue signals: a freeze is refused when it
// is sent (sendSignal), with the numbers Linux gives them for the message.
const (
	sigStop = syscall.Signal(0x13)
	sigCont = syscall.Signal(0x12)
)

// sendSignal kills process pid for SIGKILL, the one signal Windows can
// deliver to another process (TerminateProcess); any other is refused.
func sendSignal(pid int, sig syscall.Signal) error {
	if sig != syscall.SIGKILL {
		return fmt.Errorf("signal %d cannot be sent to a process on Windows (only a kill can)", int(sig))
	}
	p, err := os.FindProcess(pid)
	if err != nil {
		return err
	}
	return p.Kill()
}
