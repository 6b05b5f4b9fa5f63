//go:build !linux

package authdns

const reusePortSupported = false

func reusePort(uintptr) error { return nil }
