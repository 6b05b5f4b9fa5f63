package scenario

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/corralhq/corral/authdns/answer"
)

// resolversKeys are the keys that only resolver-aware answers read.
var resolversKeys = []string{"dns.resolvers.window", "dns.resolvers.big_share", "dns.resolvers.audience", "dns.resolvers.half_life", "dns.big_n", "dns.big_weighted_subset"}

// minClassWindow is the shortest resolvers.window authdns accepts;
// maxClassWindow the longest the simulator replays.
const (
	minClassWindow = 8 * time.Millisecond
	maxClassWindow = 24 * time.Hour
)

// validateResolvers checks dns.resolvers, dns.big_n and
// dns.big_weighted_subset (s has its defaults): the window and share as
// authdns checks them, an explicit 0 that authdns would read as its
// default, the set's big_n and big_weighted_subset as authdns/answer
// checks them for each policy the file runs, and that resolver-aware
// answers are on (or swept on) when the keys are set, for policies whose
// answers depend on the class.
func (s *Scenario) validateResolvers(bad func(string, string, ...any)) {
	r := s.DNS.Resolvers
	switch {
	case r.Window == 0:
		bad("dns.resolvers.window", "0 is not usable: authdns's resolvers read 0 as the default (%v); give a positive value or remove the key", answer.DefaultClassWindow)
	case r.Window < minClassWindow:
		bad("dns.resolvers.window", "must be at least %v, got %v", minClassWindow, r.Window)
	case r.Window > maxClassWindow:
		bad("dns.resolvers.window", "must be at most %v in the simulator (it replays the windows before the run), got %v", maxClassWindow, r.Window)
	}
	switch {
	case r.BigShare == 0:
		bad("dns.resolvers.big_share", "0 is not usable: authdns's resolvers read 0 as the default (%v); give a share above 0 or remove the key", answer.DefaultBigShare)
	case (answer.ClassConfig{BigShare: r.BigShare}).Validate() != nil:
		bad("dns.resolvers.big_share", "must be above 0 and below 1, got %v", r.BigShare)
	}
	switch {
	case r.HalfLife == 0:
		bad("dns.resolvers.half_life", "0 is not usable: authdns's resolvers read 0 as the default (%v); give a positive value or remove the key", answer.DefaultAudienceHalfLife)
	case r.HalfLife < 0:
		bad("dns.resolvers.half_life", "must be positive, got %v", r.HalfLife)
	case r.HalfLife > maxClassWindow:
		bad("dns.resolvers.half_life", "must be at most %v in the simulator (it replays ten half-lives before the run), got %v", maxClassWindow, r.HalfLife)
	}
	if s.has("dns.resolvers.half_life") && !r.Audience {
		bad("dns.resolvers.half_life", "is read only with dns.resolvers.audience: true")
	}
	if r.Audience && !s.DNS.Feedback.Enabled && !slices.Contains(s.Sweep.DNSFeedback, true) && !s.feedbackSwept {
		bad("dns.resolvers.audience", "learns from the origins' load reports, and dns.feedback is never on: turn it on (dns.feedback.enabled, or sweep.dns_feedback)")
	}
	if s.Population.SessionAge < 0 {
		bad("population.session_age", "must not be negative, got %v", s.Population.SessionAge)
	} else if s.has("population.session_age") && !r.Audience {
		bad("population.session_age", "is read only with dns.resolvers.audience: true")
	}
	if s.DNS.BigN < 0 {
		bad("dns.big_n", "must not be negative, got %d", s.DNS.BigN)
	}
	on := r.Enabled || slices.Contains(s.Sweep.DNSResolvers, true) || s.resolversSwept
	if !on {
		var set []string
		for _, k := range resolversKeys {
			if s.has(k) {
				set = append(set, strings.TrimPrefix(k, "dns."))
			}
		}
		if len(set) > 0 {
			bad("dns.resolvers.enabled", "is off while dns sets %s: turn it on (enabled: true, or sweep.dns_resolvers) or remove them", strings.Join(set, ", "))
		}
		return
	}
	type run struct{ path, policy string }
	runs := []run{{"dns.policy", s.DNS.Policy}}
	if len(s.Sweep.DNSPolicy) > 0 {
		runs = runs[:0]
		for i, p := range s.Sweep.DNSPolicy {
			runs = append(runs, run{fmt.Sprintf("sweep.dns_policy[%d]", i), p})
		}
	}
	weighted, reported := false, map[string]bool{}
	for _, rn := range runs {
		p, err := answer.ParsePolicy(rn.policy)
		if err != nil {
			continue // DNS.validate reports it
		}
		if !p.Uses(answer.FieldBigN) {
			bad(rn.path, "the %s policy answers every resolver alike, and dns.resolvers is on (multivalue, weighted-subset, and weighted with big_weighted_subset answer big resolvers with more records)", rn.policy)
			continue
		}
		if p.Uses(answer.FieldBigSubset) {
			weighted = true
			if !s.DNS.BigWeightedSubset {
				bad(rn.path, "the weighted policy answers one record to every resolver unless dns.big_weighted_subset is true, and dns.resolvers is on")
				continue
			}
		}
		// authdns/answer's own checks of big_n for this policy, under
		// the keys of the file (once per key and message).
		for _, e := range setErrors(s.answerConfig(p, s.Origins)) {
			key := map[answer.Field]string{answer.FieldBigN: "dns.big_n", answer.FieldBigSubset: "dns.big_weighted_subset"}[e.Field]
			if key == "" || reported[key+e.Msg] {
				continue
			}
			reported[key+e.Msg] = true
			bad(key, "%s (policy %s)", e.Msg, rn.policy)
		}
	}
	if s.DNS.BigWeightedSubset && !weighted {
		bad("dns.big_weighted_subset", "applies to the weighted policy only, which the file does not run")
	}
}

// answerConfig is the record set a run of policy p answers from, as the
// simulator builds it: one record per origin, and the file's max_answers,
// big_n and big_weighted_subset for the policies that read them.
func (s *Scenario) answerConfig(p *answer.Policy, origins []Origin) answer.Config {
	n := 0
	for _, g := range origins {
		n += max(g.Count, 0)
	}
	c := answer.Config{Policy: p, Records: make([]answer.Record, min(max(n, 1), answer.MaxRecords))}
	if p.Uses(answer.FieldN) {
		c.N = s.DNS.MaxAnswers
	}
	if p.Uses(answer.FieldBigN) && (!p.Uses(answer.FieldBigSubset) || s.DNS.BigWeightedSubset) {
		c.BigN = s.DNS.BigN
	}
	if p.Uses(answer.FieldBigSubset) {
		c.BigSubset = s.DNS.BigWeightedSubset
	}
	if p.Uses(answer.FieldBigLeaveOut) && (!p.Uses(answer.FieldBigSubset) || s.DNS.BigWeightedSubset) {
		c.BigLeaveOut = s.DNS.Resolvers.Audience && s.DNS.Feedback.Enabled
	}
	return c
}

// setErrors returns the field errors of c's validation.
func setErrors(c answer.Config) []*answer.FieldError {
	var out []*answer.FieldError
	var walk func(error)
	walk = func(err error) {
		if fe, ok := err.(*answer.FieldError); ok {
			out = append(out, fe)
			return
		}
		if j, ok := err.(interface{ Unwrap() []error }); ok {
			for _, e := range j.Unwrap() {
				walk(e)
			}
		}
	}
	if err := c.Validate(); err != nil {
		walk(err)
	}
	return out
}
