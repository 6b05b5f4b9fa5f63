//go:build !unix

package proccpu

import "time"

// Self is this process's user and system time; 0 where getrusage is not
// available (the benchmarks run on Linux).
func Self() time.Duration { return 0 }
