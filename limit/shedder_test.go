package limit

import (
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/corralhq/corral/internal/testkit"
)

// shedAt builds a Shedder on a manual clock.
func shedAt(t *testing.T, cfg ShedderConfig) (*Shedder, *testkit.Clock) {
	t.Helper()
	clock := testkit.NewClock(simEpoch)
	cfg.Clock = clock
	s, err := NewShedder(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s, clock
}

// observeFor feeds n latencies of d per evaluation interval for dur.
func observeFor(s *Shedder, c *testkit.Clock, dur, d time.Duration, n int) {
	end := c.Now().Add(dur)
	for c.Now().Before(end) {
		c.Advance(100 * time.Millisecond)
		for range n {
			s.Observe(d)
		}
		s.EvaluateAt(c.Now())
	}
}

func TestStageAdmission(t *testing.T) {
	want := map[Stage][NumPriorities]bool{
		StageNormal:   {true, true, true},
		StageRejectP2: {true, true, false},
		StageSeverP2:  {true, true, false},
		StageRejectP1: {true, false, false},
		StageSeverP1:  {true, false, false},
		StageLifeboat: {false, false, false},
	}
	for st, admits := range want {
		for p := range NumPriorities {
			if got := st.Admits(Priority(p)); got != admits[p] {
				t.Errorf("stage %v admits %v: %v, want %v", st, Priority(p), got, admits[p])
			}
		}
	}
}

func TestStagesRiseOneAtATimeAndFallWithHysteresis(t *testing.T) {
	s, c := shedAt(t, ShedderConfig{})
	// 150 ms against a 100 ms target: one stage per second (RiseDwell).
	observeFor(s, c, 2500*time.Millisecond, 150*time.Millisecond, 5)
	if st := s.Stage(); st != StageSeverP2 {
		t.Fatalf("stage %v after 2.5 s over target, want sever-p2", st)
	}
	// 90 ms: below the target, above the step-down threshold (70 ms):
	// the stage holds however long it lasts.
	observeFor(s, c, time.Minute, 90*time.Millisecond, 5)
	if st := s.Stage(); st != StageSeverP2 {
		t.Fatalf("stage %v after a minute at 90 ms, want it held at sever-p2", st)
	}
	// 20 ms: one stage down per FallDwell (10 s).
	observeFor(s, c, 9*time.Second, 20*time.Millisecond, 5)
	if st := s.Stage(); st != StageSeverP2 {
		t.Fatalf("stage %v 9 s into the calm, want sever-p2 (fall dwell 10 s)", st)
	}
	observeFor(s, c, 2*time.Second, 20*time.Millisecond, 5)
	if st := s.Stage(); st != StageRejectP2 {
		t.Fatalf("stage %v 11 s into the calm, want reject-p2", st)
	}
	observeFor(s, c, 10*time.Second, 20*time.Millisecond, 5)
	if st := s.Stage(); st != StageNormal {
		t.Fatalf("stage %v 21 s into the calm, want normal", st)
	}
	var path []Stage
	for _, x := range s.Transitions() {
		path = append(path, x.To)
	}
	if want := []Stage{1, 2, 1, 0}; !equalStages(path, want) {
		t.Errorf("path %v, want %v", path, want)
	}
}

func equalStages(a, b []Stage) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestFlapsDoubleTheFallDwell(t *testing.T) {
	s, c := shedAt(t, ShedderConfig{})
	var dwells []time.Duration
	for range 4 {
		observeFor(s, c, 1100*time.Millisecond, 150*time.Millisecond, 5) // rise one stage
		dwells = append(dwells, s.Snapshot().FallDwell)
		for s.Stage() != StageNormal {
			observeFor(s, c, time.Second, 20*time.Millisecond, 5)
		}
	}
	// The first rise is no flap; each later one comes right after a fall
	// and doubles the dwell the calm before it had forgiven back to 10 s.
	if want := []time.Duration{10 * time.Second, 20 * time.Second, 20 * time.Second, 20 * time.Second}; !slices.Equal(dwells, want) {
		t.Errorf("fall dwell after each rise %v, want %v", dwells, want)
	}
	// Flaps faster than calm forgives them accumulate.
	s, c = shedAt(t, ShedderConfig{})
	observeFor(s, c, 1100*time.Millisecond, 150*time.Millisecond, 5)
	observeFor(s, c, 11*time.Second, 20*time.Millisecond, 5) // falls, nothing forgiven
	observeFor(s, c, 1100*time.Millisecond, 150*time.Millisecond, 5)
	if d := s.Snapshot().FallDwell; d != 20*time.Second {
		t.Fatalf("fall dwell %v after a flap, want 20 s", d)
	}
	// Each 2 x FallDwell of unbroken calm halves a damped dwell.
	observeFor(s, c, 25*time.Second, 20*time.Millisecond, 5)
	if d := s.Snapshot().FallDwell; d != 10*time.Second {
		t.Errorf("fall dwell %v after 25 s of calm, want 10 s again", d)
	}
}

func TestResourceEmergencySeversP0Last(t *testing.T) {
	s, c := shedAt(t, ShedderConfig{Resources: ResourceConfig{MaxFDs: 1000}, SeverRate: 10})
	s.ObserveResources(0, 500)
	c.Advance(time.Second)
	if st := s.EvaluateAt(c.Now()); st != StageNormal {
		t.Fatalf("stage %v at half the fd ceiling", st)
	}
	open := Counts{P0: 100, P1: 3, P2: 2}
	if q := s.SeverQuotaAt(open, c.Now()); q != (Counts{}) {
		t.Fatalf("sever quota %v without overload", q)
	}
	s.ObserveResources(0, 1000)
	c.Advance(time.Second)
	if st := s.EvaluateAt(c.Now()); st != StageLifeboat {
		t.Fatalf("stage %v at the fd ceiling, want lifeboat at once", st)
	}
	if d := s.AdmitAt(P0, c.Now()); d.Admit || d.RetryAfter <= 0 {
		t.Errorf("lifeboat decision for P0 %+v, want a rejection with a hint", d)
	}
	// Emergency pacing: 5 x 10/s = 50/s, burst 5. P2 first, then P1, then P0.
	var total Counts
	for range 10 {
		c.Advance(100 * time.Millisecond)
		q := s.SeverQuotaAt(open, c.Now())
		for p := range q {
			open[p] -= q[p]
			total[p] += q[p]
		}
	}
	if total[P2] != 2 || total[P1] != 3 {
		t.Errorf("severed %v: want every P2 and P1 session first", total)
	}
	if got := total.Total(); got < 45 || got > 55 {
		t.Errorf("severed %d in one second at 50/s, want about 50", got)
	}
	if total[P0] == 0 {
		t.Error("no P0 severed in a hard emergency")
	}
	if sn := s.Snapshot(); sn.Severed != total || !sn.Emergency {
		t.Errorf("snapshot severed %v emergency %v, want %v true", sn.Severed, sn.Emergency, total)
	}
}

func TestNoP0SeveranceWithoutEmergency(t *testing.T) {
	s, c := shedAt(t, ShedderConfig{})
	open := Counts{P0: 1000, P1: 50, P2: 50}
	var total Counts
	var atSeverP1 Counts
	for range 200 { // 20 s far over target
		c.Advance(100 * time.Millisecond)
		for range 5 {
			s.Observe(time.Second)
		}
		q := s.SeverQuotaAt(open, c.Now())
		for p := range q {
			open[p] -= q[p]
			total[p] += q[p]
		}
		if s.Stage() == StageSeverP1 {
			atSeverP1 = open
		}
	}
	if total[P0] != 0 {
		t.Errorf("severed %d P0 sessions without a resource emergency", total[P0])
	}
	if total[P1] != 50 || total[P2] != 50 {
		t.Errorf("severed %v, want all 50 P1 and 50 P2", total)
	}
	if atSeverP1[P1]+atSeverP1[P2] != 0 {
		t.Errorf("left sever-p1 with %v still open: lifeboat must wait for P1 and P2 to go", atSeverP1)
	}
	if st := s.Stage(); st != StageLifeboat {
		t.Errorf("stage %v once nothing below P0 is left and latency stays high, want lifeboat", st)
	}
}

func TestRetryHintsAreSpread(t *testing.T) {
	s, c := shedAt(t, ShedderConfig{Seed: 1})
	observeFor(s, c, 3500*time.Millisecond, 150*time.Millisecond, 5)
	if st := s.Stage(); st != StageRejectP1 {
		t.Fatalf("stage %v, want reject-p1", st)
	}
	var lo, hi time.Duration = time.Hour, 0
	seen := map[time.Duration]bool{}
	for range 1000 {
		d := s.AdmitAt(P2, c.Now())
		if d.Admit {
			t.Fatal("P2 admitted at reject-p1")
		}
		lo, hi = min(lo, d.RetryAfter), max(hi, d.RetryAfter)
		seen[d.RetryAfter/time.Second] = true
	}
	// P2 is re-admitted in reject-p2, two stages below: after reject-p1's
	// calm (10 s, nothing of it yet) and sever-p2's (10 s), over 10 s;
	// the range is at least as wide as its start (Spread 1): [20 s, 40 s).
	if lo < 20*time.Second || hi > 40*time.Second || hi-lo < 15*time.Second {
		t.Errorf("P2 hints in [%v, %v], want spread across [20 s, 40 s)", lo, hi)
	}
	if len(seen) < 15 {
		t.Errorf("hints fall in only %d distinct seconds: a herd would come back in one wave", len(seen))
	}
	// A P0 at a stage that admits it got its rejection elsewhere: Min.
	if h := s.RetryAfterAt(P0, c.Now()); h < time.Second || h >= 2*time.Second {
		t.Errorf("P0 hint %v, want [1 s, 2 s)", h)
	}
}

func TestRetryHintsUseInjectedRand(t *testing.T) {
	hints := func() []time.Duration {
		s, c := shedAt(t, ShedderConfig{Rand: rand.NewPCG(9, 9)})
		var out []time.Duration
		for range 5 {
			out = append(out, s.RetryAfterAt(P1, c.Now()))
		}
		return out
	}
	a, b := hints(), hints()
	for i := range a {
		if a[i] != b[i] {
			t.Fatalf("hints %v and %v differ with the same seeded source", a, b)
		}
	}
	if a[0] == a[1] && a[1] == a[2] {
		t.Errorf("hints %v are not jittered", a)
	}
}

func TestInvalidPriorityIsBackground(t *testing.T) {
	s, c := shedAt(t, ShedderConfig{})
	observeFor(s, c, 1100*time.Millisecond, 150*time.Millisecond, 5)
	if d := s.AdmitAt(Priority(9), c.Now()); d.Admit {
		t.Error("an invalid priority was admitted at reject-p2")
	}
	if n := s.Snapshot().Rejected[P2]; n != 1 {
		t.Errorf("rejected P2 count %d, want the invalid priority counted as P2", n)
	}
	if _, err := ParsePriority("urgent"); err == nil {
		t.Error("ParsePriority accepted \"urgent\"")
	}
	for _, p := range []Priority{P0, P1, P2} {
		if q, err := ParsePriority(p.String()); err != nil || q != p {
			t.Errorf("ParsePriority(%q) = %v, %v", p.String(), q, err)
		}
	}
}

func TestShedderConcurrentUse(t *testing.T) {
	s, err := NewShedder(ShedderConfig{EvalInterval: time.Millisecond, RiseDwell: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 3000 {
				p := Priority(i % NumPriorities)
				switch g % 4 {
				case 0:
					if d := s.Admit(p); !d.Admit && d.RetryAfter <= 0 {
						t.Errorf("rejection without a hint: %+v", d)
						return
					}
				case 1:
					s.Observe(time.Duration(i%300) * time.Millisecond)
				case 2:
					s.SeverQuota(Counts{10, 10, 10})
					s.ObserveResources(uint64(i), i)
				default:
					_ = s.RetryAfter(p)
					_ = s.Snapshot()
					_ = s.Transitions()
				}
			}
		}()
	}
	wg.Wait()
	sn := s.Snapshot()
	if got := sn.Admitted.Total() + sn.Rejected.Total(); got != 6000 {
		t.Errorf("admitted + rejected = %d, want the 6000 Admit calls", got)
	}
}

func TestResourcePressureMovesStages(t *testing.T) {
	const ceiling = 1 << 30
	s, c := shedAt(t, ShedderConfig{Resources: ResourceConfig{MaxHeap: ceiling}})
	tick := func(d time.Duration) {
		end := c.Now().Add(d)
		for c.Now().Before(end) {
			c.Advance(100 * time.Millisecond)
			s.EvaluateAt(c.Now())
		}
	}
	s.ObserveResources(ceiling*95/100, 0) // above High (0.9), below the ceiling
	tick(2100 * time.Millisecond)
	if st := s.Stage(); st != StageSeverP2 {
		t.Fatalf("stage %v after 2 s at 95 %% heap, want sever-p2", st)
	}
	if tr := s.Transitions(); tr[0].Reason != "resources" {
		t.Errorf("first transition reason %q, want resources", tr[0].Reason)
	}
	s.ObserveResources(ceiling*85/100, 0) // between Low and High: hold
	tick(time.Minute)
	if st := s.Stage(); st != StageSeverP2 {
		t.Fatalf("stage %v after a minute at 85 %% heap, want it held", st)
	}
	s.ObserveResources(ceiling/2, 0)
	tick(21 * time.Second)
	if st := s.Stage(); st != StageNormal {
		t.Fatalf("stage %v after 21 s at 50 %% heap, want normal", st)
	}
	if sn := s.Snapshot(); sn.Emergency || sn.Severed.Total() != 0 {
		t.Errorf("snapshot %+v: no emergency, nothing severed expected", sn)
	}
}

// TestLatencyCeiling: with latency_ceiling sever-p1, a minute of latency
// far over the target takes the stage to sever-p1 and no further (P0 is
// admitted throughout); resource pressure takes it on to the lifeboat,
// and once resources are calm it falls back to the ceiling however slow
// the latencies still are, and stays there.
func TestLatencyCeiling(t *testing.T) {
	s, c := shedAt(t, ShedderConfig{LatencyCeiling: StageSeverP1, Resources: ResourceConfig{MaxFDs: 1000}})
	s.ObserveResources(0, 100)
	for range 60 {
		observeFor(s, c, time.Second, time.Second, 5)
		if d := s.AdmitAt(P0, c.Now()); !d.Admit {
			t.Fatalf("P0 refused at %v by latency alone (ceiling sever-p1)", d.Stage)
		}
	}
	if st := s.Stage(); st != StageSeverP1 {
		t.Fatalf("stage %v after a minute far over target, want sever-p1 (the ceiling)", st)
	}
	s.ObserveResources(0, 950) // pressure 0.95: high, not an emergency
	observeFor(s, c, 1500*time.Millisecond, time.Second, 5)
	if st := s.Stage(); st != StageLifeboat {
		t.Fatalf("stage %v under resource pressure, want lifeboat", st)
	}
	if last := s.Transitions()[len(s.Transitions())-1]; last.Reason != "resources" {
		t.Errorf("rise above the ceiling for %q, want resources", last.Reason)
	}
	s.ObserveResources(0, 100)
	observeFor(s, c, 9*time.Second, time.Second, 5)
	if st := s.Stage(); st != StageLifeboat {
		t.Fatalf("stage %v 9 s after resources calmed, want lifeboat held for the fall dwell (10 s)", st)
	}
	observeFor(s, c, 2*time.Second, time.Second, 5)
	if st := s.Stage(); st != StageSeverP1 {
		t.Fatalf("stage %v 11 s after resources calmed, latency still slow: want sever-p1", st)
	}
	observeFor(s, c, time.Minute, time.Second, 5)
	if st := s.Stage(); st != StageSeverP1 {
		t.Fatalf("stage %v after another slow minute, want sever-p1 held", st)
	}

	// Without a ceiling the same latency reaches the lifeboat.
	s, c = shedAt(t, ShedderConfig{})
	observeFor(s, c, 10*time.Second, time.Second, 5)
	if st := s.Stage(); st != StageLifeboat {
		t.Fatalf("stage %v after 10 s far over target without a ceiling, want lifeboat", st)
	}
}

func TestStageText(t *testing.T) {
	for st := range Stage(NumStages) {
		b, err := st.MarshalText()
		if err != nil {
			t.Fatal(err)
		}
		var back, byNumber Stage
		if err := back.UnmarshalText(b); err != nil || back != st {
			t.Errorf("%q read back as %v, %v", b, back, err)
		}
		if err := byNumber.UnmarshalText([]byte{'0' + byte(st)}); err != nil || byNumber != st {
			t.Errorf("stage number %d read as %v, %v", st, byNumber, err)
		}
	}
	var st Stage
	if err := st.UnmarshalText([]byte("panic")); err == nil || !strings.HasPrefix(err.Error(), "limit: ") {
		t.Errorf("unknown stage: %v, want an error starting with limit:", err)
	}
	if _, err := Stage(NumStages).MarshalText(); err == nil {
		t.Error("stage 6 marshalled")
	}
	if err := (ShedderConfig{LatencyCeiling: NumStages}).Validate(); err == nil {
		t.Error("latency_ceiling 6 validated")
	}
}
