package fleet

import (
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/corralhq/corral/edge"
	"github.com/corralhq/corral/hub"
	"github.com/corralhq/corral/internal/testkit"
	"github.com/corralhq/corral/limit"
	"github.com/corralhq/corral/wire/corralv1"
)

// slowOrigin is a hub admission policy that admits every session after a
// delay while slow is set: an origin whose handshakes take that long, as
// an overloaded one's do.
type slowOrigin struct{ slow atomic.Int64 }

func (s *slowOrigin) AdmitAt(limit.Priority, time.Time) limit.Decision {
	if d := time.Duration(s.slow.Load()); d > 0 {
		time.Sleep(d)
	}
	return limit.Decision{Admit: true}
}
func (s *slowOrigin) SeverQuotaAt(limit.Counts, time.Time) limit.Counts   { return limit.Counts{} }
func (s *slowOrigin) RetryWindowAt(limit.Priority, time.Time) limit.Retry { return limit.Retry{} }

// dialPriority dials one device of priority p through url and closes it
// once welcomed; refused is the close the edge gave it instead, or the
// refused upgrade (nil when welcomed).
func dialPriority(url, tok string, p corralv1.Priority) (refused error, err error) {
	d, _, err := dialDeviceAt(url, tok, p)
	if err != nil {
		if s := err.Error(); strings.HasPrefix(s, "closed: ") || strings.HasPrefix(s, "goaway ") || strings.Contains(s, "answered 503") {
			return err, nil
		}
		return nil, err
	}
	d.c.Close()
	return nil, nil
}

// shedTarget is the edge Shedder's latency target in
// TestOverloadedOriginShedsLowPriorityFirst.
const shedTarget = 250 * time.Millisecond

// TestOverloadedOriginShedsLowPriorityFirst forces the one origin of an
// edge into overload (every handshake takes 750 ms, or 30 times what the
// edge measured before if that is more: three times the Shedder's
// target at least) under a herd of mostly P2
// handshakes. The edge's handshake limit falls below where it started; P2
// is refused first, with 1013 and a retry hint, while P0 keeps being
// welcomed. As shipped (no latency stages) the Hellos wait in the handshake
// limit's waiting room, P0 first, and a P2 whose wait expires is refused;
// the Shedder's stage never moves. With admission.latency_stages the
// stage rises as far as latency takes it (sever-p1: a slow origin never
// takes the edge to the lifeboat that refuses P0) and P0 keeps being
// welcomed there. Once the origin is fast again the limit recovers, the
// stage returns to normal and P2 is welcomed again.
//
// The light load runs until the handshake limit has closed a few
// windows: a limit that first measures the origin overloaded takes that
// latency for the ideal and grows (the limit rose 20 -> 40 here when a
// 300 ms overload began 250 ms in, before its first 500 ms window closed).
func TestOverloadedOriginShedsLowPriorityFirst(t *testing.T) {
	t.Run("as shipped", func(t *testing.T) { overloadOrigin(t, false) })
	t.Run("latency stages", func(t *testing.T) { overloadOrigin(t, true) })
}

func overloadOrigin(t *testing.T, latencyStages bool) {
	slow := &slowOrigin{}
	f := startFleetWith(t, Config{Hubs: 1, Edges: 1}, Options{
		Hub: func(_ int, _ *hub.Config, o *hub.Options) { o.Overload = slow },
		Edge: func(_ int, c *edge.Config) {
			c.Admission.Enabled = true
			c.Admission.LatencyStages = latencyStages
			// A target well above what a busy machine adds to a
			// handshake (the step down is at 0.7 x target), a fall
			// dwell that brings the stage back in seconds, not 40.
			c.Admission.Shedder.Target = shedTarget
			c.Admission.Shedder.FallDwell = 2 * time.Second
			// The handshake limit keeps its defaults (AIMD with
			// slow_handshake 500 ms: the overload's 750 ms cut it,
			// a busy machine's noise does not).
		},
	})
	e := f.Edges()[0]
	initial := e.Stats().HandshakeLimit
	tok, err := f.Token("acme", []string{">"}, 0, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	url := f.EdgeURLs()[0]

	// Diallers: each dials a device, counts what the edge made of it and
	// closes it; a paced one waits 20 ms between devices (a light load).
	var (
		p0ok, p2ok, p2no, p0no atomic.Int64
		firstErr, firstRefusal atomic.Value
		p0Refusal              atomic.Value
		wg                     sync.WaitGroup
	)
	dialler := func(p corralv1.Priority, paced bool, stop *atomic.Bool) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !stop.Load() {
				refused, err := dialPriority(url, tok, p)
				switch {
				case err != nil:
					firstErr.CompareAndSwap(nil, err)
					time.Sleep(50 * time.Millisecond)
				case refused != nil && p == corralv1.Priority_PRIORITY_P2:
					firstRefusal.CompareAndSwap(nil, refused)
					p2no.Add(1)
					time.Sleep(50 * time.Millisecond)
				case refused != nil:
					firstRefusal.CompareAndSwap(nil, refused)
					p0Refusal.CompareAndSwap(nil, refused)
					p0no.Add(1)
					time.Sleep(50 * time.Millisecond)
				case p == corralv1.Priority_PRIORITY_P2:
					p2ok.Add(1)
				default:
					p0ok.Add(1)
				}
				if paced {
					time.Sleep(20 * time.Millisecond)
				}
			}
		}()
	}
	var stopLight, stopHeavy atomic.Bool
	defer func() { stopLight.Store(true); stopHeavy.Store(true); wg.Wait() }()
	for range 4 {
		dialler(corralv1.Priority_PRIORITY_P0, true, &stopLight)
		dialler(corralv1.Priority_PRIORITY_P2, true, &stopLight)
	}
	// The highest stage seen, polled until the test ends.
	var top atomic.Uint32
	watchDone := make(chan struct{})
	var watch sync.WaitGroup
	watch.Add(1)
	go func() {
		defer watch.Done()
		for {
			if st := uint32(e.Stats().Stage); st > top.Load() {
				top.Store(st)
			}
			select {
			case <-watchDone:
				return
			case <-time.After(5 * time.Millisecond):
			}
		}
	}()
	defer func() { close(watchDone); watch.Wait() }()

	testkit.WaitFor(t, 60*time.Second, "P2 welcomed and the handshake limit measured while the origin is fast", func() bool {
		return p2ok.Load() > 50 && e.Stats().Handshake.Windows >= 3
	})
	if n := p2no.Load() + p0no.Load(); n != 0 {
		t.Fatalf("%d handshakes refused on a fast origin, limit %d (first: %v)", n, e.Stats().HandshakeLimit, firstRefusal.Load())
	}
	fast := e.Stats().Handshake

	// The overload: the origin takes 750 ms per handshake (three times
	// the Shedder's target, 30 times the ideal latency the limit
	// measured if that is more), and a herd of unpaced
	// diallers (mostly P2) presses on the limit.
	delay := max(3*shedTarget, 30*fast.IdealRTT)
	slow.slow.Store(int64(delay))
	for range 24 {
		dialler(corralv1.Priority_PRIORITY_P2, false, &stopHeavy)
	}
	for range 4 {
		dialler(corralv1.Priority_PRIORITY_P0, false, &stopHeavy)
	}
	p0Start := p0ok.Load()
	// With latency stages the Shedder refuses P2 before the handshake
	// limit is full, so its windows are app-limited and it need not fall;
	// as shipped the limit is what sheds.
	testkit.WaitFor(t, 60*time.Second, "the handshake limit below its start (as shipped), P2 refused, P0 welcomed", func() bool {
		return (latencyStages || e.Stats().HandshakeLimit < initial) && p2no.Load() > 20 && p0ok.Load() > p0Start+10
	})
	fell := e.Stats()
	if !latencyStages {
		p0Then := p0ok.Load()
		testkit.WaitFor(t, 120*time.Second, "P0 still welcomed", func() bool { return p0ok.Load() > p0Then+15 })
		st := e.Stats()
		t.Logf("overloaded (origin %v per handshake): handshake limit %d (initial %d, fast ideal %v, fell to %d with p99 %v), stage %v (top %v); P0 welcomed %d refused %d, P2 welcomed %d refused %d (first: %v; P0's first: %v)",
			delay, st.HandshakeLimit, initial, fast.IdealRTT, fell.HandshakeLimit, fell.Handshake.RTT, st.Stage, limit.Stage(top.Load()),
			p0ok.Load(), p0no.Load(), p2ok.Load(), p2no.Load(), firstRefusal.Load(), p0Refusal.Load())
		if s := limit.Stage(top.Load()); s != limit.StageNormal {
			t.Errorf("without latency stages the stage rose to %v", s)
		}
		// The waiting room serves P0 first: P2 is refused far more.
		if p0no.Load()*4 > p2no.Load() {
			t.Errorf("P0 refused %d times against P2's %d: want P2 shed first", p0no.Load(), p2no.Load())
		}
	} else {
		overloadStages(t, e, initial, &top, &p0ok, &p2ok)
	}
	if r, _ := firstRefusal.Load().(error); r == nil || !strings.HasPrefix(r.Error(), "closed: 1013 retry_after_ms=") {
		t.Errorf("first refusal %v, want a P2's 1013 with a retry hint", r)
	}
	if r, _ := p0Refusal.Load().(error); r != nil && !strings.HasPrefix(r.Error(), "closed: 1013 retry_after_ms=") {
		t.Errorf("P0 refused with %v: only the handshake limit may refuse it, with 1013 and a hint", r)
	}
	recoverOrigin(t, e, initial, slow, &stopHeavy, &p2ok)
	if v := firstErr.Load(); v != nil {
		t.Logf("dial errors were seen (first: %v)", v.(error))
	}
}

// overloadStages: with latency stages, latency alone takes the stage as
// far as sever-p1 and no further, and P0 goes on being welcomed there.
func overloadStages(t *testing.T, e *Edge, initial int, top *atomic.Uint32, p0ok, p2ok *atomic.Int64) {
	// Latency alone takes the stage as far as sever-p1 and no further:
	// P0 goes on being welcomed there, for longer than the Shedder needs
	// to rise a stage (its rise dwell is 1 s; 15 handshakes of 750 ms on
	// a limit this low take longer).
	testkit.WaitFor(t, 60*time.Second, "the stage at sever-p1", func() bool { return e.Stats().Stage >= limit.StageSeverP1 })
	p0AtCeiling, p2AtCeiling := p0ok.Load(), p2ok.Load()
	testkit.WaitFor(t, 120*time.Second, "P0 still welcomed at sever-p1", func() bool { return p0ok.Load() > p0AtCeiling+15 })
	st := e.Stats()
	t.Logf("at sever-p1: handshake limit %d (initial %d), stage %v (top %v); P0 welcomed %d, P2 welcomed %d",
		st.HandshakeLimit, initial, st.Stage, limit.Stage(top.Load()), p0ok.Load(), p2ok.Load())
	if s := limit.Stage(top.Load()); s >= limit.StageLifeboat {
		t.Errorf("a slow origin took the edge to %v, which refuses P0", s)
	}
	// A P2 welcomed at sever-p1 was admitted before reject-p2, two
	// stages earlier: at most the limit of then can be.
	if n := p2ok.Load() - p2AtCeiling; n > int64(initial) {
		t.Errorf("%d P2 welcomed at sever-p1, more than were in flight before reject-p2", n)
	}
}

// recoverOrigin ends the overload: the limit recovers, the stage returns
// to normal and P2 is welcomed again.
func recoverOrigin(t *testing.T, e *Edge, initial int, slow *slowOrigin, stopHeavy *atomic.Bool, p2ok *atomic.Int64) {
	stopHeavy.Store(true)
	slow.slow.Store(0)
	var last edge.Stats
	defer func() {
		if t.Failed() {
			t.Logf("last: stage %v, handshake limit %d, %+v", last.Stage, last.HandshakeLimit, last.Handshake)
		}
	}()
	testkit.WaitFor(t, 120*time.Second, "the handshake limit recovered", func() bool {
		last = e.Stats()
		return last.HandshakeLimit >= initial
	})
	testkit.WaitFor(t, 120*time.Second, "the edge back to its normal stage", func() bool {
		last = e.Stats()
		return last.Stage == limit.StageNormal
	})
	p2After := p2ok.Load()
	testkit.WaitFor(t, 30*time.Second, "P2 welcomed after the overload", func() bool { return p2ok.Load() > p2After+20 })
}
