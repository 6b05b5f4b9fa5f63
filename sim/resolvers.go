package sim

import (
	"fmt"
	"time"

	"github.com/corralhq/corral/authdns/answer"
	"github.com/corralhq/corral/scenario"
)

// resolverClasses is authdns's resolver-aware answers in a run
// (dns.resolvers): it counts the queries each modelled resolver sends
// (one when a cached answer expires) as authdns's resolver tables count
// them, in windows of dns.resolvers.window, and every window/8 classes
// each resolver by its share of the queries of the sliding window
// (answer.WindowAt, answer.WindowQueries and answer.ClassConfig.Of, the
// code authdns's step runs). A query is answered by the class of the
// last step, as a query at authdns reads the set of big resolvers the
// last step published. The counts are exact: a resolver is one modelled
// resolver (its own /24), and authdns's table neither loses nor
// undercounts a resolver with a big share.
type resolverClasses struct {
	rule   answer.ClassConfig
	window time.Duration
	dt     time.Duration
	// since is how long authdns had counted at step 0: whole windows, so
	// that the windows start at the event's time 0, and enough of them
	// that the answers the resolvers hold at the start were classed on
	// a full window of queries.
	since time.Duration

	tick  int64  // index of the last classing step, -1 before the first
	epoch uint64 // window of the last classing step, whose counts cur holds
	// prev and cur count each resolver's queries in the previous and the
	// current window, prevTotal and curTotal every resolver's.
	prev, cur           []uint64
	prevTotal, curTotal uint64
	class               []answer.Class // by resolver, decided at the last step
	big                 int            // resolvers classed big at the last step

	// What the run's summary reports, from step 0 on.
	counting bool
	sum      ResolverSummary
}

// maxWarmQueries bounds the steps and the queries replayed before the
// run (cached answers x their queries over the windows before it).
const maxWarmQueries = 50_000_000

// newResolverClasses returns the resolver classes of sc's dns.resolvers
// for n resolvers whose answers live ttlSteps, or nil when resolver-aware answers are off (the run is
// then the run without them, draw for draw).
func newResolverClasses(sc *scenario.Scenario, n, ttlSteps int) *resolverClasses {
	r := sc.DNS.Resolvers
	if !r.Enabled {
		return nil
	}
	ttl := time.Duration(ttlSteps) * sc.Step
	windows := (ttl+r.Window-1)/r.Window + 2
	rc := &resolverClasses{
		rule:   answer.ClassConfig{BigShare: r.BigShare}.WithDefaults(),
		window: r.Window,
		dt:     sc.Step,
		since:  time.Duration(windows) * r.Window,
		tick:   -1,
		prev:   make([]uint64, n),
		cur:    make([]uint64, n),
		class:  make([]answer.Class, n),
	}
	rc.sum.Resolvers = n
	rc.sum.PeakBigAt = -1
	return rc
}

// firstStep is the first step (negative: before the event) at which
// authdns counts.
func (rc *resolverClasses) firstStep() int { return -int(rc.since / rc.dt) }

// advance moves the classes to step t: when a classing step of authdns
// (one every window/8) falls at or before t since the last one, the
// sliding window moves to t and every resolver is classed again.
func (rc *resolverClasses) advance(t int) {
	elapsed := rc.since + time.Duration(t)*rc.dt
	k := int64(elapsed / (rc.window / answer.WindowPhases))
	if k == rc.tick {
		return
	}
	rc.tick = k
	epoch, phase := answer.WindowAt(elapsed, rc.window)
	switch {
	case epoch == rc.epoch+1:
		copy(rc.prev, rc.cur)
		clear(rc.cur)
		rc.prevTotal, rc.curTotal = rc.curTotal, 0
	case epoch != rc.epoch:
		clear(rc.prev)
		clear(rc.cur)
		rc.prevTotal, rc.curTotal = 0, 0
	}
	rc.epoch = epoch
	total := float64(answer.WindowQueries(rc.prevTotal, rc.curTotal, phase))
	rc.big = 0
	for i := range rc.class {
		rc.class[i] = rc.rule.Of(float64(answer.WindowQueries(rc.prev[i], rc.cur[i], phase)), total)
		if rc.class[i] == answer.ClassBig {
			rc.big++
		}
	}
	if rc.counting && rc.big > rc.sum.PeakBig {
		rc.sum.PeakBig, rc.sum.PeakBigAt = rc.big, float64(t)*rc.dt.Seconds()
	}
}

// query counts one query of resolver i and returns its class by its
// share of the queries.
func (rc *resolverClasses) query(i int) answer.Class {
	rc.cur[i]++
	rc.curTotal++
	return rc.class[i]
}

// answered counts a query answered as class c (by its query share or its
// audience) with n records.
func (rc *resolverClasses) answered(c answer.Class, n int) {
	if rc.counting {
		rc.sum.Queries[c]++
		rc.sum.Records[c] += int64(n)
	}
}

// bigNow returns the resolvers classed big, by their query share or
// their audience, at the last classing step of each (0 when
// resolver-aware answers are off).
func (d *dnsModel) bigNow() int {
	switch {
	case d.classes == nil:
		return 0
	case d.audience == nil:
		return d.classes.big
	}
	n := 0
	for i, c := range d.classes.class {
		if max(c, d.audience.of(i)) == answer.ClassBig {
			n++
		}
	}
	return n
}

// summary returns what the run counted, nil when resolver-aware answers
// are off.
func (rc *resolverClasses) summary() *ResolverSummary {
	if rc == nil {
		return nil
	}
	s := rc.sum
	return &s
}

// warm replays the queries the resolvers sent before the run, as
// authdns counted them: the answer of resolver i for tenant t that
// expires at step e was taken at e - ttl, and the one before at e -
// 2 ttl, and so on back to the first step authdns counts. It returns,
// by resolver and tenant, the class the answer held at the start was
// given (at e - ttl).
func (rc *resolverClasses) warm(resolvers []resolver, ttl int) ([][]answer.Class, error) {
	first := rc.firstStep()
	answers := 0
	for _, r := range resolvers {
		answers += len(r.expiry)
	}
	if q := int64(answers) * int64(-first/ttl+1); q > maxWarmQueries || -first > maxWarmQueries {
		return nil, fmt.Errorf("sim: dns.resolvers: %d steps and %d queries before the run to replay (the TTL and two windows), more than %d: shorten dns.resolvers.window or lengthen the step", -first, q, maxWarmQueries)
	}
	// byPhase lists the answers by their expiry's step modulo the TTL.
	type ref struct{ r, t int }
	byPhase := make([][]ref, ttl)
	held := make([][]answer.Class, len(resolvers))
	for i, r := range resolvers {
		held[i] = make([]answer.Class, len(r.expiry))
		for t, e := range r.expiry {
			p := e % ttl
			byPhase[p] = append(byPhase[p], ref{i, t})
		}
	}
	for s := first; s < 0; s++ {
		rc.advance(s)
		for _, a := range byPhase[(s%ttl+ttl)%ttl] {
			c := rc.query(a.r)
			if s >= -ttl {
				held[a.r][a.t] = c
			}
		}
	}
	return held, nil
}
