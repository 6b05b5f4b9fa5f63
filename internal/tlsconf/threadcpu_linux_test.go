package tlsconf_test

import (
	"runtime"

	"golang.org/x/sys/unix"
)

// lockThread locks the calling goroutine to its OS thread; the returned
// function unlocks it.
func lockThread() func() {
	runtime.LockOSThread()
	return runtime.UnlockOSThread
}

// threadCPU returns the CPU time of the calling thread in nanoseconds.
func threadCPU() int64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts); err != nil {
		return 0
	}
	return ts.Nano()
}
