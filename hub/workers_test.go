package hub

import (
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/corralhq/corral/internal/testkit"
)

func TestWorkers(t *testing.T) {
	t.Run("tasks one after another run on one kept worker", func(t *testing.T) {
		w := newWorkers(time.Minute)
		done := make(chan struct{})
		for range 100 {
			w.Go(func() { done <- struct{}{} })
			<-done
			// The worker is between its task and its wait for the next:
			// let it get there before the next Go.
			testkit.WaitFor(t, 5*time.Second, "the worker waits for work", func() bool { return w.waiting.Load() == 1 })
		}
		if n := w.started.Load(); n != 1 {
			t.Fatalf("%d workers started for tasks one at a time, want 1", n)
		}
	})
	t.Run("Go never waits: tasks that block get workers of their own", func(t *testing.T) {
		w := newWorkers(time.Minute)
		release := make(chan struct{})
		var running sync.WaitGroup
		running.Add(50)
		for range 50 {
			w.Go(func() {
				running.Done()
				<-release
			})
		}
		running.Wait() // all 50 at once
		close(release)
	})
	t.Run("idle workers exit", func(t *testing.T) {
		base := runtime.NumGoroutine()
		w := newWorkers(20 * time.Millisecond)
		var wg sync.WaitGroup
		wg.Add(10)
		for range 10 {
			w.Go(func() { wg.Done(); time.Sleep(10 * time.Millisecond) })
		}
		wg.Wait()
		testkit.WaitFor(t, 5*time.Second, "idle workers gone", func() bool { return runtime.NumGoroutine() <= base })
	})
}
