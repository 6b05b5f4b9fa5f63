//go:build !linux

package tlsconf_test

// lockThread does nothing where the thread's CPU time cannot be read.
func lockThread() func() { return func() {} }

// threadCPU returns 0: no server-ns/op is reported.
func threadCPU() int64 { return 0 }
