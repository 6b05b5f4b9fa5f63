package sim

import (
	"fmt"
	"math"
	"math/rand/v2"
	"time"

	"github.com/corralhq/corral/backoff"
	"github.com/corralhq/corral/limit"
	"github.com/corralhq/corral/scenario"
)

// Sim is one run of a scenario in progress. Build it with New, advance it
// with Step (or Run to the end) and read the result with Result. A Sim is
// not safe for concurrent use; runs of different variants may proceed in
// parallel on different Sims.
type Sim struct {
	sc    *scenario.Scenario
	name  string
	dt    time.Duration
	dts   float64 // step in seconds
	steps int
	now   int
	epoch time.Time // event time zero, for the limit package's samples

	nP, nT, nK, nF int
	prioNames      []string
	total          int64
	p0             int64 // devices of the first priority

	offline    []int64 // by flow
	offPrio    []int64
	waves      [][]int64 // by wave, by flow: devices of each arrival wave
	waveDone   [][]int64
	origins    []*origin
	conn       [][]int64 // by origin, by flow
	connTenant []int64

	wheel    *wheel
	spread   *spreader
	pend     [][]pending
	pendSize int

	dns      *dnsModel
	health   *healthView
	feedback *loadFeedback // nil: dns.feedback off
	routes   []route
	// popLoad is, by PoP then origin, the streams the PoP's edge hosts
	// hold or are setting up at the origin: what their p2c compares (an
	// edge host knows only its own sessions, edge.Origin.Load).
	popLoad [][]float64
	demand  []float64 // attempts of the step by route
	retry   []retryCohort
	retry2  []retryCohort
	spc     float64 // streams per upstream connection
	checkAt int     // steps between health checks

	rng      *rand.Rand
	fails    map[uint64]int64 // this step's failures by packed failKey
	failKeys []uint64         // scratch of settleFails
	// windowFails are this step's failures that carry a retry window.
	windowFails map[windowFail]int64
	windowKeys  []windowFail // scratch of settleFails

	drops   []dropEvent
	poison  []int // tenant -> step the poison starts, -1 none
	tenants *tenantTrack

	due         []cohort
	group       []cohort // scratch of adaptiveAdmit
	admitted    []cohort // scratch of adaptiveAdmit
	split       []int64
	reqDemand   []float64 // scratch of requests
	out         []Step
	summary     Summary
	settledFrom int // first step of the current settled stretch, -1 none
	start       time.Time
}

// retryCohort is a cohort an origin refused at once, which its edge hosts
// try again on another address of their answers in the same step.
type retryCohort struct {
	c     cohort
	from  int32 // the origin that refused it
	cause Cause // why
}

// pending is a cohort whose handshake completes (ok) or times out at a
// later step.
type pending struct {
	origin int32
	epoch  int32 // the origin's crash count when the handshake was queued
	c      cohort
	ok     bool
}

type dropEvent struct {
	start, steps int
	share        float64
	region       string
}

// New builds a Sim for a scenario without a sweep (expand one with
// Scenario.Variants). It fills the scenario's defaults in place and
// validates it; name labels the variant in the result. New does no I/O and
// starts no goroutine.
func New(sc *scenario.Scenario, name string) (*Sim, error) {
	sc.WithDefaults()
	if err := sc.Validate(); err != nil {
		return nil, fmt.Errorf("sim: %w", err)
	}
	if len(sc.Sweep.Backoff)+len(sc.Sweep.Overload)+len(sc.Sweep.OriginCount) > 0 {
		return nil, fmt.Errorf("sim: scenario %q has a sweep; run each of its Variants", sc.Name)
	}
	if len(sc.Traffic.MassClose) > 0 {
		return nil, fmt.Errorf("sim: %w", sc.Locate(scenario.Errorf("traffic.mass_close", "is not modelled by the simulator yet (kraken runs it)")))
	}
	for _, k := range []struct {
		key string
		n   int
	}{{"traffic.kill", len(sc.Traffic.Kill)}, {"traffic.unhealthy", len(sc.Traffic.Unhealthy)}, {"traffic.move", len(sc.Traffic.Move)}} {
		if k.n > 0 {
			return nil, fmt.Errorf("sim: %w", sc.Locate(scenario.Errorf(k.key, "is not modelled by the simulator yet (kraken runs it)")))
		}
	}
	policy, err := backoff.New(sc.Client.Backoff)
	if err != nil {
		return nil, fmt.Errorf("sim: %w", err)
	}
	s := &Sim{
		sc:    sc,
		name:  name,
		dt:    sc.Step,
		dts:   sc.Step.Seconds(),
		steps: int(sc.Duration / sc.Step),
		epoch: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC),
		nP:    len(sc.Population.Priorities),
		nT:    sc.Population.Tenants,
		nK:    sc.Geography.PoPs,
		rng:   rand.New(rand.NewPCG(sc.Seed, 0x5eed)),
		fails: make(map[uint64]int64),

		windowFails: make(map[windowFail]int64),
	}
	s.nF = s.nK * s.nT * s.nP
	if s.nF >= 1<<flowBits {
		return nil, fmt.Errorf("sim: %d pops x %d tenants x %d priorities is more than %d flows", s.nK, s.nT, s.nP, 1<<flowBits-1)
	}
	nO := 0
	for _, g := range sc.Origins {
		nO += g.Count
	}
	if nO*s.nF > 50_000_000 {
		return nil, fmt.Errorf("sim: %d origins x %d flows is more than 50,000,000 connection counters", nO, s.nF)
	}
	perPoP := (sc.Geography.HostsPerPoP + sc.Geography.HostsPerResolver - 1) / sc.Geography.HostsPerResolver
	if sc.DNS.Policy == "shuffle" && s.nK*perPoP*s.nT > 10_000_000 {
		return nil, fmt.Errorf("sim: %d resolvers x %d tenants is more than 10,000,000 cached answers", s.nK*perPoP, s.nT)
	}
	for _, p := range sc.Population.Priorities {
		s.prioNames = append(s.prioNames, p.Name)
	}
	if err := s.buildOrigins(); err != nil {
		return nil, err
	}
	dns, hv, err := newDNS(sc, s.origins, rand.NewPCG(sc.Seed, 0xd45), s.steps)
	if err != nil {
		return nil, err
	}
	s.dns, s.health = dns, hv
	s.feedback = newFeedback(sc, len(s.origins))
	s.checkAt = max(1, stepsOf(sc.DNS.HealthCheck.Interval, s.dt))
	s.popLoad = make([][]float64, s.nK)
	for k := range s.popLoad {
		s.popLoad[k] = make([]float64, len(s.origins))
	}

	retryMax := sc.Overload.RetryAfter
	if sc.Overload.Mode == "adaptive" {
		retryMax = maxHint(sc.Overload.RetryAfter)
	}
	s.spread = newSpreader(policy, sc.Sim.Quantiles, s.dt, retryMax)
	s.wheel = newWheel(s.spread.maxOffset + 2)
	s.pendSize = stepsOf(sc.Client.ConnectTimeout, s.dt) + 3
	s.pend = make([][]pending, s.pendSize)
	s.populate()
	s.schedule()
	return s, nil
}

// maxHint is the latest end of a retry window adaptive admission may
// send, given the scenario's base hint: newAdaptive caps the shedder's
// range at half of it (Retry.Max), and a range is at least as wide as
// its start (Spread 1), so it ends by twice that.
func maxHint(base time.Duration) time.Duration { return 12 * base }

func (s *Sim) buildOrigins() error {
	sc := s.sc
	s.spc = float64(sc.Edge.StreamsPerConnection)
	for _, g := range sc.Origins {
		maxConn := g.MaxConnections
		if g.Headroom > 0 {
			maxConn = int64(math.Ceil(g.Headroom * float64(sc.Population.Devices) / float64(g.Count)))
		}
		maxConn = scaleCount(maxConn, sc.Scale)
		for i := range g.Count {
			o := &origin{
				name:      fmt.Sprintf("%s-%d", g.Name, i+1),
				region:    g.Region,
				weight:    g.Weight,
				secondary: g.Secondary,
				maxConn:   max(1, maxConn),
				hsSec:     g.MaxNewPerSecond * sc.Scale,
				stSec:     g.MaxNewStreamsPerSecond * sc.Scale,
				backlog:   float64(scaleCount(g.Backlog, sc.Scale)),
				hl:        g.HandshakeLatency,
				maxReq:    g.MaxRequestsPerSecond * sc.Scale * s.dts,
				tdSec:     g.TeardownPerSecond * sc.Scale,
				up:        true,
				connPrio:  make([]int64, s.nP),
				fresh:     make([]int64, s.nP),
			}
			if sc.Overload.Mode == "adaptive" {
				// Admission is sized by the rate of the steady mix: over
				// pooled connections a stream costs a set-up and a share
				// 1/streams_per_connection of a handshake.
				o.setRate(1/s.spc, s.dts)
				adm, err := newAdaptive(sc, o, len(s.origins), runClock{s})
				if err != nil {
					return err
				}
				o.adm = adm
			}
			o.setRate(1, s.dts)
			s.origins = append(s.origins, o)
		}
	}
	s.conn = make([][]int64, len(s.origins))
	for i := range s.conn {
		s.conn[i] = make([]int64, s.nF)
	}
	s.connTenant = make([]int64, s.nT)
	return nil
}

func scaleCount(n int64, scale float64) int64 {
	if scale == 1 {
		return n
	}
	return int64(math.Round(float64(n) * scale))
}

// flow index helpers: flow = (pop*T + tenant)*P + prio.
func (s *Sim) prioOf(f int) int   { return f % s.nP }
func (s *Sim) tenantOf(f int) int { return f / s.nP % s.nT }
func (s *Sim) popOf(f int) int    { return f / (s.nP * s.nT) }

// flowWeights returns the share of devices in each flow.
func (s *Sim) flowWeights() []float64 {
	pops := popShares(s.sc.Geography)
	w := make([]float64, s.nF)
	for f := range w {
		w[f] = pops[s.popOf(f)] / float64(s.nT) * s.sc.Population.Priorities[s.prioOf(f)].Share
	}
	return w
}

// populate places the devices: initial connections as a balanced steady
// state, arrival waves and the rest offline.
func (s *Sim) populate() {
	sc := s.sc
	w := s.flowWeights()
	s.total = scaleCount(sc.Population.Devices, sc.Scale)
	initial := scaleCount(sc.Population.Initial, sc.Scale)
	s.offline = make([]int64, s.nF)
	s.offPrio = make([]int64, s.nP)
	s.split = make([]int64, max(s.nF, len(s.origins)))
	s.reqDemand = make([]float64, s.nP)
	rest := s.total - initial
	for _, a := range sc.Traffic.Arrivals {
		n := scaleCount(a.Devices, sc.Scale)
		wave := make([]int64, s.nF)
		splitInto(wave, n, w, 0.5)
		s.waves = append(s.waves, wave)
		s.waveDone = append(s.waveDone, make([]int64, s.nF))
		for f, m := range wave {
			s.offline[f] += m
		}
		rest -= n
	}
	if rest < 0 { // rounding of a scaled file: take it from the initial
		initial += rest
		rest = 0
	}
	tmp := make([]int64, s.nF)
	splitInto(tmp, rest, w, 0.5)
	for f, m := range tmp {
		s.offline[f] += m
	}
	for f, m := range s.offline {
		s.offPrio[s.prioOf(f)] += m
	}
	splitInto(tmp, initial, w, 0.5)
	for f, m := range tmp {
		if m == 0 {
			continue
		}
		ids, shares := s.steadyRoute(s.tenantOf(f))
		out := s.split[:len(ids)]
		splitInto(out, m, shares, 0.5)
		for i, o := range ids {
			s.addConn(o, f, out[i])
		}
	}
	s.p0 = s.offPrio[0]
	for _, o := range s.origins {
		s.p0 += o.connPrio[0]
		o.pool = math.Ceil(float64(o.conns) / s.spc)
	}
}

// steadyRoute is where a tenant's long-lived connections sit after many
// TTLs: evenly over its hand under shuffle sharding, otherwise over the
// primary origins in proportion to their weights.
func (s *Sim) steadyRoute(tenant int) ([]int, []float64) {
	var ids []int
	var shares []float64
	if h := s.dns.hand(tenant); h != nil {
		for _, o := range h {
			ids = append(ids, o)
			shares = append(shares, 1/float64(len(h)))
		}
		return ids, shares
	}
	sum := 0.0
	for i, o := range s.origins {
		if !o.secondary && o.weight > 0 {
			ids = append(ids, i)
			shares = append(shares, float64(o.weight))
			sum += float64(o.weight)
		}
	}
	if len(ids) == 0 {
		for i := range s.origins {
			ids = append(ids, i)
			shares = append(shares, 1)
			sum++
		}
	}
	for i := range shares {
		shares[i] /= sum
	}
	return ids, shares
}

// schedule turns the scenario's events into steps.
func (s *Sim) schedule() {
	for _, d := range s.sc.Traffic.Disconnects {
		s.drops = append(s.drops, dropEvent{start: stepsOf(d.At, s.dt), steps: max(1, stepsOf(d.Over, s.dt)), share: d.Share, region: d.Region})
	}
	s.poison = make([]int, s.nT)
	for i := range s.poison {
		s.poison[i] = -1
	}
	for _, p := range s.sc.Traffic.Poison {
		at := stepsOf(p.At, s.dt)
		if s.poison[p.Tenant] < 0 || at < s.poison[p.Tenant] {
			s.poison[p.Tenant] = at
		}
	}
	if len(s.sc.Traffic.Poison) > 0 {
		s.tenants = newTenantTrack(s.nT, s.poison)
	}
}

func (s *Sim) addConn(o, f int, n int64) {
	if n == 0 {
		return
	}
	s.conn[o][f] += n
	s.popLoad[s.popOf(f)][o] += float64(n)
	or := s.origins[o]
	if n < 0 && or.up && or.tdSec > 0 {
		// The origin tears the sessions down in its handshake queue,
		// ahead of the attempts that come after.
		or.work += float64(-n) * or.muSec / or.tdSec
	}
	or.conns += n
	or.connPrio[s.prioOf(f)] += n
	s.connTenant[s.tenantOf(f)] += n
}

// fail records n devices of cohort c that failed (or lost their
// connection) at this step; they draw their next delay at the end of it,
// by hint as corral's clients read one (backoff.HintWithin): none when
// its After is 0 or less; a window when Within is above 0, kept to the
// nanosecond; else a point, rounded to steps.
func (s *Sim) fail(c cohort, n int64, hint limit.Retry) {
	if n <= 0 {
		return
	}
	k := key{c.flow, c.attempt, c.prev}
	switch {
	case hint.After > 0 && hint.Within > 0:
		s.windowFails[windowFail{key: k.pack(), retry: hint}] += n
	case hint.After > 0:
		fk := failKey{key: k, hint: int32(min(maxSteps, max(1, stepsOf(hint.After, s.dt))))}
		s.fails[fk.pack()] += n
	default:
		s.fails[failKey{key: k}.pack()] += n
	}
	if s.tenants != nil {
		s.tenants.failed(s.tenantOf(int(c.flow)), s.now)
	}
}

// failHinted splits n devices of c evenly over hints and fails each part
// with its hint; with no hints it is fail without a hint.
func (s *Sim) failHinted(c cohort, n int64, hints []limit.Retry) {
	if len(hints) == 0 {
		s.fail(c, n, limit.Retry{})
		return
	}
	var done int64
	for i, h := range hints {
		hi := n * int64(i+1) / int64(len(hints))
		s.fail(c, hi-done, h)
		done = hi
	}
}

// Steps returns the number of steps of the run.
func (s *Sim) Steps() int { return s.steps }

// Done reports whether every step has run.
func (s *Sim) Done() bool { return s.now >= s.steps }

// Run steps to the end, calling progress (when not nil) after each step,
// and returns the result.
func (s *Sim) Run(progress func(done, total int)) *Result {
	for !s.Done() {
		s.Step()
		if progress != nil {
			progress(s.now, s.steps)
		}
	}
	return s.Result()
}
