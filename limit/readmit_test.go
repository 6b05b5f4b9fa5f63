package limit

import (
	"testing"
	"time"
)

// toRejectP2 raises a default Shedder to reject-p2 (150 ms against the
// 100 ms target for 1.1 s) and returns it with its clock.
func toRejectP2(t *testing.T) (*Shedder, func(time.Duration, time.Duration)) {
	t.Helper()
	s, c := shedAt(t, ShedderConfig{Seed: 3})
	feed := func(dur, lat time.Duration) { observeFor(s, c, dur, lat, 5) }
	feed(1100*time.Millisecond, 150*time.Millisecond)
	if st := s.Stage(); st != StageRejectP2 {
		t.Fatalf("stage %v, want reject-p2", st)
	}
	return s, feed
}

// admittedShare asks the Shedder about n P2 arrivals now and returns the
// share it admitted.
func admittedShare(s *Shedder, n int) float64 {
	k := 0
	for range n {
		if s.AdmitAt(P2, s.cfg.Clock.Now()).Admit {
			k++
		}
	}
	return float64(k) / float64(n)
}

// TestCalmReadmitsTheShedPriority: at reject-p2 a calm node admits a share
// of P2 that grows over FallDwell (10 s) of calm, instead of refusing all
// of it until the dwell has passed; nothing of P2 while still overloaded;
// the stage falls once the share is whole.
func TestCalmReadmitsTheShedPriority(t *testing.T) {
	s, feed := toRejectP2(t)
	if got := admittedShare(s, 1000); got != 0 {
		t.Fatalf("P2 admitted %.2f at reject-p2 while overloaded, want 0", got)
	}
	feed(500*time.Millisecond, 90*time.Millisecond) // below target, above 70 ms: holds
	if got := admittedShare(s, 1000); got != 0 {
		t.Errorf("P2 admitted %.2f between step-down and target, want 0 (not calm)", got)
	}
	var shares []float64
	for range 4 {
		feed(2*time.Second, 20*time.Millisecond)
		shares = append(shares, admittedShare(s, 2000))
	}
	// After 2, 4, 6 and 8 s of calm: about 0.2, 0.4, 0.6, 0.8 (the calm
	// starts at the first calm evaluation, within 0.5 s).
	for i, got := range shares {
		want := 0.2 * float64(i+1)
		if got < want-0.1 || got > want+0.05 {
			t.Errorf("after %d s of calm P2 admitted %.2f, want about %.1f (all shares %.2f)", 2*(i+1), got, want, shares)
		}
	}
	if st := s.Stage(); st != StageRejectP2 {
		t.Fatalf("stage %v after 8 s of calm, want reject-p2 until the share is whole", st)
	}
	feed(3*time.Second, 20*time.Millisecond)
	if st := s.Stage(); st != StageNormal {
		t.Fatalf("stage %v after 11 s of calm, want normal", st)
	}
	if got := admittedShare(s, 100); got != 1 {
		t.Errorf("P2 admitted %.2f at normal", got)
	}
}

// TestReadmissionBacksOffBeforeRising: an overload while a share is being
// re-admitted halves the share at each evaluation and raises the stage
// only once the share is spent (below 1/16), so a re-admission that went
// too far is taken back before anything is severed.
func TestReadmissionBacksOffBeforeRising(t *testing.T) {
	s, feed := toRejectP2(t)
	feed(5*time.Second, 20*time.Millisecond)
	before := s.Snapshot().Readmit
	// The evaluation after the rise still saw the slow handshakes; the
	// calm starts at the one after it: about 4 s of calm.
	if before < 0.35 || before > 0.5 {
		t.Fatalf("share %.2f after 5 s of calm, want about 0.4", before)
	}
	// Two evaluations over the target: halved twice, the stage holds.
	feed(time.Second, 150*time.Millisecond)
	if st, got := s.Stage(), s.Snapshot().Readmit; st != StageRejectP2 || got > before/4+1e-9 || got < before/4-1e-9 {
		t.Fatalf("after 1 s over target: stage %v share %.3f, want reject-p2 and %.3f", st, got, before/4)
	}
	// 0.11 -> 0.056 -> rise at the next evaluation over target.
	feed(1500*time.Millisecond, 150*time.Millisecond)
	if st := s.Stage(); st != StageSeverP2 {
		t.Fatalf("stage %v once the share is spent and the overload holds, want sever-p2", st)
	}
	if got := s.Snapshot().Readmit; got != 0 {
		t.Errorf("share %.3f after the rise, want 0", got)
	}
}

// TestSeverStageWaitsForItsCalm: a stage that severs re-admits nothing
// (what it turned away comes back in the stage below) and falls after
// FallDwell of calm; a spell that is not calm starts it over.
func TestSeverStageWaitsForItsCalm(t *testing.T) {
	s, c := shedAt(t, ShedderConfig{})
	observeFor(s, c, 2100*time.Millisecond, 150*time.Millisecond, 5)
	if st := s.Stage(); st != StageSeverP2 {
		t.Fatalf("stage %v, want sever-p2", st)
	}
	observeFor(s, c, 6*time.Second, 20*time.Millisecond, 5)
	if got := admittedShare(s, 500); got != 0 {
		t.Errorf("P2 admitted %.2f at sever-p2, want 0", got)
	}
	observeFor(s, c, time.Second, 90*time.Millisecond, 5) // not calm (above 70 ms): the calm starts over
	observeFor(s, c, 9*time.Second, 20*time.Millisecond, 5)
	if st := s.Stage(); st != StageSeverP2 {
		t.Fatalf("stage %v 9 s after the calm started over, want sever-p2", st)
	}
	observeFor(s, c, 2*time.Second, 20*time.Millisecond, 5)
	if st := s.Stage(); st != StageRejectP2 {
		t.Fatalf("stage %v 11 s into the calm, want reject-p2", st)
	}
}

// TestHintsEndWithTheReadmission: a hint for turned-away work never
// outlasts the time the stages need to admit it again (assuming calm),
// and shrinks as the re-admission proceeds, so a herd that was told to
// wait comes back while it is being taken in, not after.
func TestHintsEndWithTheReadmission(t *testing.T) {
	s, feed := toRejectP2(t)
	lo, hi := s.RetryRangeAt(P2, s.cfg.Clock.Now())
	if lo != time.Second || hi != 10*time.Second {
		t.Errorf("P2 hints at reject-p2 with nothing re-admitted in [%v, %v), want [1 s, 10 s)", lo, hi)
	}
	feed(6*time.Second, 20*time.Millisecond)
	share := s.Snapshot().Readmit
	lo, hi = s.RetryRangeAt(P2, s.cfg.Clock.Now())
	if want := time.Duration((1 - share) * float64(10*time.Second)); lo != time.Second || hi != max(want, 2*time.Second) {
		t.Errorf("P2 hints with %.2f re-admitted in [%v, %v), want [1 s, %v)", share, lo, hi, want)
	}
	for range 200 {
		if d := s.AdmitAt(P2, s.cfg.Clock.Now()); !d.Admit && (d.RetryAfter < lo || d.RetryAfter >= hi) {
			t.Fatalf("hint %v outside [%v, %v)", d.RetryAfter, lo, hi)
		}
	}
	// The window a rejection carries is the same range, whole: what a
	// server sends to clients that draw within it (wire's retry_within_ms).
	if w := s.RetryWindowAt(P2, s.cfg.Clock.Now()); w.After != lo || w.After+w.Within != hi {
		t.Errorf("RetryWindowAt = %+v, want [%v, %v)", w, lo, hi)
	}
	for range 200 {
		if d := s.AdmitAt(P2, s.cfg.Clock.Now()); !d.Admit && (d.Retry.After != lo || d.Retry.After+d.Retry.Within != hi) {
			t.Fatalf("a rejection's window %+v, want [%v, %v)", d.Retry, lo, hi)
		}
	}
	if got := (Retry{After: time.Second, Within: time.Second}).At(0.25); got != 1250*time.Millisecond {
		t.Errorf("Retry.At(0.25) of [1s, 2s] = %v, want 1.25s", got)
	}
}

// TestCohortReadmission: AdmitNAt admits the share's part of a cohort (the
// fraction drawn), so a cohort simulator sees the ramp a device sees.
func TestCohortReadmission(t *testing.T) {
	s, feed := toRejectP2(t)
	feed(5*time.Second, 20*time.Millisecond)
	share := s.Snapshot().Readmit
	d := s.AdmitNAt(P2, 10_000, s.cfg.Clock.Now())
	if want := share * 10_000; float64(d.Admitted) < want-1 || float64(d.Admitted) > want+1 || d.Admit || d.RetryAfter == 0 {
		t.Errorf("cohort of 10,000 at share %.3f: %+v, want about %.0f admitted, the rest hinted", share, d, want)
	}
	snap := s.Snapshot()
	if snap.Admitted[P2]+snap.Rejected[P2] != 10_000 || snap.Admitted[P2] != d.Admitted {
		t.Errorf("counted %d admitted and %d rejected, want %d and the rest of 10,000", snap.Admitted[P2], snap.Rejected[P2], d.Admitted)
	}
}

// TestRejectedWindow: RejectedWindow counts a rejection as Rejected does
// (one from admitted to rejected) and returns the window RetryWindowAt
// gives, without a draw; Rejected is that window at the next draw, so
// two Shedders seeded alike give the same hints whichever a server
// calls: the servers' Rejected is unchanged, and a cohort simulator gets
// the window whole.
func TestRejectedWindow(t *testing.T) {
	a, _ := toRejectP2(t)
	b, _ := toRejectP2(t)
	now := a.cfg.Clock.Now()
	for _, p := range []Priority{P0, P1, P2} {
		a.AdmitAt(p, now)
		b.AdmitAt(p, now)
		before := b.Snapshot()
		w := b.RejectedWindow(p, now)
		after := b.Snapshot()
		if after.Admitted[p] != before.Admitted[p]-1 || after.Rejected[p] != before.Rejected[p]+1 {
			t.Errorf("%v: RejectedWindow moved admitted %d -> %d, rejected %d -> %d; want one from admitted to rejected",
				p, before.Admitted[p], after.Admitted[p], before.Rejected[p], after.Rejected[p])
		}
		if rw := b.RetryWindowAt(p, now); w != rw {
			t.Errorf("%v: RejectedWindow = %+v, RetryWindowAt %+v", p, w, rw)
		}
		if h, want := a.Rejected(p, now), w.At(b.rnd.float64()); h != want {
			t.Errorf("%v: Rejected = %v, want the window %+v at the same draw, %v", p, h, w, want)
		}
		if a.Snapshot() != after {
			t.Errorf("%v: Rejected counted %+v, RejectedWindow %+v", p, a.Snapshot(), after)
		}
	}
}
