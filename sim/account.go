package sim

import (
	"fmt"
	"math"
	"time"

	"github.com/corralhq/corral/shard"
)

// Census counts the devices in each state by walking the engine's
// structures (not its running totals): Offline (not arrived), Waiting (in
// the backoff wheel), Connecting (a handshake queued at an origin) and
// Connected.
type Census struct {
	Offline, Waiting, Connecting, Connected int64
}

// Total is the number of devices in every state.
func (c Census) Total() int64 { return c.Offline + c.Waiting + c.Connecting + c.Connected }

// Census walks every structure that holds devices and counts them. It
// returns an error when a running total disagrees with the walk. It costs
// time proportional to the cohorts held; tests call it after every step.
func (s *Sim) Census() (Census, error) {
	var c Census
	for _, n := range s.offline {
		c.Offline += n
	}
	c.Waiting = s.wheel.count()
	for _, b := range s.pend {
		for _, p := range b {
			c.Connecting += p.c.n
		}
	}
	var pending int64
	for i, row := range s.conn {
		var sum int64
		for _, n := range row {
			if n < 0 {
				return c, fmt.Errorf("sim: origin %d holds %d devices of a flow", i, n)
			}
			sum += n
		}
		if sum != s.origins[i].conns {
			return c, fmt.Errorf("sim: origin %d counts %d connections, holds %d", i, s.origins[i].conns, sum)
		}
		c.Connected += sum
		pending += s.origins[i].pending
	}
	if pending != c.Connecting {
		return c, fmt.Errorf("sim: origins count %d handshakes in flight, the queue holds %d", pending, c.Connecting)
	}
	if c.Waiting != s.wheel.total {
		return c, fmt.Errorf("sim: wheel counts %d waiting, holds %d", s.wheel.total, c.Waiting)
	}
	if n := len(s.fails) + len(s.windowFails); n > 0 { // Census runs between steps, when every failure has its delay
		return c, fmt.Errorf("sim: %d failed cohorts not yet scheduled", n)
	}
	return c, nil
}

// Devices returns the number of devices of the run (after Scale).
func (s *Sim) Devices() int64 { return s.total }

func (s *Sim) newStep(t int) Step {
	st := Step{
		T:                   float64(t) * s.dts,
		ConnectedByPriority: make([]int64, s.nP),
		Successes:           make([]int64, s.nP),
		RequestErrors:       make([]int64, s.nP),
		Origins:             make([]OriginStep, len(s.origins)),
	}
	for c := range st.Errors {
		st.Errors[c] = make([]int64, s.nP)
	}
	if t == 0 {
		s.start = time.Now()
		s.summary = Summary{Errors: map[string]int64{}, ErrorsByPriority: make([]int64, s.nP), TimeToSettle: -1, AttemptErrorPeakAt: -1, PeakMinAttempts: s.minAttempts()}
		s.settledFrom = -1
	}
	return st
}

func (s *Sim) finishStep(t int, st *Step) {
	sum := &s.summary
	var upConns, upN, busiest float64
	var attemptsAll int64 // stream set-ups at every origin, retries included
	for _, o := range s.origins {
		attemptsAll += o.stepAttempts
	}
	for i, o := range s.origins {
		st.Connected += o.conns
		for p, n := range o.connPrio {
			st.ConnectedByPriority[p] += n
		}
		st.Connecting += o.pending
		util := float64(o.conns) / float64(o.maxConn)
		st.Origins[i] = OriginStep{
			Connected: o.conns, Utilisation: util, Queue: o.work, Up: o.up, Healthy: s.health.up[i],
			Attempts: o.stepAttempts, Failures: o.stepFail,
			Connections: int64(math.Ceil(o.pool)), NewConnections: int64(math.Round(o.newConns)),
			WeightFactor: s.feedback.factor(i),
		}
		if o.adm != nil {
			st.Origins[i].Limit = o.adm.limit()
		}
		if st.Attempts >= s.minAttempts() && attemptsAll > 0 {
			if sh := float64(o.stepAttempts) / float64(attemptsAll); sh > sum.PeakNewShare {
				sum.PeakNewShare, sum.PeakNewShareOrigin = sh, i
			}
		}
		o.stepAttempts, o.stepFail, o.newConns = 0, [NumCauses]int64{}, 0
		sum.PeakUtilisation = math.Max(sum.PeakUtilisation, util)
		if o.up {
			upConns += float64(o.conns)
			upN++
			busiest = math.Max(busiest, float64(o.conns))
		}
		clear(o.fresh)
	}
	if upConns > 0 {
		sum.PeakImbalance = math.Max(sum.PeakImbalance, busiest/(upConns/upN))
	}
	st.Waiting = s.wheel.total
	st.BigResolvers = s.dns.bigNow()
	for _, n := range s.offline {
		st.Offline += n
	}
	st.AttemptsPerSec = float64(st.Attempts) / s.dts
	var errs, reqErrs int64
	for c := range st.Errors {
		for p, n := range st.Errors[c] {
			errs += n
			sum.Errors[Cause(c).String()] += n
			sum.ErrorsByPriority[p] += n
		}
	}
	for _, n := range st.RequestErrors {
		reqErrs += n
	}
	if den := st.Attempts + st.Requests; den > 0 {
		st.FiveXXRate = math.Min(1, float64(errs+reqErrs)/float64(den))
	}
	st.AttemptErrors = errs
	if st.Attempts > 0 {
		st.AttemptErrorRate = math.Min(1, float64(errs)/float64(st.Attempts))
	}
	if st.Requests > 0 {
		st.RequestErrorRate = math.Min(1, float64(reqErrs)/float64(st.Requests))
	}
	sum.FiveXXPeak = math.Max(sum.FiveXXPeak, st.FiveXXRate)
	sum.AttemptErrors += errs
	if st.Attempts >= s.minAttempts() {
		if st.AttemptErrorRate > sum.AttemptErrorPeak || sum.AttemptErrorPeakAt < 0 {
			sum.AttemptErrorPeak, sum.AttemptErrorPeakAt = st.AttemptErrorRate, st.T
		}
		if st.AttemptErrorRate > 0.01 {
			sum.AttemptErrorSeconds += s.dts
		}
	}
	if st.Requests >= s.minAttempts() {
		sum.RequestErrorPeak = math.Max(sum.RequestErrorPeak, st.RequestErrorRate)
	}
	sum.Attempts += st.Attempts
	sum.PeakAttemptsSec = math.Max(sum.PeakAttemptsSec, st.AttemptsPerSec)
	for _, n := range st.Successes {
		sum.Successes += n
	}
	sum.Requests += st.Requests
	sum.RequestErrors += reqErrs
	sum.PeakConnected = max(sum.PeakConnected, st.Connected)
	// P0 downtime: P0 devices online without a connection, this step.
	p0Online := s.p0 - s.offPrio[0]
	sum.P0DowntimeDeviceSec += float64(p0Online-st.ConnectedByPriority[0]) * s.dts
	// Settled: 99 % of the devices online connected and at most 1 % of
	// the requests failing; the settle time is from the last event to the
	// first step of the last settled stretch, which reaches the end of
	// the run (Result checks that the end is settled).
	online := s.total - st.Offline
	settled := online > 0 && float64(st.Connected) >= 0.99*float64(online) && st.RequestErrorRate <= 0.01
	switch {
	case !settled:
		s.settledFrom = -1
	case s.settledFrom < 0 && t >= s.lastEvent():
		s.settledFrom = t
	}
	if s.tenants != nil {
		s.tenants.observe(t, s.connTenant)
	}
	s.out = append(s.out, *st)
}

// eventRates is the 5xx rate and the attempt error rate over the steps
// from the first scheduled event to the step the fleet settled (the end
// of the run if it did not).
func (s *Sim) eventRates(settle float64) (fiveXX, attempts float64) {
	end := len(s.out)
	if settle >= 0 {
		end = min(end, s.lastEvent()+int(settle/s.dts)+1)
	}
	var bad, all, badAtt, allAtt int64
	for _, st := range s.out[min(s.firstEvent(), end):end] {
		badAtt += st.AttemptErrors
		allAtt += st.Attempts
		bad += st.AttemptErrors
		for _, n := range st.RequestErrors {
			bad += n
		}
		all += st.Attempts + st.Requests
	}
	if all > 0 {
		fiveXX = math.Min(1, float64(bad)/float64(all))
	}
	if allAtt > 0 {
		attempts = math.Min(1, float64(badAtt)/float64(allAtt))
	}
	return fiveXX, attempts
}

// minAttempts is the least number of attempts (or requests) of a step
// that counts for a peak rate: one per 10,000 devices, at least 100 (as sim/report measures it).
func (s *Sim) minAttempts() int64 { return max(100, s.total/10_000) }

// firstEvent is the step of the first scheduled change of the run (0 when
// there is none).
func (s *Sim) firstEvent() int {
	first := math.MaxInt
	tr := s.sc.Traffic
	for _, a := range tr.Arrivals {
		first = min(first, stepsOf(a.At, s.dt))
	}
	for _, d := range tr.Disconnects {
		first = min(first, stepsOf(d.At, s.dt))
	}
	for _, r := range tr.RegionLoss {
		first = min(first, stepsOf(r.At, s.dt))
	}
	for _, p := range tr.Poison {
		first = min(first, stepsOf(p.At, s.dt))
	}
	if first == math.MaxInt {
		return 0
	}
	return first
}

// lastEvent is the step of the last scheduled change of the run.
func (s *Sim) lastEvent() int {
	last := 0
	tr := s.sc.Traffic
	for _, a := range tr.Arrivals {
		last = max(last, stepsOf(a.At+a.Over, s.dt))
	}
	for _, d := range tr.Disconnects {
		last = max(last, stepsOf(d.At+d.Over, s.dt))
	}
	for _, r := range tr.RegionLoss {
		last = max(last, stepsOf(r.At+r.For, s.dt))
	}
	for _, p := range tr.Poison {
		last = max(last, stepsOf(p.At, s.dt))
	}
	return last
}

// Result returns the run's result so far (the whole run once Done).
func (s *Sim) Result() *Result {
	r := &Result{
		Scenario:   s.sc.Name,
		Variant:    s.name,
		Seed:       s.sc.Seed,
		Devices:    s.total,
		Step:       s.dts,
		Priorities: s.prioNames,
		Causes:     CauseNames(),
		Summary:    s.summary,
		Steps:      s.out,
	}
	for _, o := range s.origins {
		r.Origins = append(r.Origins, o.name)
	}
	sum := &r.Summary
	if len(s.out) > 0 {
		sum.FinalConnected = s.out[len(s.out)-1].Connected
	}
	var errs int64
	for _, n := range sum.Errors {
		errs += n
	}
	if den := sum.Attempts + sum.Requests; den > 0 {
		sum.FiveXXAverage = float64(errs+sum.RequestErrors) / float64(den)
	}
	if s.settledFrom >= 0 {
		sum.TimeToSettle = float64(s.settledFrom-s.lastEvent()) * s.dts
	}
	if sum.Attempts > 0 {
		sum.AttemptErrorAverage = float64(errs) / float64(sum.Attempts)
	}
	if sum.Requests > 0 {
		sum.RequestErrorAverage = float64(sum.RequestErrors) / float64(sum.Requests)
	}
	sum.FiveXXEvent, sum.AttemptErrorEvent = s.eventRates(sum.TimeToSettle)
	if p0 := s.p0 - s.offPrio[0]; p0 > 0 {
		sum.P0Downtime = sum.P0DowntimeDeviceSec / float64(p0)
	}
	if s.tenants != nil {
		sum.Tenants = s.tenants.summary(s.dns)
	}
	sum.Resolvers = s.dns.classes.summary()
	s.dns.audience.summary(sum.Resolvers)
	sum.Elapsed = time.Since(s.start)
	return r
}

// tenantTrack follows each tenant after the poison starts.
type tenantTrack struct {
	poison    []int
	first     int // step the first poison starts
	affected  []bool
	fullyDown []bool
	seen      []bool // had a connection at some step
}

func newTenantTrack(n int, poison []int) *tenantTrack {
	t := &tenantTrack{poison: poison, first: math.MaxInt, affected: make([]bool, n), fullyDown: make([]bool, n), seen: make([]bool, n)}
	for _, at := range poison {
		if at >= 0 {
			t.first = min(t.first, at)
		}
	}
	return t
}

func (t *tenantTrack) failed(tenant, step int) {
	if step >= t.first {
		t.affected[tenant] = true
	}
}

func (t *tenantTrack) observe(step int, conns []int64) {
	for i, n := range conns {
		if n > 0 {
			t.seen[i] = true
		} else if step >= t.first && t.seen[i] {
			t.fullyDown[i] = true
		}
	}
}

func (t *tenantTrack) summary(d *dnsModel) *TenantSummary {
	ts := &TenantSummary{}
	var aff, down int
	for i := range t.affected {
		if t.poison[i] >= 0 {
			continue
		}
		ts.Tenants++
		if t.affected[i] {
			aff++
		}
		if t.fullyDown[i] {
			down++
		}
	}
	if ts.Tenants > 0 {
		ts.Affected = float64(aff) / float64(ts.Tenants)
		ts.FullyDown = float64(down) / float64(ts.Tenants)
	}
	if d.dealer != nil {
		if b, err := shard.BlastRadius(d.dealer.Workers(), d.dealer.HandSize(), 1); err == nil {
			ts.PredictedAffected, _ = b.Degraded.Float64()
			ts.PredictedFullyDown, _ = b.Down.Float64()
		}
	}
	return ts
}
