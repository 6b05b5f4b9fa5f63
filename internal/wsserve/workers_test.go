package wsserve

import (
	"runtime"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/corralhq/corral/internal/testkit"
)

func TestWorkers(t *testing.T) {
	t.Run("tasks one after another run on one kept worker", func(t *testing.T) {
		// In a synctest bubble, synctest.Wait returns once the worker is
		// blocked in its select for the next task, so each Go below meets
		// a waiting worker: a wait on the waiting counter alone raced with
		// the moment between its increment and the select.
		synctest.Test(t, func(t *testing.T) {
			w := NewWorkers(time.Minute)
			done := make(chan struct{})
			for range 100 {
				w.Go(func() { done <- struct{}{} })
				<-done
				synctest.Wait()
			}
			if n := w.started.Load(); n != 1 {
				t.Fatalf("%d workers started for tasks one at a time, want 1", n)
			}
			time.Sleep(2 * time.Minute) // past idle: the worker exits and the bubble can end
		})
	})
	t.Run("Go never waits: tasks that block get workers of their own", func(t *testing.T) {
		w := NewWorkers(time.Minute)
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
		w := NewWorkers(20 * time.Millisecond)
		var wg sync.WaitGroup
		wg.Add(10)
		for range 10 {
			w.Go(func() { wg.Done(); time.Sleep(10 * time.Millisecond) })
		}
		wg.Wait()
		testkit.WaitFor(t, 5*time.Second, "idle workers gone", func() bool { return runtime.NumGoroutine() <= base })
	})
}
