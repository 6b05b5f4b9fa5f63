package sim

import (
	"testing"
	"time"

	"github.com/corralhq/corral/limit"
	"github.com/corralhq/corral/scenario"
)

// stagesStorm is TestSheddingProtectsP0's storm (1 M devices dropped at
// 10 s onto 4 origins that take a minute each to refill alone, a backlog
// of 2 s) in adaptive mode, with the limit package's default latency
// target (100 ms, the Shedder's default in the hub and the edge): the
// step's handshake latency, the idle 50 ms plus the set-up queue the
// limit admits, passes it during the storm.
func stagesStorm(latencyStages bool) *scenario.Scenario {
	sc := storm("full", 1_000_000)
	sc.Origins[0].Backlog = int64(2 * sc.Origins[0].MaxNewPerSecond)
	sc.Overload.Mode, sc.Overload.Target = "adaptive", 100*time.Millisecond
	sc.Overload.LatencyStages = latencyStages
	return sc
}

// stageRun steps sc's run to its end and returns it with the highest
// stage any origin's Shedder was at after a step, and the step it was
// first reached.
func stageRun(t *testing.T, sc *scenario.Scenario) (s *Sim, top limit.Stage, at int) {
	t.Helper()
	s = mustNew(t, sc)
	at = -1
	for !s.Done() {
		step := s.now
		s.Step()
		for _, o := range s.origins {
			if st := o.adm.(*adaptive).shed.Stage(); st > top {
				top, at = st, step
			}
		}
	}
	return s, top, at
}

// TestLatencyStagesMoveTheShedder: with overload.latency_stages the
// Shedder of an origin the storm overloads leaves the normal stage, on
// latency, at sim's times (the run's clock: built on the wall clock, a
// Shedder counted from today and never evaluated at sim's times, whose
// epoch is 2026-01-01), turns P2 away and comes back to normal once the
// storm is over.
func TestLatencyStagesMoveTheShedder(t *testing.T) {
	sc := stagesStorm(true)
	s, top, at := stageRun(t, sc)
	if top < limit.StageRejectP2 {
		t.Fatalf("highest stage of any origin's Shedder %v; want reject-p2 or above in the storm", top)
	}
	if at < 10 {
		t.Errorf("stage %v first reached at step %d, before the storm at 10 s", top, at)
	}
	end := s.at(s.steps)
	var rose, rejectedP2 int64
	for _, o := range s.origins {
		a := o.adm.(*adaptive)
		for _, tr := range a.shed.Transitions() {
			if tr.At.Before(s.epoch) || tr.At.After(end) {
				t.Errorf("origin %s: transition %v -> %v at %v, outside the run's times [%v, %v]", o.name, tr.From, tr.To, tr.At, s.epoch, end)
			}
			if tr.To > tr.From && tr.Reason == "latency" {
				rose++
			}
		}
		sn := a.shed.Snapshot()
		if sn.Samples == 0 || sn.Latency <= 0 {
			t.Errorf("origin %s: the Shedder's last evaluation had %d latency samples (p99 %v); want the step's latency", o.name, sn.Samples, sn.Latency)
		}
		if sn.Stage != limit.StageNormal {
			t.Errorf("origin %s: stage %v at the end of the run, %v after the storm; want normal", o.name, sn.Stage, end.Sub(s.at(10)))
		}
		rejectedP2 += sn.Rejected[limit.P2]
	}
	if rose == 0 {
		t.Error("no stage rose on latency")
	}
	// A stage's AdmitNAt counts every device of the cohort it turns
	// away; the limit's refusals (RejectedWindow) count one per cohort,
	// 339 P2 cohorts in the same storm without latency stages.
	if rejectedP2 < 100_000 {
		t.Errorf("%d P2 set-ups rejected; want the stages' rejections, over 100,000", rejectedP2)
	}
	t.Logf("highest stage %v from %d s; %d rises on latency; P2 rejected %d", top, at, rose, rejectedP2)
}

// TestLatencyStagesOffHoldNormal: without overload.latency_stages, the
// servers' default (hub's overload.latency_stages, edge's
// admission.latency_stages), the same storm leaves every Shedder at the
// normal stage at every step: no latency reaches it, nothing is severed,
// and only the limit on handshakes in flight refuses.
func TestLatencyStagesOffHoldNormal(t *testing.T) {
	s, top, at := stageRun(t, stagesStorm(false))
	if top != limit.StageNormal {
		t.Fatalf("stage %v at step %d with latency_stages off; want normal throughout", top, at)
	}
	var rejectedP2 int64
	for _, o := range s.origins {
		sn := o.adm.(*adaptive).shed.Snapshot()
		if sn.Transitions != 0 || sn.Samples != 0 || sn.Severed.Total() != 0 {
			t.Errorf("origin %s: %d transitions, %d latency samples, %d severed; want none", o.name, sn.Transitions, sn.Samples, sn.Severed.Total())
		}
		rejectedP2 += sn.Rejected[limit.P2]
	}
	r := s.Result()
	if r.Summary.Errors[CauseShed.String()] == 0 {
		t.Error("nothing refused: the storm does not reach the limit")
	}
	t.Logf("P2 rejected %d (by the limit); shed %d", rejectedP2, r.Summary.Errors[CauseShed.String()])
}
