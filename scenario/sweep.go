package scenario

import (
	"fmt"
	"math"
	"strings"

	"github.com/corralhq/corral/authdns/answer"
)

// Sweep lists values to try for a few axes of a scenario. An empty axis
// keeps the scenario's own value. Variants runs every combination.
type Sweep struct {
	// Backoff lists reconnect policies (Client.Backoff.Policy); the other
	// backoff parameters stay as the file sets them, and a parameter the
	// swept policy does not accept is dropped.
	Backoff []string `yaml:"backoff"`
	// Overload lists overload modes (Overload.Mode).
	Overload []string `yaml:"overload"`
	// DNSPolicy lists DNS policies (DNS.Policy): the same fleet and event
	// routed by each.
	DNSPolicy []string `yaml:"dns_policy"`
	// DNSFeedback lists load feedback off and on (DNS.Feedback.Enabled),
	// with the bounds dns.feedback gives: the same run with and without.
	DNSFeedback []bool `yaml:"dns_feedback"`
	// DNSResolvers lists resolver-aware answers off and on
	// (DNS.Resolvers.Enabled), with the window and share dns.resolvers
	// gives.
	DNSResolvers []bool `yaml:"dns_resolvers"`
	// OriginCount lists counts for the first origin group. Each origin
	// keeps every figure the file gives it (max_connections, or the share
	// of headroom it has at the file's count, max_new_per_second,
	// max_new_streams_per_second, backlog, max_requests_per_second,
	// teardown_per_second): the variant has more or fewer origins of the
	// same kind, so the group's totals grow and shrink with the count.
	OriginCount []int `yaml:"origin_count"`
}

// Variant is one combination of a sweep.
type Variant struct {
	// Name says which values the variant takes ("backoff=full
	// overload=adaptive"), or is empty for a scenario without a sweep.
	Name string
	// Scenario is the scenario with the values applied and its Sweep
	// emptied.
	Scenario *Scenario
}

// Variants expands s into one validated Scenario per combination of its
// sweep, in the order the file lists the values (DNS policy outermost,
// then DNS feedback, resolver-aware answers, backoff, overload, origin
// count).
func (s *Scenario) Variants() ([]Variant, error) {
	backoffs := orNil(s.Sweep.Backoff)
	modes := orNil(s.Sweep.Overload)
	var counts []*int
	for i := range s.Sweep.OriginCount {
		counts = append(counts, &s.Sweep.OriginCount[i])
	}
	if len(counts) == 0 {
		counts = []*int{nil}
	}
	policies := orNil(s.Sweep.DNSPolicy)
	var feedbacks []*bool
	for i := range s.Sweep.DNSFeedback {
		feedbacks = append(feedbacks, &s.Sweep.DNSFeedback[i])
	}
	if len(feedbacks) == 0 {
		feedbacks = []*bool{nil}
	}
	var resolvers []*bool
	for i := range s.Sweep.DNSResolvers {
		resolvers = append(resolvers, &s.Sweep.DNSResolvers[i])
	}
	if len(resolvers) == 0 {
		resolvers = []*bool{nil}
	}
	var out []Variant
	for _, pol := range policies {
		for _, fb := range feedbacks {
			for _, rs := range resolvers {
				for _, b := range backoffs {
					for _, m := range modes {
						for _, c := range counts {
							v, name := s.variant(axes{pol, fb, rs, b, m, c})
							v.WithDefaults()
							if err := v.Validate(); err != nil {
								return nil, fmt.Errorf("scenario: variant %s: %w", name, err)
							}
							out = append(out, Variant{Name: name, Scenario: v})
						}
					}
				}
			}
		}
	}
	return out, nil
}

// axes is one combination of a sweep's values; nil is the file's own.
type axes struct {
	policy    *string
	feedback  *bool
	resolvers *bool
	backoff   *string
	overload  *string
	count     *int
}

// variant is s with one combination of its sweep applied (nil: the file's
// own value) and its name.
func (s *Scenario) variant(a axes) (*Scenario, string) {
	pol, b, m, c := a.policy, a.backoff, a.overload, a.count
	v := s.clone()
	v.Sweep = Sweep{}
	var name []string
	if pol != nil {
		v.DNS.Policy = *pol
		name = append(name, "dns="+*pol)
		// The set's fields the swept policy does not read are dropped,
		// as authdns/answer refuses them.
		if p, err := answer.ParsePolicy(*pol); err == nil {
			if !p.Uses(answer.FieldBigSubset) {
				v.DNS.BigWeightedSubset = false
			}
			if !p.Uses(answer.FieldBigN) {
				v.DNS.BigN = 0
			}
		}
	}
	if a.feedback != nil {
		v.DNS.Feedback.Enabled, v.feedbackSwept = *a.feedback, true
		name = append(name, map[bool]string{false: "feedback=off", true: "feedback=on"}[*a.feedback])
	}
	if a.resolvers != nil {
		v.DNS.Resolvers.Enabled, v.resolversSwept = *a.resolvers, true
		name = append(name, map[bool]string{false: "resolvers=off", true: "resolvers=on"}[*a.resolvers])
	}
	if b != nil {
		v.Client.Backoff = retune(v.Client.Backoff, *b)
		name = append(name, "backoff="+*b)
	}
	if m != nil {
		v.Overload.Mode = *m
		name = append(name, "overload="+*m)
	}
	if c != nil && len(v.Origins) > 0 {
		g := &v.Origins[0]
		if g.Headroom > 0 {
			// Each origin keeps the connections it has at the
			// file's count.
			g.MaxConnections = int64(math.Ceil(g.Headroom * float64(v.Population.Devices) / float64(max(1, g.Count))))
			g.Headroom = 0
		}
		g.Count = *c
		name = append(name, fmt.Sprintf("origins=%d", *c))
	}
	return v, strings.Join(name, " ")
}

func orNil(xs []string) []*string {
	if len(xs) == 0 {
		return []*string{nil}
	}
	out := make([]*string, len(xs))
	for i := range xs {
		out[i] = &xs[i]
	}
	return out
}

// clone copies s deeply enough that a variant's changes do not reach s.
func (s *Scenario) clone() *Scenario {
	c := *s
	c.Population.Priorities = append([]Priority(nil), s.Population.Priorities...)
	c.Geography.Shares = append([]float64(nil), s.Geography.Shares...)
	c.Origins = append([]Origin(nil), s.Origins...)
	c.Traffic.Arrivals = append([]Arrival(nil), s.Traffic.Arrivals...)
	c.Traffic.Disconnects = append([]Disconnect(nil), s.Traffic.Disconnects...)
	c.Traffic.RegionLoss = append([]RegionLoss(nil), s.Traffic.RegionLoss...)
	c.Traffic.Poison = append([]Poison(nil), s.Traffic.Poison...)
	return &c
}
