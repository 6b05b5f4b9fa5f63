package wsserve

import (
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
// is waiting, else to a new one, so a task that blocks (a history read
// over NATS) holds up nothing else. Workers exit after idle without a
// task, so an idle server keeps none. The zero value is not usable; use
// NewWorkers. Its methods are safe for concurrent use.
//
// A Server runs nbio's message handlers and its handshakes on its
// Config.Workers; a caller that passes its own runs its other short tasks
// (the hub: session writers) on the same kept goroutines.
type Workers struct {
	work    chan func()
	idle    time.Duration
	started atomic.Int64 // workers started, for tests
	waiting atomic.Int64 // workers waiting for a task, for tests
}

// NewWorkers returns a pool whose goroutines exit after idle without a
// task.
func NewWorkers(idle time.Duration) *Workers {
	return &Workers{work: make(chan func()), idle: idle}
}

// Go runs f on a worker.
func (w *Workers) Go(f func()) {
	select {
	case w.work <- f:
	default:
		go w.run(f)
	}
}

func (w *Workers) run(f func()) {
	w.started.Add(1)
	t := time.NewTimer(w.idle)
	defer t.Stop()
	for {
		f()
		f = nil // not kept alive while idle
		t.Reset(w.idle)
		w.waiting.Add(1)
		select {
		case f = <-w.work:
			w.waiting.Add(-1)
		case <-t.C:
			w.waiting.Add(-1)
			return
		}
	}
}
