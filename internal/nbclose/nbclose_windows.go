//go:build windows

package nbclose

import "github.com/lesismal/nbio"

// Close closes c. On Windows nbio serves each connection with goroutines
// of the standard library, not with a poller of its own, so there is no
// batch of events to race with.
func Close(c *nbio.Conn) error { return c.Close() }
