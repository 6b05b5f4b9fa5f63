package wsserve

import (
	"sync"
	"sync/atomic"
	"time"
)

// Workers runs functions on goroutines it keeps for a while after their
// last task, instead of a new goroutine per task. nbio's own pool starts a
// goroutine per message, and a new goroutine starts with the smallest
// stack: decoding one Hello (protobuf, then the token's JSON) grew it
// several times, and those stack copies were 15 % of a session set-up's
// CPU under a dial storm (issue 10, item 13). A kept goroutine keeps its
// grown stack.
//
// Go never blocks and never queues: a task goes to an idle worker if one
// is waiting (the one idle the shortest time, whose stack is the most
// likely still in the cache), else to a new one, so a task that blocks (a
// history read over NATS) holds up nothing else. Workers exit after idle
// without a task (a reaper that runs only while workers wait looks every
// idle/4, so after at most 1.25 x idle), so an idle server keeps none. The
// zero value is not usable; use NewWorkers. Its methods are safe for
// concurrent use.
//
// An idle worker waits on a channel of its own, not in a select with a
// timer of its own as it used to: the select, the timer's arming and the
// reset after each task were about 3,400 of a hub's WebSocket session
// set-up's 121,000 user-mode instructions over its five tasks (head read,
// Hello, Welcome's writer, Subscribe, Subscribed's writer; callgrind,
// bench/hub/run.sh instructions, GOGC=off).
//
// A Server runs nbio's message handlers and its handshakes on its
// Config.Workers; a caller that passes its own runs its other short tasks
// (the hub: session writers) on the same kept goroutines.
type Workers struct {
	idle time.Duration

	mu      sync.Mutex
	ready   []*worker // waiting for a task, the longest idle first
	reaping bool      // the reaper runs

	started atomic.Int64 // workers started, for tests
	waiting atomic.Int64 // workers waiting for a task, for tests
}

// worker is one kept goroutine: Go hands it a task on its channel, or nil
// to end it.
type worker struct {
	tasks chan func()
	since time.Time // waiting since; guarded by Workers.mu
}

// NewWorkers returns a pool whose goroutines exit after idle without a
// task.
func NewWorkers(idle time.Duration) *Workers {
	return &Workers{idle: idle}
}

// Go runs f on a worker.
func (w *Workers) Go(f func()) {
	w.mu.Lock()
	if n := len(w.ready); n > 0 {
		wk := w.ready[n-1]
		w.ready[n-1] = nil
		w.ready = w.ready[:n-1]
		w.mu.Unlock()
		wk.tasks <- f // buffered: never blocks
		return
	}
	w.mu.Unlock()
	go w.run(&worker{tasks: make(chan func(), 1)}, f)
}

func (w *Workers) run(wk *worker, f func()) {
	w.started.Add(1)
	for f != nil {
		f()
		f = nil // not kept alive while idle
		w.waiting.Add(1)
		w.mu.Lock()
		wk.since = time.Now()
		w.ready = append(w.ready, wk)
		if !w.reaping {
			w.reaping = true
			go w.reap()
		}
		w.mu.Unlock()
		f = <-wk.tasks
		w.waiting.Add(-1)
	}
}

// reap ends the workers idle for idle or longer, every idle/4, until none
// waits.
func (w *Workers) reap() {
	t := time.NewTicker(max(w.idle/4, time.Millisecond))
	defer t.Stop()
	for range t.C {
		w.mu.Lock()
		now := time.Now()
		n := 0 // the ready list is ordered by since: the oldest first
		for n < len(w.ready) && now.Sub(w.ready[n].since) >= w.idle {
			w.ready[n].tasks <- nil
			n++
		}
		if n > 0 {
			m := copy(w.ready, w.ready[n:])
			clear(w.ready[m:])
			w.ready = w.ready[:m]
		}
		if len(w.ready) == 0 {
			w.reaping = false
			w.mu.Unlock()
			return
		}
		w.mu.Unlock()
	}
}
