package testkit

import (
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// recorder is a testing.TB that records Fatalf instead of stopping.
type recorder struct {
	testing.TB
	failed string
}

func (r *recorder) Helper() {}
func (r *recorder) Fatalf(format string, args ...any) {
	r.failed = fmt.Sprintf(format, args...)
}

func TestWaitForReturnsOnceTrue(t *testing.T) {
	var n atomic.Int32
	go func() {
		for range 3 {
			n.Add(1)
		}
	}()
	r := &recorder{TB: t}
	WaitFor(r, 10*time.Second, "three", func() bool { return n.Load() == 3 })
	if r.failed != "" {
		t.Fatal(r.failed)
	}
}

func TestWaitForFailsNamingWhat(t *testing.T) {
	r := &recorder{TB: t}
	calls := 0
	WaitFor(r, 10*time.Millisecond, "the impossible", func() bool { calls++; return calls > 1e9 })
	if !strings.Contains(r.failed, "waiting for the impossible") {
		t.Fatalf("failure message %q", r.failed)
	}
}

func TestSyncBufferConcurrentWrites(t *testing.T) {
	var b SyncBuffer
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 100 {
				b.Write([]byte("x"))
			}
		})
	}
	wg.Wait()
	if got := len(b.String()); got != 800 {
		t.Fatalf("len = %d, want 800", got)
	}
}

func TestClock(t *testing.T) {
	start := time.Unix(1000, 0)
	c := NewClock(start)
	if !c.Now().Equal(start) {
		t.Fatalf("Now = %v, want %v", c.Now(), start)
	}
	c.Advance(1500 * time.Millisecond)
	if got := c.Now().Sub(start); got != 1500*time.Millisecond {
		t.Fatalf("advanced by %v, want 1.5s", got)
	}
}
