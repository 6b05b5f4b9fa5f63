package answer

import (
	"errors"
	"fmt"
	"math"
	"time"
)

// Load is one origin's load as it last reported it: the data that load
// feedback turns into weights. The zero value is an origin never heard
// from.
type Load struct {
	// At is when the report arrived; zero means no report.
	At time.Time
	// Sessions is the sessions the origin holds, and Capacity the most it
	// is sized for; a Capacity of 0 means unknown (Sessions then only
	// informs).
	Sessions, Capacity int
	// Inflight and Limit are the work in flight and the adaptive limit of
	// the origin's limiter (an edge's handshakes, a hub's publishes); a
	// Limit of 0 means no limiter.
	Inflight, Limit int
	// Stage is the origin's shedding stage, 0 (normal) to MaxStage
	// (lifeboat, package limit's stages).
	Stage int
}

// MaxStage is the highest shedding stage (limit.StageLifeboat).
const MaxStage = 5

// Pressure returns the load as one number in [0, 1]: the largest of the
// share of the session capacity in use (Sessions/Capacity), the
// limiter's use (Inflight/Limit) and the shedding stage, where any stage
// above normal counts at least 0.75 (an origin that sheds is near its
// limit) and lifeboat counts 1. A full origin (sessions at capacity)
// counts 1 however empty its set-up queue: the sessions it holds are the
// load, not only the ones it sets up.
func (l Load) Pressure() float64 {
	p := 0.0
	if l.Capacity > 0 {
		p = float64(max(l.Sessions, 0)) / float64(l.Capacity)
	}
	if l.Limit > 0 {
		p = max(p, float64(max(l.Inflight, 0))/float64(l.Limit))
	}
	if l.Stage > 0 {
		p = max(p, 0.75+0.25*float64(min(l.Stage, MaxStage)-1)/float64(MaxStage-1))
	}
	return min(max(p, 0), 1)
}

// FeedbackConfig bounds how load feedback moves a record's effective
// weight, as a factor of its configured weight. The zero value takes the
// defaults (DefaultFeedback); Validate reports a bad one.
type FeedbackConfig struct {
	// Floor is the least factor, so that no healthy origin drops to zero
	// (default 0.1; above 0, at most 1).
	Floor float64
	// Ceiling is the largest factor, reached by an idle origin (default
	// 2; at least 1).
	Ceiling float64
	// MaxStep is the most the factor moves in one interval (default 0.25).
	MaxStep float64
	// Hysteresis: a target factor closer than this to the current one is
	// not followed, so that weights do not flap on noise (default 0.05; 0
	// up to MaxStep).
	Hysteresis float64
	// Timeout is how old an origin's last report may be; an origin silent
	// longer (or never heard from) gets its configured weight back, at
	// once (default 5 s).
	Timeout time.Duration
	// MaxTTL is the longest TTL of an answer from a set that feedback
	// weights (AnswerTTL): a weight reaches a resolver only when its
	// cached answer expires, so a load-aware answer is only as fresh as
	// its TTL (default DefaultFeedbackMaxTTL; above 0; a cap at or above
	// a set's TTL leaves it as it is).
	MaxTTL time.Duration
}

// DefaultFeedbackMaxTTL is the default MaxTTL, 30 s: the shortest TTL
// that the managed DNS services which steer answers by live load or
// health serve or recommend, and the shortest most resolvers honour.
// NS1 advises records under its Filter Chain (whose Shed Load filter
// steers by reported load) to keep the TTL as short as possible and
// notes that most recursive resolvers do not honour one under 30 s
// (ns1.com/articles/ttl-best-practices); Cloudflare's DNS-only load
// balancers take a TTL whose documented example is 30 s, and its
// DNS-only records go down to 30 s, on Enterprise plans
// (developers.cloudflare.com/dns/manage-dns-records/reference/ttl);
// Route 53 recommends 60 s or less for a record with a health check
// (docs.aws.amazon.com/Route53/latest/DeveloperGuide/
// resource-record-sets-values-weighted.html). Akamai GTM gives its
// load-balanced answers a TTL of their own, dynamicTTL, separate from
// its static records' (300 s by default in Akamai's Terraform
// provider), without a recommendation found.
const DefaultFeedbackMaxTTL = 30 * time.Second

// DefaultFeedback is the configuration the zero FeedbackConfig stands for.
var DefaultFeedback = FeedbackConfig{Floor: 0.1, Ceiling: 2, MaxStep: 0.25, Hysteresis: 0.05, Timeout: 5 * time.Second, MaxTTL: DefaultFeedbackMaxTTL}

// WithDefaults returns c with its zero fields set to DefaultFeedback's.
func (c FeedbackConfig) WithDefaults() FeedbackConfig {
	d := DefaultFeedback
	if c.Floor == 0 {
		c.Floor = d.Floor
	}
	if c.Ceiling == 0 {
		c.Ceiling = d.Ceiling
	}
	if c.MaxStep == 0 {
		c.MaxStep = d.MaxStep
	}
	if c.Hysteresis == 0 {
		c.Hysteresis = d.Hysteresis
	}
	if c.Timeout == 0 {
		c.Timeout = d.Timeout
	}
	if c.MaxTTL == 0 {
		c.MaxTTL = d.MaxTTL
	}
	return c
}

// Validate reports what is wrong with c after defaults.
func (c FeedbackConfig) Validate() error {
	c = c.WithDefaults()
	bad := func(f string, v any, want string) error {
		return fmt.Errorf("answer: feedback %s %v: %s", f, v, want)
	}
	var errs []error
	if !(c.Floor > 0 && c.Floor <= 1) {
		errs = append(errs, bad("floor", c.Floor, "need 0 < floor <= 1"))
	}
	if !(c.Ceiling >= 1) || math.IsInf(c.Ceiling, 0) {
		errs = append(errs, bad("ceiling", c.Ceiling, "need ceiling >= 1"))
	}
	if !(c.MaxStep > 0) || math.IsInf(c.MaxStep, 0) {
		errs = append(errs, bad("max_step", c.MaxStep, "need max_step > 0"))
	}
	if !(c.Hysteresis >= 0 && c.Hysteresis <= c.MaxStep) {
		errs = append(errs, bad("hysteresis", c.Hysteresis, "need 0 <= hysteresis <= max_step"))
	}
	if c.Timeout < 0 {
		errs = append(errs, bad("timeout", c.Timeout, "need timeout >= 0"))
	}
	if c.MaxTTL < 0 {
		errs = append(errs, bad("max_ttl", c.MaxTTL, "need max_ttl > 0"))
	}
	return errors.Join(errs...)
}

// AnswerTTL returns the TTL of the answers of a set of policy p whose
// records have TTL ttl while load feedback is on: at most MaxTTL for a
// policy feedback weights (p.Fed()), ttl as it is for the others and
// for a ttl already below the cap. The server writes it into the
// records it serves and the simulator's resolvers cache answers for it.
func (c FeedbackConfig) AnswerTTL(p *Policy, ttl time.Duration) time.Duration {
	if !p.Fed() {
		return ttl
	}
	return min(ttl, c.WithDefaults().MaxTTL)
}

// Target returns the factor load l asks for, ignoring the bounds on
// change: Ceiling at pressure 0, 1 at pressure 0.5, Floor at pressure 1,
// linear in between. c must have its defaults.
func (c FeedbackConfig) Target(l Load) float64 {
	p := l.Pressure()
	if p <= 0.5 {
		return c.Ceiling - (c.Ceiling-1)*p/0.5
	}
	return 1 - (1-c.Floor)*(p-0.5)/0.5
}

// Next returns an origin's factor for the interval that starts at now,
// from its factor in the previous interval (prev; 1 for an origin just
// added) and its last report l: the factor moves toward Target(l) by at
// most MaxStep, not at all when the target is within Hysteresis, and it
// stays within [Floor, Ceiling]. A report older than Timeout, or none,
// gives 1 (the configured weight) at once. Next is pure: the simulator and
// the server run the same steps.
func (c FeedbackConfig) Next(prev float64, l Load, now time.Time) float64 {
	c = c.WithDefaults()
	if l.At.IsZero() || now.Sub(l.At) > c.Timeout || math.IsNaN(prev) {
		return 1
	}
	prev = min(max(prev, c.Floor), c.Ceiling)
	d := c.Target(l) - prev
	if math.Abs(d) < c.Hysteresis {
		return prev
	}
	d = min(max(d, -c.MaxStep), c.MaxStep)
	return min(max(prev+d, c.Floor), c.Ceiling)
}

// WeightScale is the resolution of effective weights: a configured weight
// w with factor f weighs round(w * f * WeightScale), so a factor of 0.1
// on a weight of 1 does not round to 0.
const WeightScale = 1000

// EffectiveWeights appends to dst[:0] the effective weight of each record
// of configured weight w[i] and factor f[i] (1 when f is shorter): 0 for
// a weight of 0 (a standby stays one), else round(w*f*WeightScale), at
// least 1. The weights are in units of 1/WeightScale of a configured
// weight; pass them to Set.SetWeights.
func EffectiveWeights(dst []uint32, w []uint32, f []float64) []uint32 {
	dst = dst[:0]
	for i, wi := range w {
		fi := 1.0
		if i < len(f) && !math.IsNaN(f[i]) {
			fi = max(f[i], 0)
		}
		e := uint32(0)
		if wi > 0 {
			e = uint32(min(max(math.Round(float64(wi)*fi*WeightScale), 1), math.MaxUint32))
		}
		dst = append(dst, e)
	}
	return dst
}
