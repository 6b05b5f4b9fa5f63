package sim

import (
	"fmt"
	"math"
	"time"

	"github.com/corralhq/corral/limit"
	"github.com/corralhq/corral/scenario"
)

// adaptive is adaptive admission built from the limit package: a Limit on
// the handshakes in flight, fed one aggregated sample per step, and a
// staged priority Shedder, told the step's handshake latency with
// overload.latency_stages (as the hub and the edge tell theirs only with
// their latency_stages).
type adaptive struct {
	lim     limit.Limit
	shed    *limit.Shedder
	latency bool    // overload.latency_stages: the Shedder's stages move on latency
	mu      float64 // handshakes the origin completes per step
	hold    float64 // steps a handshake holds its slot at the least (idle latency)
}

var _ admitter = (*adaptive)(nil)

// newAdaptive builds the admission of origin number idx, on the run's
// clock. The limit starts at the origin's idle concurrency (handshakes per
// second times the idle handshake latency) and may grow to what it can
// finish within the client's connect timeout; the shedder's latency
// target is the scenario's overload target.
func newAdaptive(sc *scenario.Scenario, o *origin, idx int, clock limit.Clock) (*adaptive, error) {
	idle := max(1, int(o.muSec*o.hl.Seconds()))
	ceiling := int(math.Min(1<<30, math.Max(float64(idle)*4, o.muSec*sc.Client.ConnectTimeout.Seconds())))
	common := limit.Common{
		InitialLimit: min(max(20, idle), ceiling),
		MinLimit:     1,
		MaxLimit:     ceiling,
		Window:       sc.Step,
		MinSamples:   1,
	}
	seed := sc.Seed*1000003 + uint64(idx)
	var (
		lim limit.Limit
		err error
	)
	switch sc.Overload.Algorithm {
	case "vegas":
		lim, err = limit.NewVegas(limit.VegasConfig{Common: common, Seed: seed})
	case "aimd":
		lim, err = limit.NewAIMD(limit.AIMDConfig{Common: common, Timeout: sc.Overload.Target})
	case "fixed":
		lim, err = limit.NewFixed(common.InitialLimit)
	default:
		lim, err = limit.NewGradient(limit.GradientConfig{Common: common, Seed: seed})
	}
	if err != nil {
		return nil, fmt.Errorf("sim: origin %s: %w", o.name, err)
	}
	shed, err := limit.NewShedder(limit.ShedderConfig{
		// The Shedder counts its evaluations from its Clock's now at
		// construction: the run's epoch, where sim's times start.
		Clock:        clock,
		Target:       sc.Overload.Target,
		EvalInterval: sc.Step,
		MinSamples:   1,
		RiseDwell:    sc.Step,
		Retry:        limit.RetryConfig{Min: sc.Overload.RetryAfter, Max: maxHint(sc.Overload.RetryAfter) / 2, Spread: 1},
		Seed:         seed,
	})
	if err != nil {
		return nil, fmt.Errorf("sim: origin %s: %w", o.name, err)
	}
	return &adaptive{lim: lim, shed: shed, latency: sc.Overload.LatencyStages, mu: o.mu, hold: o.hl.Seconds() / sc.Step.Seconds()}, nil
}

func prio(p int) limit.Priority { return limit.Priority(min(p, int(limit.P2))) }

// admit decides on the step's demand and severs. The devices it turns
// away or severs get the retry window corral's edge and hub send whole
// (refusal() in both: a refused Hello the Shedder's Decision.Retry, a
// severed session RetryWindowAt; wire's retry_within_ms), and draw their
// delay within it by the spreader's quantiles, as corral's clients do
// (backoff.HintWithin): one window per cohort, the same for every device
// the origin turns away of that priority in the step, where the servers
// drew a point per device from it before.
func (a *adaptive) admit(now time.Time, work float64, demand, open []int64) (admitted, sever []int64, hints [][]limit.Retry) {
	admitted = make([]int64, len(demand))
	sever = make([]int64, len(demand))
	hints = make([][]limit.Retry, len(demand))
	// A slot frees and is taken again many times within a step: over the
	// step, L slots finish at most min(mu, L/hold) handshakes, which the
	// limiter may replace, on top of the slots free at its start.
	l := float64(a.lim.Limit())
	turnover := a.mu
	if a.hold > 0 {
		turnover = math.Min(a.mu, l/a.hold)
	}
	room := max(0, int64(math.Floor(l-work+turnover)))
	for p, d := range demand {
		if d == 0 {
			continue
		}
		lp := prio(p)
		// The shedder admits the cohort, or the share of it that its stage
		// re-admits; the limiter's room takes what it can of that.
		dec := a.shed.AdmitNAt(lp, d, now)
		admitted[p] = min(dec.Admitted, room)
		room -= admitted[p]
		if admitted[p] < d {
			// One window for the cohort's turned-away part: the
			// shedder's rejection's when it turned some away, else the
			// window of the limiter's refusal (the edge's refusalHint
			// sends the later of its Limiter's virtual-queue window and
			// the Shedder's; sim has no virtual queue: the Shedder's).
			r := dec.Retry
			if dec.Admit { // all admitted by the shedder: the limiter refused
				r = a.shed.RejectedWindow(lp, now)
			}
			hints[p] = []limit.Retry{r}
		}
	}
	var oc limit.Counts
	for p, n := range open {
		oc[prio(p)] += n
	}
	q := a.shed.SeverQuotaAt(oc, now)
	for p := range sever {
		lp := prio(p)
		sever[p] = min(open[p], q[lp])
		q[lp] -= sever[p]
		if sever[p] > 0 && hints[p] == nil {
			hints[p] = []limit.Retry{a.shed.RetryWindowAt(lp, now)}
		}
	}
	return admitted, sever, hints
}

func (a *adaptive) observe(now time.Time, latency time.Duration, inflight float64, served int64, dropped bool) {
	latency = min(latency, limit.MaxRTT)
	in := int(math.Min(inflight, 1<<30))
	_, _ = a.lim.Update(limit.Sample{Start: now, RTT: latency, InFlight: in, Weight: max(1, served)})
	if dropped {
		_, _ = a.lim.Update(limit.Sample{Start: now, InFlight: in, Dropped: true})
	}
	if a.latency {
		a.shed.Observe(latency)
	}
}

func (a *adaptive) limit() int { return a.lim.Limit() }

func (a *adaptive) stage() int { return int(a.shed.Stage()) }

// adaptiveAdmit applies adaptive admission to the attempts arr that reached
// origin i, and the shedder's quota of severed sessions. It returns the
// admitted attempts and how many devices they hold.
func (s *Sim) adaptiveAdmit(t, i int, o *origin, arr []cohort, st *Step) ([]cohort, int64) {
	now := s.at(t)
	byPrio := make([]int64, s.nP)
	for _, c := range arr {
		byPrio[s.prioOf(int(c.flow))] += c.n
	}
	admitted, sever, hints := o.adm.admit(now, o.work, byPrio, o.connPrio)
	out := s.admitted[:0]
	var demand int64
	for p := range s.nP {
		group := s.group[:0]
		for _, c := range arr {
			if s.prioOf(int(c.flow)) == p {
				group = append(group, c)
			}
		}
		s.group = group
		if len(group) == 0 {
			continue
		}
		if admitted[p] < byPrio[p] {
			group = s.cut(i, group, byPrio[p], admitted[p], CauseShed, hints[p], st)
		}
		out = append(out, group...)
		demand += admitted[p]
	}
	for p, n := range sever {
		if n > 0 {
			s.sever(i, p, n, hints[p], st)
		}
	}
	s.admitted = out
	return out, demand
}

// sever closes n connections of priority p at origin i, spread over its
// flows; the devices reconnect by the retry hints.
func (s *Sim) sever(i, p int, n int64, hints []limit.Retry, st *Step) {
	o := s.origins[i]
	total := o.connPrio[p]
	if total == 0 {
		return
	}
	ratio := float64(min(n, total)) / float64(total)
	u := s.rng.Float64()
	cum := 0.0
	var done int64
	for f := p; f < s.nF; f += s.nP {
		c := s.conn[i][f]
		if c == 0 {
			continue
		}
		cum += float64(c) * ratio
		m := max(0, min(int64(math.Floor(cum+u))-done, c))
		done += m
		if m > 0 {
			s.addConn(i, f, -m)
			st.Dropped += m
			s.failHinted(cohort{flow: int32(f)}, m, hints)
		}
	}
}

// observe feeds origin o's adaptive admission with the step's handshake
// latency.
func (s *Sim) observe(t int, o *origin, latency time.Duration, dropped bool) {
	now := s.at(t)
	var fresh int64
	for _, n := range o.fresh {
		fresh += n
	}
	o.adm.observe(now, latency, o.work, fresh, dropped)
}

// at returns the event time of step t, the time sim passes to the limit
// package's *At methods: the epoch plus t steps.
func (s *Sim) at(t int) time.Time { return s.epoch.Add(time.Duration(t) * s.dt) }

// runClock is the limit.Clock of one run: its event time now, the step
// in progress (Sim.now). Every limit object sim builds reads it, so none
// reads the wall clock: a Shedder takes its Clock's now at construction
// as the base it counts its evaluations from, and the run's objects are
// built before its first step, at the epoch. (Built without one, a
// Shedder counted from the wall clock's now, and sim's epoch,
// 2026-01-01, is before it: it never evaluated at sim's times and its
// stage never left normal, issue 15.) The methods sim calls all carry
// sim's time (AdmitNAt, RejectedWindow, RetryWindowAt, SeverQuotaAt,
// Limit.Update's Sample.Start); one without would read this clock.
type runClock struct{ s *Sim }

// Now returns the start of the run's current step.
func (c runClock) Now() time.Time { return c.s.at(c.s.now) }
