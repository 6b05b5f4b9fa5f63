//go:build !linux

package wsserve

// unsent returns 0: only Linux tells how many bytes of a socket's send queue
// the peer has not taken (SIOCOUTQ). Elsewhere room never waits, and a peer
// that stops reading is found by the connection's write timeout alone.
func (c *Conn) unsent() int { return 0 }

// sendQueue returns 0, 0: see unsent.
func (c *Conn) sendQueue() (unsent, size int) { return 0, 0 }
