package sendwatch

import (
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// TestStalledOnlyForABlockedSend: sends that finish within Timeout never
// call Stalled; one blocked past it does, once, while it is still blocked.
func TestStalledOnlyForABlockedSend(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var stalls atomic.Int32
		unblock := make(chan struct{})
		w := &Watch{Timeout: time.Second, Stalled: func() {
			stalls.Add(1)
			close(unblock)
		}}
		for range 5 {
			if err := w.Send(func() error { time.Sleep(900 * time.Millisecond); return nil }); err != nil {
				t.Fatal(err)
			}
		}
		time.Sleep(2 * time.Second)
		synctest.Wait()
		if n := stalls.Load(); n != 0 {
			t.Fatalf("%d stalls for sends within the timeout", n)
		}
		start := time.Now()
		_ = w.Send(func() error { <-unblock; return nil })
		if n, el := stalls.Load(), time.Since(start); n != 1 || el != time.Second {
			t.Fatalf("%d stalls, send unblocked after %v; want 1 after 1s", n, el)
		}
	})
}
