//go:build !unix

package main

import "time"

// selfCPU is this process's user and system time; 0 where getrusage is
// not available (the benchmark runs on Linux: bench/edge/tls.sh).
func selfCPU() time.Duration { return 0 }
