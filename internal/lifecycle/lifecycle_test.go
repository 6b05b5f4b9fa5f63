package lifecycle

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// part blocks in Run until Shutdown or its context ends; stop is closed by
// the first Shutdown.
type part struct {
	fail error
	stop chan struct{}
	once sync.Once
}

func newPart(fail error) *part {
	return &part{fail: fail, stop: make(chan struct{})}
}

func (p *part) Run(ctx context.Context) error {
	if p.fail != nil {
		return p.fail
	}
	select {
	case <-p.stop:
	case <-ctx.Done():
	}
	return nil
}

func (p *part) Shutdown(context.Context) error {
	p.once.Do(func() { close(p.stop) })
	return nil
}

func (p *part) wasShutdown() bool {
	select {
	case <-p.stop:
		return true
	default:
		return false
	}
}

func TestRunStopsAllOnContextEnd(t *testing.T) {
	a, b := newPart(nil), newPart(nil)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Run(ctx, nil, time.Second, Named{"a", a}, Named{"b", b}) }()
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("clean stop returned %v", err)
	}
	if !a.wasShutdown() || !b.wasShutdown() {
		t.Error("a part was not shut down")
	}
}

func TestRunStopsOthersWhenOneFails(t *testing.T) {
	a := newPart(nil)
	b := newPart(errors.New("bind: address in use"))
	err := Run(context.Background(), nil, time.Second, Named{"server", a}, Named{"admin", b})
	if err == nil || !strings.Contains(err.Error(), "admin: bind: address in use") {
		t.Fatalf("err = %v, want the failing part named", err)
	}
	if !a.wasShutdown() {
		t.Error("the healthy part was not shut down")
	}
}

// stubborn ignores Shutdown and only stops when its Run context ends.
type stubborn struct{}

func (stubborn) Run(ctx context.Context) error  { <-ctx.Done(); return nil }
func (stubborn) Shutdown(context.Context) error { return nil }

func TestRunCancelsPartsThatIgnoreShutdown(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := Run(ctx, nil, 10*time.Millisecond, Named{"s", stubborn{}}); err != nil {
		t.Fatal(err)
	}
}

// slowPart is a server whose Shutdown (its drain) blocks until release is
// closed.
type slowPart struct {
	*part
	draining chan struct{} // closed when Shutdown begins
	release  chan struct{}
}

func (p *slowPart) Shutdown(ctx context.Context) error {
	close(p.draining)
	<-p.release
	return p.part.Shutdown(ctx)
}

// adminPart records Stopping.
type adminPart struct {
	*part
	stopping atomic.Bool
}

func (p *adminPart) Stopping() { p.stopping.Store(true) }

func TestRunStopsTheFirstPartLast(t *testing.T) {
	adm := &adminPart{part: newPart(nil)}
	srv := &slowPart{part: newPart(nil), draining: make(chan struct{}), release: make(chan struct{})}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Run(ctx, nil, time.Minute, Named{"admin", adm}, Named{"server", srv}) }()
	cancel()
	<-srv.draining
	// The server drains: the admin listener has been told, and still runs.
	if !adm.stopping.Load() {
		t.Error("the admin part was not told of the shutdown before the server drained")
	}
	if adm.wasShutdown() {
		t.Fatal("the admin part was shut down while the server drained")
	}
	close(srv.release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if !adm.wasShutdown() {
		t.Error("the admin part was never shut down")
	}
}

// TestEvery counts the calls of a 1 s period in a bubble: none at once,
// one a second, none after ctx ends.
func TestEvery(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 3500*time.Millisecond)
		defer cancel()
		calls := 0
		start := time.Now()
		Every(ctx, time.Second, func() {
			calls++
			if want := time.Duration(calls) * time.Second; time.Since(start) != want {
				t.Errorf("call %d at %v, want %v", calls, time.Since(start), want)
			}
		})
		if calls != 3 {
			t.Fatalf("%d calls in 3.5 s of a 1 s period, want 3", calls)
		}
		if el := time.Since(start); el != 3500*time.Millisecond {
			t.Fatalf("returned at %v, want when ctx ended (3.5s)", el)
		}
	})
}
