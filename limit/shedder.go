package limit

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// Stage is a shedding stage. Each stage includes the actions of the stages
// below it.
type Stage uint8

const (
	// StageNormal admits everything.
	StageNormal Stage = iota
	// StageRejectP2 rejects new P2 work.
	StageRejectP2
	// StageSeverP2 also severs existing P2 sessions, paced.
	StageSeverP2
	// StageRejectP1 also rejects new P1 work.
	StageRejectP1
	// StageSeverP1 also severs existing P1 sessions, paced.
	StageSeverP1
	// StageLifeboat also rejects new P0 work. Existing P0 sessions are
	// severed only during a hard resource emergency.
	StageLifeboat
)

// NumStages is the number of stages.
const NumStages = 6

// String returns the stage's name.
func (s Stage) String() string {
	if s < NumStages {
		return [...]string{"normal", "reject-p2", "sever-p2", "reject-p1", "sever-p1", "lifeboat"}[s]
	}
	return fmt.Sprintf("stage(%d)", uint8(s))
}

// MarshalText returns the stage's name, as YAML and JSON write it.
func (s Stage) MarshalText() ([]byte, error) {
	if s >= NumStages {
		return nil, fmt.Errorf("limit: no stage %d", uint8(s))
	}
	return []byte(s.String()), nil
}

// UnmarshalText reads a stage's name ("normal" .. "lifeboat") or its
// number (0 .. 5).
func (s *Stage) UnmarshalText(b []byte) error {
	for st := range Stage(NumStages) {
		if string(b) == st.String() || string(b) == strconv.Itoa(int(st)) {
			*s = st
			return nil
		}
	}
	return fmt.Errorf("limit: unknown stage %q (normal, reject-p2, sever-p2, reject-p1, sever-p1 or lifeboat)", b)
}

// Admits reports whether stage s admits new work of priority p. An
// invalid priority is treated as P2.
func (s Stage) Admits(p Priority) bool { return !s.rejects(p) }

// rejects reports whether stage s turns away new work of priority p.
// An invalid priority is treated as P2.
func (s Stage) rejects(p Priority) bool {
	switch p {
	case P0:
		return s >= StageLifeboat
	case P1:
		return s >= StageRejectP1
	}
	return s >= StageRejectP2
}

// Decision is the Shedder's answer to an admission request.
type Decision struct {
	// Admit is true when the work may proceed (to the Limiter, typically).
	Admit bool
	// Stage is the stage the decision was taken at.
	Stage Stage
	// Admitted is how many of the units asked about were admitted: 1 or
	// 0 for Admit and AdmitAt, up to n for AdmitNAt (whose Admit is true
	// when all n were).
	Admitted int64
	// RetryAfter is the jittered retry hint for a rejection, zero when
	// admitted: a point drawn from Retry.
	RetryAfter time.Duration
	// Retry is the window RetryAfter was drawn from (RetryWindowAt), zero
	// when admitted: a server whose protocol carries a retry window sends
	// it whole and lets each client draw (wire's retry_within_ms).
	Retry Retry
}

// Retry is a retry hint as a window: the client comes back uniformly
// within [After, After + Within]. A server that spaces the work it turns
// away (a Limiter's virtual queue, a Shedder's re-admission ramp) knows
// the window each refused client belongs in; sent whole, the client draws
// within it and adds none of its own policy's jitter, which would stretch
// the herd's return past the window (package backoff, HintWithin). Within
// is zero for a hint that is a point.
type Retry struct {
	After, Within time.Duration
}

// At returns the point of the window at u in [0, 1): the single hint to
// send where the protocol carries no window (HTTP Retry-After, gRPC's
// retry pushback), drawn with a uniform u so the herd stays spread.
func (r Retry) At(u float64) time.Duration {
	return r.After + time.Duration(min(max(u, 0), 1)*float64(r.Within))
}

// retryOf is the Retry of the range [lo, hi).
func retryOf(lo, hi time.Duration) Retry { return Retry{After: lo, Within: max(hi-lo, 0)} }

// Shedder decides, by priority and in stages, what a node turns away and
// what it lets go when it is overloaded. It owns no sockets: Admit says
// whether new work may enter, SeverQuota how many existing sessions of each
// priority to close now, and RetryAfter the hint each of them carries.
//
// Stages move one at a time from what the Shedder is told: latencies
// (Observe, typically handshake latency) against Target, and resource use
// (ObserveResources) against the ceilings. Every EvalInterval the stage
// rises if the latency percentile is above Target or resource pressure is
// high and it has stayed RiseDwell in its stage; a resource ceiling
// reached jumps to StageLifeboat at once.
//
// The way down is re-admission: while the node is calm (the percentile at
// most StepDownRatio x Target, pressure low) the Shedder admits a share of
// the highest priority the stage turns away, growing from 0 to 1 over
// FallDwell of calm, and halved by every evaluation that finds the node
// overloaded again (the stage rises only once the share is spent). The
// stage falls once the share is whole and the node still calm: the fall
// is taken on the evidence that the node carried the work it re-admitted,
// and calm capacity is not left idle while the work it turned away waits
// outside for the dwell to pass. The stages that sever re-admit nothing
// and fall after FallDwell of unbroken calm.
// Evaluation happens inside the calls that carry a time (AdmitAt,
// SeverQuotaAt, EvaluateAt and their clock variants); no goroutine runs.
//
// A Shedder is safe for concurrent use. The zero value is not usable; call
// NewShedder. Admit is the method most callers want.
type Shedder struct {
	stage  atomic.Uint32
	evalAt atomic.Int64 // next evaluation, ns since base
	heap   atomic.Uint64
	fds    atomic.Int64
	hist   atomicHist

	admitted AtomicCounts
	rejected AtomicCounts
	severed  AtomicCounts

	cfg  ShedderConfig
	rnd  jitter
	base time.Time // creation time; the monotonic origin of evalAt

	mu           sync.Mutex // guards the evaluation and pacing state below
	changedAt    time.Time
	lastRise     time.Time
	lastFall     time.Time
	fallDwell    time.Duration
	transitions  int64
	lastP99      time.Duration
	lastCount    int64
	emergency    bool
	overloaded   bool
	tokens       float64
	tokensAt     time.Time
	history      []Transition
	calmSince    time.Time // start of the current calm, zero when not calm
	lastOpen     Counts
	openKnown    bool
	pending      hist
	pendingEvals int
	evaluatedAt  time.Time     // the previous evaluation
	forgivenAt   time.Time     // the last halving of a damped fallDwell
	readmit      atomic.Uint64 // float64 bits: the share of readmitted() admitted
}

// maxPending is how many evaluations latencies may accumulate before an
// evaluation judges fewer than MinSamples of them.
const maxPending = 5

// Transition records one stage change.
type Transition struct {
	// At is when the stage changed.
	At time.Time
	// From and To are the stages before and after.
	From, To Stage
	// Reason is "latency", "resources", "emergency" or "calm".
	Reason string
}

// maxHistory bounds the transitions a Shedder remembers.
const maxHistory = 256

// NewShedder returns a Shedder at StageNormal, or an error for a bad
// config.
func NewShedder(cfg ShedderConfig) (*Shedder, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	s := &Shedder{cfg: cfg, fallDwell: cfg.FallDwell}
	s.rnd.src = cfg.Rand
	s.rnd.ctr.Store(cfg.Seed)
	now := s.now()
	s.base = now
	s.changedAt, s.tokensAt = now, now
	s.tokens = s.burst(cfg.SeverRate)
	s.evalAt.Store(int64(cfg.EvalInterval))
	return s, nil
}

func (s *Shedder) now() time.Time {
	if s.cfg.Clock != nil {
		return s.cfg.Clock.Now()
	}
	return time.Now()
}

// Stage returns the current stage.
func (s *Shedder) Stage() Stage { return Stage(s.stage.Load()) }

// Observe records one latency (typically a handshake latency). Negative or
// huge latencies are ignored.
func (s *Shedder) Observe(d time.Duration) {
	if d < 0 || d > MaxRTT {
		return
	}
	s.hist.add(d)
}

// ObserveN records n latencies of d at once, as a cohort simulator that
// aggregates a step's handshakes does. Negative or huge latencies and n < 1
// are ignored.
func (s *Shedder) ObserveN(d time.Duration, n int64) {
	if d < 0 || d > MaxRTT || n < 1 {
		return
	}
	s.hist.counts[bucketOf(d)].Add(n)
}

// ObserveResources records the current heap size in bytes and number of
// open file descriptors.
func (s *Shedder) ObserveResources(heap uint64, fds int) {
	s.heap.Store(heap)
	s.fds.Store(int64(max(fds, 0)))
}

// Admit decides whether new work of priority p may enter now. An invalid
// priority is treated as P2.
func (s *Shedder) Admit(p Priority) Decision {
	if s.cfg.Clock != nil {
		return s.AdmitAt(p, s.cfg.Clock.Now())
	}
	// One monotonic clock read on the common path; a time.Time is built
	// only to evaluate or to compute a retry hint.
	ns := time.Since(s.base)
	st := Stage(s.stage.Load())
	if int64(ns) >= s.evalAt.Load() || st.rejects(p) || !p.Valid() {
		return s.AdmitAt(p, s.base.Add(ns))
	}
	s.admitted[p].Add(1)
	return Decision{Admit: true, Admitted: 1, Stage: st}
}

// AdmitAt is Admit at an explicit time.
func (s *Shedder) AdmitAt(p Priority, now time.Time) Decision { return s.AdmitNAt(p, 1, now) }

// AdmitNAt decides for n units of work of priority p at once (a cohort of
// devices in a simulation): the decision is the same for all of them and
// the counters move by n. The RetryAfter of a rejection is one draw; use
// RetryRangeAt to spread a cohort.
func (s *Shedder) AdmitNAt(p Priority, n int64, now time.Time) Decision {
	s.maybeEvaluate(now)
	if !p.Valid() {
		p = P2
	}
	n = max(n, 0)
	st := Stage(s.stage.Load())
	if !st.rejects(p) {
		s.admitted[p].Add(n)
		return Decision{Admit: true, Admitted: n, Stage: st}
	}
	var k int64 // re-admitted: the share's expected part of n, the remainder drawn
	if q, ok := readmitted(st); ok && p == q {
		share := s.readmitShare()
		whole, frac := math.Modf(share * float64(n))
		k = int64(whole)
		if frac > 0 && s.rnd.float64() < frac {
			k++
		}
		k = min(k, n)
	}
	s.admitted[p].Add(k)
	s.rejected[p].Add(n - k)
	if k == n && n > 0 {
		return Decision{Admit: true, Admitted: n, Stage: st}
	}
	r := s.RetryWindowAt(p, now)
	return Decision{Admitted: k, Stage: st, RetryAfter: r.At(s.rnd.float64()), Retry: r}
}

// Rejected turns an admission of priority p into a rejection: call it when
// Admit admitted the work but a later check (a Limiter, typically) turned it
// away. It moves the count from admitted to rejected and returns the
// jittered retry hint, so every rejection is counted in one place.
func (s *Shedder) Rejected(p Priority, now time.Time) time.Duration {
	return s.RejectedWindow(p, now).At(s.rnd.float64())
}

// RejectedWindow is Rejected for a server that sends the retry window
// whole: it moves the count as Rejected does and returns RetryWindowAt,
// the window Rejected draws its hint from, without drawing.
func (s *Shedder) RejectedWindow(p Priority, now time.Time) Retry {
	if !p.Valid() {
		p = P2
	}
	s.admitted[p].Add(-1)
	s.rejected[p].Add(1)
	return s.RetryWindowAt(p, now)
}

// EvaluateAt runs the stage evaluation if it is due at now, and returns the
// stage.
func (s *Shedder) EvaluateAt(now time.Time) Stage {
	s.maybeEvaluate(now)
	return s.Stage()
}

func (s *Shedder) maybeEvaluate(now time.Time) {
	due := s.evalAt.Load()
	at := int64(now.Sub(s.base))
	if at < due {
		return
	}
	if !s.evalAt.CompareAndSwap(due, at+int64(s.cfg.EvalInterval)) {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.evaluate(now)
}

// evaluate moves the stage. Called with s.mu held.
func (s *Shedder) evaluate(now time.Time) {
	// Latencies accumulate until MinSamples have arrived, for at most
	// maxPending evaluations, so a trickle of slow handshakes on a full
	// node still counts; an evaluation with no latency at all (nothing is
	// being admitted) counts as no latency pressure.
	s.hist.drain(func(d time.Duration, n int64) { s.pending.add(d, n) })
	s.pendingEvals++
	// A few samples whose median is already above Target are enough: on a
	// slow, full node waiting for MinSamples would let it fill further.
	latencyKnown := s.pending.total >= int64(s.cfg.MinSamples) ||
		(s.pending.total > 0 && s.pendingEvals >= maxPending) ||
		(s.pending.total >= 3 && s.pending.quantile(0.5) > s.cfg.Target)
	if latencyKnown {
		s.lastP99 = s.pending.quantile(s.cfg.Percentile)
		s.lastCount = s.pending.total
	}
	if latencyKnown || s.pending.total == 0 {
		s.pending.reset()
		s.pendingEvals = 0
	}
	pressure, emergency := s.pressure()
	s.emergency = emergency
	var latHigh, latLow bool
	switch {
	case latencyKnown:
		latHigh = s.lastP99 > s.cfg.Target
		latLow = s.lastP99 <= time.Duration(float64(s.cfg.Target)*s.cfg.StepDownRatio)
	case s.pending.total == 0:
		latLow = true // nothing admitted, nothing measured
	default:
		// Too few latencies yet: neither high nor low, the stage holds.
	}
	resHigh := pressure >= s.cfg.Resources.High
	s.overloaded = latHigh || resHigh || emergency
	st := s.Stage()
	// Latency raises the stage up to its ceiling only; above the ceiling
	// (where resources took it) latency holds nothing up, so the stage
	// comes back down to the ceiling once resources are calm.
	ceil := s.latencyCeiling()
	rise := (latHigh && st < ceil) || resHigh || emergency
	calm := (latLow || st > ceil) && pressure < s.cfg.Resources.Low && !emergency
	if !calm {
		s.calmSince = time.Time{}
	} else if s.calmSince.IsZero() {
		s.calmSince = now
	}
	in := now.Sub(s.changedAt)
	// The share grows with the calm time since the previous evaluation
	// (an idle gap between calm evaluations counts whole, as it does in
	// calmSince); the stage falls when it is whole. In a stage that
	// re-admits, what would raise the stage halves the share instead
	// while it is worth something: a re-admission that went too far backs
	// off before anything more is turned away or severed. In a stage that
	// severs the share only measures the calm (nothing is re-admitted
	// there: what it turned away comes back in the stage below), and an
	// overload starts it over, as a calm must last FallDwell there.
	prev := s.evaluatedAt
	s.evaluatedAt = now
	share := s.readmitShare()
	_, readmits := readmitted(st)
	backOff := readmits && rise && share >= minReadmit && !emergency
	switch {
	case rise && readmits:
		s.setReadmit(share / 2)
	case !calm && !readmits:
		s.setReadmit(0)
	case calm && st > StageNormal:
		grown := now.Sub(s.calmSince)
		if prev.After(s.calmSince) {
			grown = now.Sub(prev)
		}
		v := share + float64(grown)/float64(s.fallDwell)
		if v > 1-1e-9 { // whole, whatever the rounding of the sum
			v = 1
		}
		s.setReadmit(v)
	}
	// Calm forgives earlier flaps: each 2 x FallDwell (as configured) of
	// unbroken calm halves a damped dwell back towards it, so a node that
	// was overloaded for long does not take minutes per stage once calm.
	if calm && s.fallDwell > s.cfg.FallDwell && now.Sub(latest(s.calmSince, s.forgivenAt)) >= 2*s.cfg.FallDwell {
		s.fallDwell = max(s.cfg.FallDwell, s.fallDwell/2)
		s.forgivenAt = now
	}
	fall := calm && st > StageNormal && s.readmitShare() >= 1
	switch {
	case emergency && st < StageLifeboat:
		s.move(now, st, StageLifeboat, "emergency")
	case rise && st < StageLifeboat && in >= s.cfg.RiseDwell && !s.lowerLeft(st) && !backOff:
		reason := "latency"
		if !latHigh || st >= ceil {
			reason = "resources"
		}
		// Rising again soon after a fall is a flap: damp it.
		if !s.lastFall.IsZero() && s.lastFall.After(s.lastRise) && now.Sub(s.lastFall) < 2*s.fallDwell {
			s.fallDwell = min(2*s.fallDwell, s.cfg.MaxFallDwell)
		}
		s.lastRise = now
		s.move(now, st, st+1, reason)
	case fall:
		s.lastFall = now
		s.move(now, st, st-1, "calm")
	}
}

// minReadmit is the least re-admitted share an overload halves before it
// raises the stage.
const minReadmit = 1.0 / 16

// readmitted returns the priority that stage st re-admits a share of
// while calm, the one it was the first to turn away, and whether st is
// such a stage: reject-p2, reject-p1 and lifeboat are; the stages that
// sever are not.
func readmitted(st Stage) (Priority, bool) {
	switch st {
	case StageRejectP2:
		return P2, true
	case StageRejectP1:
		return P1, true
	case StageLifeboat:
		return P0, true
	}
	return 0, false
}

// rejectsFrom returns the lowest stage that turns away new work of p.
func rejectsFrom(p Priority) Stage {
	switch p {
	case P0:
		return StageLifeboat
	case P1:
		return StageRejectP1
	}
	return StageRejectP2
}

func (s *Shedder) readmitShare() float64 { return math.Float64frombits(s.readmit.Load()) }

func (s *Shedder) setReadmit(v float64) { s.readmit.Store(math.Float64bits(v)) }

// latencyCeiling returns the highest stage latency alone raises the stage
// to.
func (s *Shedder) latencyCeiling() Stage {
	if c := s.cfg.LatencyCeiling; c != StageNormal {
		return c
	}
	return StageLifeboat
}

// lowerLeft reports whether, at StageSeverP1, P1 or P2 sessions are still
// left to sever (as last reported to SeverQuotaAt): new P0 is turned away
// only when nothing below it is left to let go.
func (s *Shedder) lowerLeft(st Stage) bool {
	return st == StageSeverP1 && s.openKnown && s.lastOpen[P1]+s.lastOpen[P2] > 0
}

func (s *Shedder) move(now time.Time, from, to Stage, reason string) {
	s.setReadmit(0) // every stage re-admits from nothing
	s.stage.Store(uint32(to))
	s.changedAt = now
	s.transitions++
	if len(s.history) == maxHistory {
		copy(s.history, s.history[1:])
		s.history = s.history[:maxHistory-1]
	}
	s.history = append(s.history, Transition{At: now, From: from, To: to, Reason: reason})
}

// pressure returns the highest resource use relative to its ceiling and
// whether a ceiling is reached.
func (s *Shedder) pressure() (float64, bool) {
	var p float64
	r := s.cfg.Resources
	if r.MaxHeap > 0 {
		p = max(p, float64(s.heap.Load())/float64(r.MaxHeap))
	}
	if r.MaxFDs > 0 {
		p = max(p, float64(s.fds.Load())/float64(r.MaxFDs))
	}
	return p, p >= 1
}

// SeverQuota returns how many existing sessions of each priority the caller
// should close now; open is how many it holds of each. See SeverQuotaAt.
func (s *Shedder) SeverQuota(open Counts) Counts { return s.SeverQuotaAt(open, s.now()) }

// SeverQuotaAt returns how many existing sessions of each priority to close
// at now, lowest priority first: P2 from StageSeverP2, P1 from
// StageSeverP1, P0 only during a resource emergency; and only while the
// last evaluation found the node overloaded, so severing stops as soon as
// it has relieved the node even though the stage holds until it falls. The total is paced to
// SeverRate per second (EmergencySeverRate in an emergency) with a burst of
// a tenth of a second, so callers may ask as often as they like. Give each
// closed session its own RetryAfterAt hint. The counts are added to the
// severed metrics.
func (s *Shedder) SeverQuotaAt(open Counts, now time.Time) Counts {
	s.maybeEvaluate(now)
	s.mu.Lock()
	defer s.mu.Unlock()
	rate := s.cfg.SeverRate
	if s.emergency {
		rate = s.cfg.EmergencySeverRate
	}
	if dt := now.Sub(s.tokensAt); dt > 0 {
		s.tokens = min(s.burst(rate), s.tokens+rate*dt.Seconds())
		s.tokensAt = now
	}
	st := s.Stage()
	var q Counts
	s.lastOpen, s.openKnown = open, true
	if !s.overloaded {
		// The stage holds (admission stays strict until it falls), but
		// severing stops as soon as the node is no longer overloaded.
		return q
	}
	for _, p := range [...]Priority{P2, P1, P0} {
		allowed := (p == P2 && st >= StageSeverP2) || (p == P1 && st >= StageSeverP1) || (p == P0 && s.emergency)
		if !allowed || open[p] <= 0 {
			continue
		}
		n := min(open[p], int64(s.tokens))
		s.tokens -= float64(n)
		q[p] = n
		s.severed[p].Add(n)
	}
	return q
}

func (s *Shedder) burst(rate float64) float64 { return max(1, math.Floor(rate/10)) }

// RetryAfter returns a jittered retry hint for rejected or severed work of
// priority p.
func (s *Shedder) RetryAfter(p Priority) time.Duration { return s.RetryAfterAt(p, s.now()) }

// RetryAfterAt returns a retry hint for work of priority p turned away at
// now, drawn uniformly from RetryRangeAt.
func (s *Shedder) RetryAfterAt(p Priority, now time.Time) time.Duration {
	return s.RetryWindowAt(p, now).At(s.rnd.float64())
}

// RetryWindowAt returns RetryRangeAt as a Retry, the window to send whole
// to clients that draw within it.
func (s *Shedder) RetryWindowAt(p Priority, now time.Time) Retry {
	return retryOf(s.RetryRangeAt(p, now))
}

// RetryRangeAt returns the range [lo, hi) that RetryAfterAt draws its hints
// from uniformly, so that a cohort simulator can spread a whole cohort over
// it without one call per device.
//
// When the stage admits p (the rejection came from a Limiter) the range
// is [Retry.Min, Retry.Min x (1 + Spread)). Otherwise it spans p's
// re-admission, assuming calm from now on: from when p's share starts to
// grow (now, when the stage is re-admitting p; else after the rest of the
// current stage's calm and one FallDwell per stage between it and the
// first that turns p away) to when it is whole, one FallDwell later (or
// the rest of the current share). A hint does not
// outlast the stages' way back to admitting p, and a turned-away herd
// comes back over the ramp that takes it in. Both ends are clamped to
// [Retry.Min, Retry.Max], and the range is at least Spread x lo wide.
func (s *Shedder) RetryRangeAt(p Priority, now time.Time) (lo, hi time.Duration) {
	if !p.Valid() {
		p = P2
	}
	r := s.cfg.Retry
	var start, end time.Duration
	if st := s.Stage(); st.rejects(p) {
		s.mu.Lock()
		dwell := s.fallDwell
		s.mu.Unlock()
		rest := time.Duration((1 - s.readmitShare()) * float64(dwell)) // of the current stage
		if own := rejectsFrom(p); st == own {
			end = rest
		} else {
			start = rest + time.Duration(int(st)-int(own)-1)*dwell
			end = start + dwell
		}
	}
	lo = max(r.Min, min(start, r.Max))
	hi = max(min(end, r.Max), lo+time.Duration(r.Spread*float64(lo)))
	return lo, hi
}

// Transitions returns the remembered stage changes, oldest first.
func (s *Shedder) Transitions() []Transition {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Transition(nil), s.history...)
}

// jitter draws uniform numbers from an injected rand.Source (under a
// mutex) or from a lock-free SplitMix64 sequence.
type jitter struct {
	mu  sync.Mutex
	src rand.Source
	ctr atomic.Uint64
}

func (j *jitter) float64() float64 {
	var x uint64
	if j.src != nil {
		j.mu.Lock()
		x = j.src.Uint64()
		j.mu.Unlock()
	} else {
		x = mix64(j.ctr.Add(golden))
	}
	return unit(x)
}

func latest(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
