package hub

import (
	"cmp"
	"context"
	"os"
	rtmetrics "runtime/metrics"
	"slices"
	"time"

	"github.com/corralhq/corral/limit"
	"github.com/corralhq/corral/wire"
)

// Overload is the hub's admission and shedding policy: *limit.Shedder
// implements it. AdmitAt decides on a new session of priority p;
// SeverQuotaAt says how many open sessions of each priority to sever now;
// RetryAfterAt gives the hint of a severed session.
type Overload interface {
	AdmitAt(p limit.Priority, now time.Time) limit.Decision
	SeverQuotaAt(open limit.Counts, now time.Time) limit.Counts
	RetryAfterAt(p limit.Priority, now time.Time) time.Duration
}

var _ Overload = (*limit.Shedder)(nil)

// resourceObserver is the optional part of an Overload that learns the
// process's heap and file descriptors (*limit.Shedder has it).
type resourceObserver interface{ ObserveResources(heap uint64, fds int) }

// observeResources feeds the Go heap and the open descriptors to the
// policy.
func (h *Hub) observeResources() {
	o, ok := h.overload.(resourceObserver)
	if !ok {
		return
	}
	s := []rtmetrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	rtmetrics.Read(s)
	heap := uint64(0)
	if s[0].Value.Kind() == rtmetrics.KindUint64 {
		heap = s[0].Value.Uint64()
	}
	fds := -1
	if ents, err := os.ReadDir("/proc/self/fd"); err == nil {
		fds = len(ents)
	}
	o.ObserveResources(heap, max(fds, 0))
}

// latencyObserver is the optional part of an Overload that learns from
// handshake latencies (*limit.Shedder has it).
type latencyObserver interface{ Observe(time.Duration) }

type admission struct {
	admit      bool
	retryAfter time.Duration
}

// admit asks the overload policy about a new session of rank.
func (h *Hub) admit(rank int) admission {
	if h.overload == nil {
		return admission{admit: true}
	}
	d := h.overload.AdmitAt(limit.Priority(rank), h.now())
	return admission{admit: d.Admit, retryAfter: d.RetryAfter}
}

// observeHandshake feeds the time from connection to Welcome to the policy.
func (h *Hub) observeHandshake(d time.Duration) {
	if o, ok := h.overload.(latencyObserver); ok {
		o.Observe(d)
	}
}

// severLoop asks the policy every tick how many sessions of each priority
// to sever, and severs them: GoAway with the policy's retry hint, then
// close 1001. The newest sessions of a priority go first (they have the
// least state to lose).
func (h *Hub) severLoop(ctx context.Context, tick time.Duration) {
	if h.overload == nil {
		return
	}
	i := 0
	every(ctx, tick, func() {
		if i%10 == 0 {
			h.observeResources()
		}
		i++
		h.severOnce()
	})
}

// severOnce runs one round of severing and returns how many sessions it
// severed.
func (h *Hub) severOnce() int {
	now := h.now()
	var open limit.Counts
	byRank := [3][]*session{}
	for _, s := range h.snapshotSessions() {
		if !s.helloDone.Load() {
			continue
		}
		s.mu.Lock()
		closing := s.closing
		s.mu.Unlock()
		if closing {
			continue
		}
		open[s.rank]++
		byRank[s.rank] = append(byRank[s.rank], s)
	}
	q := h.overload.SeverQuotaAt(open, now)
	n := 0
	for p := range q {
		list := byRank[p]
		if q[p] == 0 {
			continue
		}
		slices.SortFunc(list, func(a, b *session) int { return cmp.Compare(b.start, a.start) }) // newest first
		for i := int64(0); i < q[p] && int(i) < len(list); i++ {
			ra := h.overload.RetryAfterAt(limit.Priority(p), now)
			h.metrics.shedInc("sever", p)
			list[i].close(wire.Close{Code: wire.CloseGoingAway, RetryAfter: ra, Text: "shed " + limit.Priority(p).String()}, true)
			n++
		}
	}
	return n
}
