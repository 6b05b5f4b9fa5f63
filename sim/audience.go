package sim

import (
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/corralhq/corral/authdns/answer"
	"github.com/corralhq/corral/scenario"
)

// audienceClasses is authdns's audience learning in a run
// (dns.resolvers.audience): every feedback interval the sessions each
// origin opened and the answer each resolver caches go to
// answer.AudienceConfig.Learn, and a resolver whose estimate is above
// dns.resolvers.big_share of the opened sessions is classed big (by
// answer.ClassConfig.Of on answer.Audience, as authdns/audience.go
// classes the resolvers it tracks). A query is answered big when either
// its query share or its audience says so. Before the run it replays the
// steady state authdns learned from: the Initial devices renewing their
// sessions every population.session_age, through answers drawn every TTL
// with the classes learned so far.
type audienceClasses struct {
	cfg     answer.AudienceConfig
	rule    answer.ClassConfig
	aud     answer.Audience
	answers [][]int // by resolver, its cached answer (the first tenant's)
	opened  []float64
	last    []int64 // by origin, its opened sessions at the last tick
	class   []answer.Class
	big     int

	// What the run's summary reports, from step 0 on.
	counting bool
	peak     int
	peakAt   float64
	startBig int // resolvers classed big by audience at step 0
}

// newAudience returns the audience learning of sc for n resolvers and
// origins origins, nil when dns.resolvers.audience is off or the run has
// no load feedback (authdns learns from the load reports: without them
// it knows no audience, and the run is the run without the feature).
func newAudience(sc *scenario.Scenario, n, origins int) *audienceClasses {
	r := sc.DNS.Resolvers
	if !r.Enabled || !r.Audience || !sc.DNS.Feedback.Enabled {
		return nil
	}
	return &audienceClasses{
		cfg:     answer.AudienceConfig{HalfLife: r.HalfLife}.WithDefaults(),
		rule:    answer.ClassConfig{BigShare: r.BigShare}.WithDefaults(),
		answers: make([][]int, n),
		opened:  make([]float64, origins),
		last:    make([]int64, origins),
		class:   make([]answer.Class, n),
	}
}

// of returns resolver i's class by its audience.
func (ac *audienceClasses) of(i int) answer.Class {
	if ac == nil {
		return answer.ClassSmall
	}
	return ac.class[i]
}

// learn takes one interval of dt: opened is each origin's sessions a
// second over it, the answers those the resolvers held. It classes every
// resolver again.
func (ac *audienceClasses) learn(opened []float64, dt time.Duration, t int, step time.Duration) {
	ac.cfg.Learn(&ac.aud, ac.answers, opened, dt)
	ac.big = 0
	for i := range ac.class {
		ac.class[i] = ac.aud.Of(ac.rule, i)
		if ac.class[i] == answer.ClassBig {
			ac.big++
		}
	}
	if ac.counting && ac.big > ac.peak {
		ac.peak, ac.peakAt = ac.big, float64(t)*step.Seconds()
	}
}

// tick learns from the interval that ends at step t: the sessions each
// origin opened since the last tick, over every steps of dt.
func (ac *audienceClasses) tick(d *dnsModel, origins []*origin, t, every int, dt time.Duration) {
	if ac == nil {
		return
	}
	secs := (time.Duration(every) * dt).Seconds()
	for i, o := range origins {
		ac.opened[i] = float64(o.opened-ac.last[i]) / secs
		ac.last[i] = o.opened
	}
	for i := range d.resolvers {
		ac.answers[i] = d.resolvers[i].answers[0]
	}
	ac.learn(ac.opened, time.Duration(every)*dt, t, dt)
}

// audienceReplay is how much of the steady state before the run warm
// replays: a day. authdns learns while it runs, and an authdns that ran
// a day before the event had learned that long; the estimates take hours
// to settle. In cdn-resolvers (seed 3) the two resolvers that speak for
// 16.9 % of the audience each were estimated at 1.5 and 1.3 % after ten
// minutes, 4.8 and 4.5 % after an hour, 16.8 and 17.0 % after six hours
// and 16.90 % after a day, and (seeds 1 to 5) 36 to 39, 43 to 48, 21 to
// 23 and 16 to 17 of the 120 resolvers were big at the start (16 speak
// for more than 1 %):
// the resolvers that shared a load balancer with a big one are taken for
// big until the draws of later TTLs part them.
const audienceReplay = 24 * time.Hour

// warm replays the steady state before the run: for audienceReplay (at
// least ten half-lives) before step 0 each resolver's hosts renew rate[i] sessions a second
// through its cached answer (an edge host picks among the answer's
// records at random: in the steady state every origin is alike), the
// answers drawn again at their expiries (each resolver at the phase of
// the answer it holds at the start) with the classes learned so far, and
// authdns learns every feedback interval. The draws are the replay's own
// (rng), so the run draws as it would without the replay; it returns,
// by resolver, the class the answer held at the start was given, at
// its expiry less a TTL.
func (ac *audienceClasses) warm(d *dnsModel, rate []float64, every int, dt time.Duration, rng *rand.PCG) ([]answer.Class, error) {
	held := make([]answer.Class, len(d.resolvers))
	ttl := d.ttlSteps
	steps := int(max(audienceReplay, 10*ac.cfg.HalfLife) / dt)
	steps = (steps + ttl - 1) / ttl * ttl // whole TTLs: the phases line up
	if w := int64(steps) * int64(len(d.resolvers)); w > maxWarmQueries {
		return nil, fmt.Errorf("sim: dns.resolvers.audience: %d steps of %d resolvers to replay before the run (a day, or ten half-lives), more than %d: lengthen the step", steps, len(d.resolvers), maxWarmQueries)
	}
	r := rand.New(rng)
	scratch := make([]int, 0, d.set.Len())
	draw := func(c answer.Class) []int {
		got, _ := d.set.Select(scratch, answer.Query{Class: c}, r)
		return append([]int(nil), got...)
	}
	for i := range d.resolvers {
		ac.answers[i] = draw(answer.ClassSmall)
	}
	interval := time.Duration(every) * dt
	for s := -steps; s < 0; s++ {
		for i := range d.resolvers {
			if (d.resolvers[i].expiry[0]-s)%ttl != 0 {
				continue
			}
			c := ac.class[i]
			switch {
			case s < -ttl:
				ac.answers[i] = draw(c)
			case c == answer.ClassSmall: // the answer the run starts with
				held[i] = c
				ac.answers[i] = d.resolvers[i].answers[0]
			default: // drawn again big for the run, after every other draw
				held[i] = c
				ac.answers[i] = draw(c)
			}
		}
		if (s+steps)%every == every-1 {
			clear(ac.opened)
			for i, a := range ac.answers {
				for _, o := range a {
					ac.opened[o] += rate[i] / float64(len(a))
				}
			}
			ac.learn(ac.opened, interval, s, dt)
		}
	}
	ac.startBig = ac.big
	return held, nil
}

// summary adds what the run learned to the resolver summary.
func (ac *audienceClasses) summary(s *ResolverSummary) {
	if ac == nil || s == nil {
		return
	}
	s.AudienceBigAtStart = ac.startBig
	s.PeakAudienceBig, s.PeakAudienceBigAt = ac.peak, ac.peakAt
}
