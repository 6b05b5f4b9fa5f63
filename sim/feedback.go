package sim

import (
	"math"
	"time"

	"github.com/corralhq/corral/authdns/answer"
	"github.com/corralhq/corral/scenario"
)

// loadFeedback is authdns's load feedback in a run (dns.feedback): every
// interval each origin's load becomes the answer.Load its report would
// carry, its factor moves one step by answer.FeedbackConfig.Next, and the
// DNS set draws by the effective weights (Set.ApplyFeedback), as
// authdns/feedback.go does with the reports it receives over NATS. The
// resolvers keep their cached answers for the TTL the answers carry
// (answerTTL: dns.ttl capped at dns.feedback.max_ttl, as authdns serves
// them): new weights reach an edge host when its resolver next asks.
type loadFeedback struct {
	cfg     answer.FeedbackConfig
	every   int           // steps between ticks
	loads   []answer.Load // the last report of each origin
	factors []float64     // by origin
	weights []uint32      // scratch of ApplyFeedback
}

// newFeedback returns the feedback of sc's dns.feedback, or nil when it
// is off (the run then never calls Set.SetWeights: it is the run without
// feedback, draw for draw).
func newFeedback(sc *scenario.Scenario, origins int) *loadFeedback {
	f := sc.DNS.Feedback
	if !f.Enabled {
		return nil
	}
	fb := &loadFeedback{
		cfg:     feedbackConfig(f),
		every:   max(1, stepsOf(f.Interval, sc.Step)),
		loads:   make([]answer.Load, origins),
		factors: make([]float64, origins),
	}
	for i := range fb.factors {
		fb.factors[i] = 1 // an origin just added weighs as configured
	}
	return fb
}

// feedbackConfig is authdns's feedback bounds of dns.feedback f.
func feedbackConfig(f scenario.Feedback) answer.FeedbackConfig {
	return answer.FeedbackConfig{Floor: f.Floor, Ceiling: f.Ceiling, MaxStep: f.MaxStep, Hysteresis: f.Hysteresis, Timeout: f.Timeout, MaxTTL: f.MaxTTL}
}

// answerTTL is how long the resolvers cache an answer of policy p in sc:
// dns.ttl, capped by answer.FeedbackConfig.AnswerTTL (dns.feedback.max_ttl)
// when feedback is on and weights p, as authdns writes it into the
// answers it serves. Without feedback it is dns.ttl: the run is the run
// without feedback, draw for draw.
func answerTTL(sc *scenario.Scenario, p *answer.Policy) time.Duration {
	if !sc.DNS.Feedback.Enabled {
		return sc.DNS.TTL
	}
	return feedbackConfig(sc.DNS.Feedback).AnswerTTL(p, sc.DNS.TTL)
}

// report is the load origin o reports at now, read from the state the
// previous step left (as a report published up to an interval before the
// tick): its connections against its max_connections (the capacity a hub
// or an edge reports from its load.capacity), the handshakes in flight
// against the limit of its adaptive admission and its shedding stage.
// Without admission control (errors mode) an origin has no limiter and
// reports limit 0 and stage 0, as a hub or an edge without one does: only
// its share of the capacity in use presses it.
func report(o *origin, now time.Time) answer.Load {
	div := max(1, (o.maxConn+math.MaxInt32-1)/math.MaxInt32) // sessions and capacity fit an int32 alike, their share kept
	l := answer.Load{At: now, Sessions: int(min(o.conns/div, math.MaxInt32)), Capacity: int(o.maxConn / div),
		Inflight: int(min(o.work, math.MaxInt32))}
	if o.adm != nil {
		l.Limit, l.Stage = o.adm.limit(), o.adm.stage()
	}
	return l
}

// feedbackTick runs the feedback due at step t, before the resolvers whose answers
// expire at t ask again. An origin that is down reports nothing: its last
// report ages until Timeout gives it its configured weight back.
func (s *Sim) feedbackTick(t int) {
	fb := s.feedback
	if fb == nil || t%fb.every != 0 {
		return
	}
	now := s.epoch.Add(time.Duration(t) * s.dt)
	for i, o := range s.origins {
		if o.up {
			fb.loads[i] = report(o, now)
		}
		fb.factors[i] = fb.cfg.Next(fb.factors[i], fb.loads[i], now)
	}
	fb.weights = s.dns.set.ApplyFeedback(fb.weights, fb.factors)
	s.dns.audience.tick(s.dns, s.origins, t, fb.every, s.dt)
}

// factor returns origin i's factor of its DNS weight (0 when feedback is
// off), for OriginStep.
func (fb *loadFeedback) factor(i int) float64 {
	if fb == nil {
		return 0
	}
	return fb.factors[i]
}
