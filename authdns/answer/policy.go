package answer

import (
	"fmt"
	"slices"
	"strings"
)

// policies is the list of routing policies, in the order Policies returns
// them (the order of the server's metrics). A policy is one file that
// declares its *Policy (its fields, their checks and its selection) and
// one entry here.
var policies = [...]*Policy{Simple, Weighted, Multivalue, Failover, WeightedSubset, Shuffle, CIDR}

// NumPolicies is the number of routing policies.
const NumPolicies = len(policies)

// Policy is a routing policy: how the records of a set make an answer. The
// policies are the package's variables (Simple, Weighted, ...); Policies
// lists them and ParsePolicy finds one by name. A nil *Policy in a Config
// means Simple. Policies are immutable and safe for concurrent use; the
// variables are never reassigned.
type Policy struct {
	// name is the policy's name as configuration files spell it.
	name string
	// fields are the fields of Config and Record the policy reads beyond
	// Records and their Health; Validate refuses the others when set.
	fields fieldSet
	// one is true when the first record of an answer is a choice that
	// stands alone, as a CNAME answer (one record) needs.
	one bool
	// validate reports what is wrong with the fields of c the policy
	// reads; the checks common to every policy are done already.
	validate func(c *Config) []error
	// build compiles a valid c into the policy's selection over a set.
	build func(c *Config) selector
}

// selector is a policy compiled for one set: pick appends to dst (empty,
// with room for every record) the records that answer q.
type selector interface {
	pick(s *Set, dst []int, q Query, r Source) ([]int, Result)
}

// classReader is a selector whose answers may depend on Query.Class; it
// reports whether they do for its set.
type classReader interface {
	readsClass() bool
}

// String returns the policy's name as configuration files spell it.
func (p *Policy) String() string {
	if p == nil {
		return Simple.name
	}
	return p.name
}

// Index returns the position of p in Policies, -1 for a policy that is not
// one of them.
func (p *Policy) Index() int {
	if p == nil {
		p = Simple
	}
	return slices.Index(policies[:], p)
}

// Uses reports whether the policy reads field f of Config or Record.
func (p *Policy) Uses(f Field) bool {
	if p == nil {
		p = Simple
	}
	return p.fields.has(f)
}

// OneRecord reports whether the first record of the policy's answers is a
// choice that stands alone (weighted, failover), so that the policy suits
// a name that answers one record, such as a CNAME with several targets.
func (p *Policy) OneRecord() bool {
	if p == nil {
		p = Simple
	}
	return p.one
}

// Policies returns every policy in a stable order.
func Policies() []*Policy { return slices.Clone(policies[:]) }

// ParsePolicy returns the policy named s; the empty name is Simple.
func ParsePolicy(s string) (*Policy, error) {
	if s == "" {
		return Simple, nil
	}
	for _, p := range policies {
		if p.name == s {
			return p, nil
		}
	}
	return nil, fmt.Errorf("answer: unknown policy %q (want one of %s)", s, strings.Join(names(policies[:]), ", "))
}

// usedBy returns the policies that read f, for messages.
func usedBy(f Field) []*Policy {
	var out []*Policy
	for _, p := range policies {
		if p.fields.has(f) {
			out = append(out, p)
		}
	}
	return out
}

// names returns the names of ps.
func names(ps []*Policy) []string {
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = p.name
	}
	return out
}

// oneOf spells the names of ps as "a", "a or b", "a, b or c".
func oneOf(ps []*Policy, conj string) string {
	n := names(ps)
	if len(n) < 2 {
		return strings.Join(n, "")
	}
	return strings.Join(n[:len(n)-1], ", ") + " " + conj + " " + n[len(n)-1]
}

// OneRecordPolicies spells the names of the policies whose OneRecord is
// true ("weighted or failover"), for messages.
func OneRecordPolicies() string {
	var ps []*Policy
	for _, p := range policies {
		if p.one {
			ps = append(ps, p)
		}
	}
	return oneOf(ps, "or")
}
