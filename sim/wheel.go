package sim

import (
	"cmp"
	"math"
	"slices"
	"time"

	"github.com/corralhq/corral/backoff"
	"github.com/corralhq/corral/limit"
)

// cohort is a group of devices that share everything the engine tracks
// about them: their flow (PoP, tenant, priority), how many backoff delays
// they have drawn since their last connection, and the previous delay (in
// steps; only kept for policies whose delay depends on it).
type cohort struct {
	flow    int32
	attempt uint16
	try     uint8 // addresses its edge hosts tried in this step, less one
	prev    int32
	n       int64
}

// key identifies a cohort without its count.
type key struct {
	flow    int32
	attempt uint16
	prev    int32
}

func (c cohort) key() key { return key{c.flow, c.attempt, c.prev} }

func cmpKey(a, b key) int {
	switch {
	case a.flow != b.flow:
		return int(a.flow - b.flow)
	case a.attempt != b.attempt:
		return int(a.attempt) - int(b.attempt)
	default:
		return int(a.prev - b.prev)
	}
}

// Bit widths of a key packed in a uint64 (flow highest, so packed keys
// sort like keys). New bounds flows below 1<<flowBits; attempts stop at
// the spreader's attemptCap (at most 64); previous delays and hints are
// clamped to maxSteps steps.
const (
	flowBits    = 22
	attemptBits = 7
	stepBits    = 17
	maxSteps    = 1<<stepBits - 1
)

func (k key) pack() uint64 {
	return uint64(k.flow)<<(attemptBits+stepBits) | uint64(k.attempt)<<stepBits | uint64(k.prev)
}

func unpack(p uint64) key {
	return key{
		flow:    int32(p >> (attemptBits + stepBits)),
		attempt: uint16(p >> stepBits & (1<<attemptBits - 1)),
		prev:    int32(p & maxSteps),
	}
}

// failKey is a failed cohort waiting to draw its delay: hint is the
// retry-after it carries, in steps (0 when none).
type failKey struct {
	key
	hint int32
}

func (f failKey) pack() uint64 { return f.key.pack()<<stepBits | uint64(f.hint) }

func unpackFail(p uint64) failKey {
	return failKey{key: unpack(p >> stepBits), hint: int32(p & maxSteps)}
}

// windowFail is a failed cohort that carries a retry window (Within > 0):
// key is its packed key, retry the window to the nanosecond. Its devices
// draw their delay within [After, After + Within] (backoff.WindowDelay),
// the policy's jitter left out.
type windowFail struct {
	key   uint64
	retry limit.Retry
}

func cmpWindowFail(a, b windowFail) int {
	switch {
	case a.key != b.key:
		return cmp.Compare(a.key, b.key)
	case a.retry.After != b.retry.After:
		return cmp.Compare(a.retry.After, b.retry.After)
	default:
		return cmp.Compare(a.retry.Within, b.retry.Within)
	}
}

// wheel holds the waiting devices in bins of one step, a ring long enough
// for the longest delay the policy can draw; a bin maps packed keys to
// counts.
type wheel struct {
	bins  []map[uint64]int64
	total int64
	keys  []uint64 // scratch of take
}

func newWheel(size int) *wheel {
	return &wheel{bins: make([]map[uint64]int64, size)}
}

func (w *wheel) add(step int, k key, n int64) {
	if n == 0 {
		return
	}
	b := &w.bins[step%len(w.bins)]
	if *b == nil {
		*b = make(map[uint64]int64)
	}
	(*b)[k.pack()] += n
	w.total += n
}

// take empties the bin of step into dst, sorted by key so that the run is
// deterministic whatever the map order.
func (w *wheel) take(step int, dst []cohort) []cohort {
	dst = dst[:0]
	b := w.bins[step%len(w.bins)]
	w.keys = w.keys[:0]
	for k := range b {
		w.keys = append(w.keys, k)
	}
	slices.Sort(w.keys)
	for _, p := range w.keys {
		k, n := unpack(p), b[p]
		dst = append(dst, cohort{flow: k.flow, attempt: k.attempt, prev: k.prev, n: n})
		w.total -= n
	}
	clear(b)
	return dst
}

// count returns the devices in every bin (for the conservation check).
func (w *wheel) count() int64 {
	var s int64
	for _, b := range w.bins {
		for _, n := range b {
			s += n
		}
	}
	return s
}

// spreader turns failed cohorts into waiting ones by quantiles of the
// policy: slice i of q waits Delay(attempt, prev, (i+0.5)/q).
type spreader struct {
	policy     backoff.Policy
	q          int
	step       time.Duration
	attemptCap int  // attempts at or past it draw the same delays
	usePrev    bool // the policy reads the previous delay
	retryAfter time.Duration
	maxOffset  int
}

// newSpreader builds the spreader of policy p; retryAfter is the longest
// retry hint the origins send, and the latest end of their windows.
func newSpreader(p backoff.Policy, q int, step, retryAfter time.Duration) *spreader {
	s := &spreader{policy: p, q: q, step: step, retryAfter: retryAfter}
	s.usePrev = p.Name() == backoff.PolicyDecorrelated
	// The attempt number stops mattering once the envelope sits at the
	// cap: find the first attempt from which delays repeat.
	s.attemptCap = 64
	for a := 1; a < 64; a++ {
		same := true
		for _, u := range []float64{0, 0.37, 1} {
			if p.Delay(a, 0, u) != p.Delay(a+1, 0, u) || p.Delay(a, 0, u) != p.Delay(a+8, 0, u) {
				same = false
			}
		}
		if same {
			s.attemptCap = a
			break
		}
	}
	// A window ends by retryAfter (WindowDelay's clamps only shorten it).
	longest := max(p.Delay(1<<20, time.Hour, 1), p.HintDelay(retryAfter, 1), p.Delay(0, 0, 1), retryAfter)
	s.maxOffset = s.offset(longest) + 1
	return s
}

// offset turns a delay into the number of steps to wait: rounded to the
// nearest step, at least one (a device cannot retry within the step it
// failed in).
func (s *spreader) offset(d time.Duration) int {
	return max(1, stepsOf(d, s.step))
}

// spread schedules n devices of key fk, failed at step now with hint, on
// w: slice i draws at u = (i+0.5)/q within the hint's window
// (backoff.WindowDelay: corral's clients given a window), above its point
// (Policy.HintDelay: a hint without a window) or, without a hint, from the
// policy's schedule (Policy.Delay). u0 in [0, 1) offsets the integer
// split so that small cohorts are not always rounded the same way.
func (s *spreader) spread(w *wheel, now int, fk key, hint limit.Retry, n int64, u0 float64) {
	next := fk.attempt
	if int(next) < s.attemptCap {
		next++
	}
	var prevD time.Duration
	if s.usePrev {
		prevD = time.Duration(fk.prev) * s.step
	}
	q := int64(s.q)
	if n < q {
		q = n
	}
	var runOff int
	var runN int64
	var runPrev int32
	flush := func() {
		if runN > 0 {
			w.add(now+runOff, key{fk.flow, next, runPrev}, runN)
		}
	}
	var done int64
	for i := int64(0); i < q; i++ {
		hi := int64(math.Floor(float64(n)*float64(i+1)/float64(q) + u0))
		if i == q-1 {
			hi = n
		}
		m := hi - done
		done = hi
		if m <= 0 {
			continue
		}
		u := (float64(i) + 0.5) / float64(q)
		var d time.Duration
		switch {
		case hint.After > 0 && hint.Within > 0:
			d = backoff.WindowDelay(s.policy, hint.After, hint.Within, u)
		case hint.After > 0:
			d = s.policy.HintDelay(hint.After, u)
		default:
			d = s.policy.Delay(int(fk.attempt), prevD, u)
		}
		off := s.offset(d)
		var prev int32
		if s.usePrev {
			prev = int32(min(off, maxSteps))
		}
		if off == runOff && prev == runPrev {
			runN += m
			continue
		}
		flush()
		runOff, runPrev, runN = off, prev, m
	}
	flush()
}
