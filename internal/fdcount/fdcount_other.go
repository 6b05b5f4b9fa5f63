//go:build !linux

package fdcount

// Open returns false: only Linux lists a process's descriptors in /proc.
func Open() (int, bool) { return 0, false }
