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
		// blocked in its wait for the next task, so each Go below meets
		// a waiting worker: a wait on the waiting counter alone raced with
		// the moment between its increment and the wait.
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
	t.Run("a worker exits after idle without a task, not before", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			w := NewWorkers(time.Minute)
			done := make(chan struct{})
			w.Go(func() { close(done) })
			<-done
			time.Sleep(59 * time.Second)
			synctest.Wait()
			if n := w.waiting.Load(); n != 1 {
				t.Fatalf("%d workers waiting 59 s after the last task, want 1 (idle is 1 min)", n)
			}
			w.Go(func() {}) // the kept worker: idle starts again
			synctest.Wait()
			time.Sleep(59 * time.Second)
			synctest.Wait()
			if n, s := w.waiting.Load(), w.started.Load(); n != 1 || s != 1 {
				t.Fatalf("%d waiting, %d started after a second task, want 1 and 1", n, s)
			}
			time.Sleep(17 * time.Second) // past idle + idle/4
			synctest.Wait()
			if n := w.waiting.Load(); n != 0 {
				t.Fatalf("%d workers waiting 76 s after the last task, want 0", n)
			}
		})
	})
	t.Run("the worker idle the shortest time takes the task", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			w := NewWorkers(time.Minute)
			// Two workers: one busy while the other starts.
			release, ran := make(chan struct{}), make(chan int, 3)
			w.Go(func() { <-release; ran <- 1 })
			w.Go(func() { ran <- 2 })
			<-ran
			synctest.Wait() // worker 2 waits
			close(release)
			<-ran
			synctest.Wait() // worker 1 waits, the later of the two
			id := make(chan uint64, 1)
			w.Go(func() { id <- goid() })
			first := <-id
			synctest.Wait()
			w.Go(func() { id <- goid() })
			if second := <-id; second != first {
				t.Fatalf("tasks one after another ran on goroutines %d and %d: the last idle worker should take each", first, second)
			}
			time.Sleep(2 * time.Minute)
		})
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

// goid returns the running goroutine's id (from its stack header).
func goid() uint64 {
	var buf [64]byte
	b := buf[:runtime.Stack(buf[:], false)]
	b = b[len("goroutine "):]
	var id uint64
	for _, c := range b {
		if c < '0' || c > '9' {
			break
		}
		id = id*10 + uint64(c-'0')
	}
	return id
}
