package answer

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/corralhq/corral/shard"
)

// Policy is a routing policy: how the records of a set make an answer.
type Policy uint8

// The routing policies. See the package documentation for their semantics.
const (
	Simple Policy = iota
	Weighted
	Multivalue
	Failover
	WeightedSubset
	Shuffle
	CIDR
)

var policyNames = [...]string{"simple", "weighted", "multivalue", "failover", "weighted-subset", "shuffle", "cidr"}

// String returns the policy's name as configuration files spell it.
func (p Policy) String() string {
	if int(p) < len(policyNames) {
		return policyNames[p]
	}
	return fmt.Sprintf("policy(%d)", uint8(p))
}

// Policies returns every policy in a stable order.
func Policies() []Policy {
	return []Policy{Simple, Weighted, Multivalue, Failover, WeightedSubset, Shuffle, CIDR}
}

// ParsePolicy returns the policy named s; the empty name is Simple.
func ParsePolicy(s string) (Policy, error) {
	if s == "" {
		return Simple, nil
	}
	if i := slices.Index(policyNames[:], s); i >= 0 {
		return Policy(i), nil
	}
	return 0, fmt.Errorf("answer: unknown policy %q (want one of %s)", s, strings.Join(policyNames[:], ", "))
}

// Limits of a set.
const (
	// DefaultMultivalue is how many records a multivalue answer holds at
	// most, Route 53's figure.
	DefaultMultivalue = 8
	// MaxRecords is the largest number of records in one set.
	MaxRecords = 4096
	// DefaultLocation names the cidr location that answers clients no
	// prefix matches.
	DefaultLocation = "*"
)

// Record is what selection knows of one record of a set. The zero value is
// an always-healthy primary of weight 0 in the default location.
type Record struct {
	// Check names the health check of the record; empty means always
	// healthy.
	Check string
	// Weight is the relative weight of weighted and weighted-subset
	// policies.
	Weight uint32
	// Secondary marks a failover secondary; records are primaries by
	// default.
	Secondary bool
	// Location is the cidr location of the record; empty is the default
	// location "*".
	Location string
}

// Config describes a set of records and its policy.
type Config struct {
	// Policy is the routing policy.
	Policy Policy
	// Records are the records of the set, at least one.
	Records []Record
	// N is the most records a multivalue answer holds (0 means 8) and the
	// number of records of a weighted-subset answer (required).
	N int
	// Locations maps a cidr location name to its prefixes. Every record's
	// location except "*" must be listed.
	Locations map[string][]netip.Prefix
	// Dealer deals the hands of a shuffle set (its workers are the
	// records, by index); required for Shuffle.
	Dealer *shard.Dealer
}

// Validate reports what is wrong with c, with messages that start with
// "answer: ".
func (c Config) Validate() error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf("answer: "+format, args...)) }
	if int(c.Policy) >= len(policyNames) {
		bad("unknown policy %d", c.Policy)
	}
	if len(c.Records) == 0 {
		bad("a set needs at least one record")
	}
	if len(c.Records) > MaxRecords {
		bad("a set holds at most %d records, got %d", MaxRecords, len(c.Records))
	}
	if c.N < 0 {
		bad("n must not be negative, got %d", c.N)
	}
	switch c.Policy {
	case WeightedSubset:
		if c.N == 0 {
			bad("weighted-subset needs n, the number of records per answer")
		}
	case Failover:
		if !slices.ContainsFunc(c.Records, func(r Record) bool { return !r.Secondary }) {
			bad("failover needs at least one primary record")
		}
	case Shuffle:
		if c.Dealer == nil {
			bad("shuffle needs a dealer")
		} else if c.Dealer.Workers() != len(c.Records) {
			bad("shuffle dealer deals from %d records, the set has %d", c.Dealer.Workers(), len(c.Records))
		}
	case CIDR:
		for loc, ps := range c.Locations {
			for _, p := range ps {
				if !p.IsValid() {
					bad("location %q: invalid prefix", loc)
				}
			}
		}
		for i, r := range c.Records {
			if r.Location != "" && r.Location != DefaultLocation {
				if _, ok := c.Locations[r.Location]; !ok {
					bad("record %d: unknown location %q", i, r.Location)
				}
			}
		}
	}
	return errors.Join(errs...)
}
