package hub

// Kill stops the hub as a crash would: every connection is cut without a
// frame and nothing is drained, so its clients see a broken connection
// and no retry hint. It returns once Run has returned. `fleet` uses it to
// show what a fabric does when one origin dies; a real shutdown is
// Shutdown.
func (h *Hub) Kill() { h.abort() }
