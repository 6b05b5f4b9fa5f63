// Package sendwatch bounds a blocking send: a gRPC stream's Send blocks
// while the peer does not read (flow control), and a Watch calls its
// Stalled function when one Send has been blocked for Timeout, so that the
// server can close the session (which unblocks the Send). The hub and the
// edge watch their gRPC sessions' writers with it. It imports nothing of
// corral.
package sendwatch

import (
	"sync/atomic"
	"time"
)

// Watch times the sends of one writer goroutine. Set Timeout and Stalled
// before the first Send, then call Send from that goroutine only; Stalled
// runs on a timer's goroutine. The zero Watch is not usable (no Timeout);
// a Watch must not be copied once used.
type Watch struct {
	// Timeout is how long one send may block before Stalled is called.
	Timeout time.Duration
	// Stalled is called (on its own goroutine) when a send has been
	// blocked for Timeout; it is not called for a send that finished.
	Stalled func()

	start atomic.Int64 // unix ns the current send began, 0 between sends
	timer *time.Timer  // made by the first Send; the writer's only
}

// Send calls send, watching it, and returns its error.
func (w *Watch) Send(send func() error) error {
	w.start.Store(time.Now().UnixNano())
	if w.timer == nil {
		w.timer = time.AfterFunc(w.Timeout, w.fired)
	} else {
		w.timer.Reset(w.Timeout)
	}
	err := send()
	w.start.Store(0)
	w.timer.Stop()
	return err
}

// fired runs when the timer fires: Stalled, if a send is still blocked
// after Timeout (not when it finished, or a new one began, meanwhile).
func (w *Watch) fired() {
	st := w.start.Load()
	if st == 0 || time.Since(time.Unix(0, st)) < w.Timeout {
		return
	}
	w.Stalled()
}

// Stop stops the timer of the last send, if any; call it from the writer
// goroutine when it is done sending.
func (w *Watch) Stop() {
	if w.timer != nil {
		w.timer.Stop()
	}
}
