package authdns

import (
	"fmt"
	"runtime/debug"
	"sync/atomic"
	"time"
)

// panicLogInterval is the least time between two logs of recovered panics;
// the panics in between are counted and summed up in the next log.
const panicLogInterval = 10 * time.Second

// panicLog rate-limits the logs of recovered panics. It is safe for
// concurrent use.
type panicLog struct {
	last       atomic.Int64 // Unix nanoseconds of the last log, 0 for none
	suppressed atomic.Uint64
}

// recovered turns a panic of the query path into a response: SERVFAIL when
// the question was parsed (CoreDNS does the same), nothing otherwise. It
// counts the panic and logs it at most once per panicLogInterval, with the
// stack. The worker stays usable: every query starts from a fresh parse.
func (w *worker) recovered(v any, tcp bool, out []byte) ([]byte, outcome) {
	w.st.panics.Add(1)
	s := w.srv
	s.logPanic(v, "while answering a query")
	q := &w.q
	if !q.questionOK {
		w.st.dropped.Add(1)
		return nil, outDrop
	}
	w.m.start(out, q, responseLimit(s.state.Load(), q, tcp))
	resp := w.m.finish(q, rcodeServFail, s.state.Load().ednsBuffer, 0)
	w.st.count(q.qtype, rcodeServFail, 0, len(resp), false)
	return resp, outAnswer
}

// logPanic logs the recovered panic v unless another was logged less than
// panicLogInterval ago; the ones not logged are counted in the next log.
func (s *Server) logPanic(v any, where string) {
	now := s.now()
	last := s.panics.last.Load()
	if last != 0 && now.Sub(time.Unix(0, last)) < panicLogInterval || !s.panics.last.CompareAndSwap(last, now.UnixNano()) {
		s.panics.suppressed.Add(1)
		return
	}
	s.log.Error("authdns: recovered from a panic "+where, "panic", fmt.Sprint(v),
		"not_logged_since_last", s.panics.suppressed.Swap(0), "stack", string(debug.Stack()))
}
