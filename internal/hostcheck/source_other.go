//go:build !unix

package hostcheck

import "runtime"

// Host returns a source that can read nothing: the settings are Linux's
// and a Unix process's, and cannot be read on this operating system.
func Host() Source { return otherSource{} }

type otherSource struct{}

func (otherSource) Sysctl(string) (string, error) { return "", unsupportedOn(runtime.GOOS) }

func (otherSource) NoFile() (int64, int64, error) { return 0, 0, unsupportedOn(runtime.GOOS) }
