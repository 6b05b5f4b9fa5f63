package hostcheck

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// Host returns the running host's settings: /proc/sys and this process's
// resource limits.
func Host() Source { return procSource{root: "/proc/sys"} }

type procSource struct{ root string }

func (p procSource) Sysctl(name string) (string, error) {
	b, err := os.ReadFile(filepath.Join(p.root, strings.ReplaceAll(name, ".", "/")))
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(string(b)), nil
}

func (procSource) NoFile() (int64, int64, error) { return noFile() }

func noFile() (int64, int64, error) {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		return 0, 0, err
	}
	return clampRlimit(rl.Cur), clampRlimit(rl.Max), nil
}

// clampRlimit turns RLIM_INFINITY into the largest int64.
func clampRlimit(v uint64) int64 {
	if v > 1<<62 {
		return 1 << 62
	}
	return int64(v)
}
