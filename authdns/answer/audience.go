package answer

import (
	"fmt"
	"math"
	"slices"
	"time"
)

// A resolver's query count does not tell how many clients it speaks for:
// a resolver with one cache asks once a TTL for a name, whether one
// laptop or thousands of a CDN's edge hosts stand behind it, and it is
// the second that herds a whole population onto the one address it
// caches. What does tell is where the sessions go. Every answer names
// the origins the resolver's clients will connect to until it expires,
// and the origins report the sessions they open (authdns reads them from
// the load reports' opened count, the simulator from its model).
//
// AudienceConfig.Learn solves for each resolver's rate of sessions (its
// audience) as a mixture seen through sums: every estimate is scaled by
// what its answer's origins opened over what all the estimates predict
// for them, smoothed over the intervals with a half-life. For answers of
// one record each interval is a step of expectation-maximisation for
// counts (the update of Richardson and Lucy). One interval cannot tell
// apart the resolvers whose answers name the same origins: it gives each
// of them the group's rate in the ratio of their estimates. Their answers
// are drawn again at each TTL, and over a few TTLs the draws part them.
//
// An answer that names every origin tells nothing of its resolver's
// share: its sessions spread like everybody's, and others' estimates can
// take them over. In TestAudienceKeepsBigAnswersBig, with a big resolver
// answered with every record, its estimate fell from 1,000 sessions a
// second to 41 and 24 of 100 resolvers of 1 a second were classed big
// when such answers were learned from by their origins' ratios; to 32,
// with 30 classed big, when they moved with the whole opened rate only
// (the small ones that shared its origin before it was found kept the
// group's rate, then got answers of every record in turn). So such an
// answer moves its estimate with the whole opened rate only (when
// nothing opens, every estimate and the total fall alike and the shares
// hold), and answers to big resolvers leave one record out
// (Config.BigLeaveOut): the left-out one changes at every TTL, and the
// draws keep parting them. A sample per interval of the difference
// between the origins an answer names and the others (an estimator of a
// randomised experiment) was tried too: in its first interval every
// small resolver sharing an origin with the big one took the big one's
// rate for its own.

// DefaultAudienceHalfLife is the half-life of the audience estimates
// when none is configured: the window of the query shares
// (DefaultClassWindow), so both measures of a resolver remember as long.
const DefaultAudienceHalfLife = DefaultClassWindow

// AudienceConfig learns each resolver's audience, in sessions a second,
// from the sessions the origins open. The zero value takes the defaults.
// The server runs it on the origins' load reports and the answers it gave
// (authdns/audience.go), the simulator on its modelled origins and
// resolvers: the same steps.
type AudienceConfig struct {
	// HalfLife is how long until the evidence of an interval weighs half
	// of what it weighed (default DefaultAudienceHalfLife).
	HalfLife time.Duration
}

// WithDefaults returns c with a zero HalfLife set to the default.
func (c AudienceConfig) WithDefaults() AudienceConfig {
	if c.HalfLife == 0 {
		c.HalfLife = DefaultAudienceHalfLife
	}
	return c
}

// Validate reports what is wrong with c after defaults.
func (c AudienceConfig) Validate() error {
	if c = c.WithDefaults(); c.HalfLife < 0 {
		return fmt.Errorf("answer: audience half-life %v: need a positive one", c.HalfLife)
	}
	return nil
}

// Audience is what AudienceConfig.Learn knows of a set of resolvers:
// each one's estimated sessions a second and the opened rate of every
// origin, averaged alike. The zero value knows nothing.
type Audience struct {
	// Est is by resolver (the caller's indices), in sessions a second.
	Est []float64
	// Total is the sessions a second every origin opened together.
	Total float64
	pred  []float64 // scratch of Learn, by origin
}

// Of returns the class of resolver i by rule: big when its estimate is
// above rule's share of Total.
func (a *Audience) Of(rule ClassConfig, i int) Class {
	if i < 0 || i >= len(a.Est) {
		return ClassSmall
	}
	return rule.Of(a.Est[i], a.Total)
}

// Learn moves the estimates of a by one interval of length dt: answers[i]
// is the records (origin indices) resolver i's cached answer named over
// the interval, empty for one that held none, and opened[o] the sessions
// a second origin o opened over it. a.Est grows to len(answers). A
// resolver without an answer keeps its estimate; one whose answer names
// every origin in play (those some answer names or that opened sessions)
// moves with the whole opened rate over the predicted one; a new one
// starts at the mean of the others holding answers (the opened rate over
// their count when none is known).
// Sessions of an origin no answer names are nobody's. Bad indices and
// rates (negative, not finite) count as nothing. Learn is pure and
// allocates nothing once a has grown to the resolvers and the origins.
func (c AudienceConfig) Learn(a *Audience, answers [][]int, opened []float64, dt time.Duration) {
	c = c.WithDefaults()
	if dt <= 0 {
		return
	}
	for len(a.Est) < len(answers) {
		a.Est = append(a.Est, 0)
	}
	if cap(a.pred) < len(opened) {
		a.pred = make([]float64, len(opened))
	}
	pred := a.pred[:len(opened)]
	rate := func(o int) float64 {
		if o < 0 || o >= len(opened) || !(opened[o] > 0) || math.IsInf(opened[o], 0) {
			return 0
		}
		return opened[o]
	}
	total := 0.0
	for o := range opened {
		total += rate(o)
	}
	keep := math.Exp2(-float64(dt) / float64(c.HalfLife))
	if a.Total > 0 {
		a.Total = keep*a.Total + (1-keep)*total
	} else {
		a.Total = total // the first interval, as a new estimate starts at its mean
	}
	// New resolvers start at the mean of the known ones.
	known, sum, holding := 0, 0.0, 0
	for i, ans := range answers {
		if len(ans) == 0 {
			continue
		}
		holding++
		if v := a.Est[i]; v > 0 && !math.IsInf(v, 0) {
			known++
			sum += v
		}
	}
	if holding == 0 {
		return
	}
	start := total / float64(holding)
	if known > 0 {
		start = sum / float64(known)
	}
	clear(pred)
	for i, ans := range answers {
		if len(ans) == 0 {
			continue
		}
		if v := a.Est[i]; !(v > 0) || math.IsInf(v, 0) {
			a.Est[i] = start
		}
		share := a.Est[i] / float64(len(ans))
		for _, o := range ans {
			if o >= 0 && o < len(pred) {
				pred[o] += share
			}
		}
	}
	play := 0 // origins some answer names or that opened sessions
	for o, p := range pred {
		if p > 0 || rate(o) > 0 {
			play++
		}
	}
	predicted := 0.0
	for _, p := range pred {
		predicted += p
	}
	if !(predicted > 0) {
		return // no answer names an origin of opened
	}
	level := total / predicted
	for i, ans := range answers {
		if len(ans) == 0 || a.Est[i] == 0 {
			continue
		}
		if covers(ans, pred, play) {
			a.Est[i] = keep*a.Est[i] + (1-keep)*a.Est[i]*level
			continue
		}
		ratio := 0.0
		for _, o := range ans {
			if o >= 0 && o < len(pred) && pred[o] > 0 {
				ratio += rate(o) / pred[o]
			}
		}
		ratio /= float64(len(ans))
		a.Est[i] = keep*a.Est[i] + (1-keep)*a.Est[i]*ratio
	}
}

// covers reports whether answer ans names every one of the play origins
// in play (those with pred above 0 or opened sessions; every origin an
// answer names has pred above 0).
func covers(ans []int, pred []float64, play int) bool {
	if len(ans) < play {
		return false
	}
	n := 0
	for j, o := range ans {
		if o >= 0 && o < len(pred) && pred[o] > 0 && !slices.Contains(ans[:j], o) {
			n++
		}
	}
	return n == play
}
