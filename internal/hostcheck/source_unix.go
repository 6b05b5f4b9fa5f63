//go:build unix && !linux

package hostcheck

import (
	"runtime"
	"syscall"
)

// Host returns the running host's settings: this process's resource
// limits; kernel parameters are Linux's and cannot be read here.
func Host() Source { return unixSource{} }

type unixSource struct{}

func (unixSource) Sysctl(string) (string, error) { return "", unsupported() }

func (unixSource) NoFile() (int64, int64, error) {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		return 0, 0, err
	}
	return clampRlimit(uint64(rl.Cur)), clampRlimit(uint64(rl.Max)), nil
}

func clampRlimit(v uint64) int64 {
	if v > 1<<62 {
		return 1 << 62
	}
	return int64(v)
}

func unsupported() error { return unsupportedOn(runtime.GOOS) }
