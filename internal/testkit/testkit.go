// Package testkit holds the small helpers corral's tests share: polling for
// a condition instead of sleeping (after nats-server's checkFor), a buffer
// that collects logs from many goroutines, a manual clock, a bare
// WebSocket client that writes frames as given, masked or not (ws.go),
// and the series of a Prometheus metric family (metrics.go).
//
// The package imports nothing of corral; only tests import it.
package testkit

import (
	"bytes"
	"sync"
	"testing"
	"time"
)

// WaitFor polls cond every few milliseconds until it holds, and fails the
// test with "timed out after <timeout> waiting for <what>" when timeout
// passes first. The timeout is a safety net for a stuck test, not a
// measurement: give it generous room for a loaded machine.
func WaitFor(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
			return
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// SyncBuffer is a bytes.Buffer safe for concurrent writers, for capturing
// logs. The zero value is ready to use.
type SyncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write appends p.
func (s *SyncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// String returns everything written so far.
func (s *SyncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// Clock is a manual clock for code that takes an injected `Now func()
// time.Time`: time stands still until Advance moves it. It is safe for
// concurrent use.
type Clock struct {
	mu sync.Mutex
	t  time.Time
}

// NewClock returns a Clock reading t.
func NewClock(t time.Time) *Clock { return &Clock{t: t} }

// Now returns the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

// Advance moves the clock forward by d.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}
