package answer

import (
	"errors"
	"net/netip"
	"sync/atomic"

	"github.com/corralhq/corral/shard"
)

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

// Probe is the health of one record, resolved when the set is built (the
// health package's Ref is one). Select calls Healthy for candidate records
// on every query, so it must be cheap, allocation-free and safe for
// concurrent use.
type Probe interface {
	Healthy() bool
}

// FlagProbe is a Probe whose state is one atomic boolean (health.Ref is
// one). When every probe of a set is one, Select loads the flags itself
// instead of calling Healthy, an interface call per candidate record.
type FlagProbe interface {
	Probe
	// HealthyFlag returns the boolean that Healthy reports, or nil when
	// Healthy must be called. It is called once, when the set is built.
	HealthyFlag() *atomic.Bool
}

// Record is what selection knows of one record of a set. The zero value is
// an always-healthy primary of weight 0 in the default location.
type Record struct {
	// Health is the record's health check; nil means always healthy.
	Health Probe
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
	// Policy is the routing policy; nil means Simple.
	Policy *Policy
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
	// BigN is the most records of an answer to a big resolver
	// (Query.Class ClassBig) of a multivalue or weighted-subset set, and
	// of a weighted set with BigSubset: 0 means every healthy record; at
	// least N otherwise. Small resolvers get N (one record for weighted).
	BigN int
	// BigSubset answers big resolvers of a weighted set with a weighted
	// subset of BigN records (by weight without replacement, the healthy
	// ones of non-zero weight, so a standby stays one) instead of one
	// record. Only weighted reads it.
	BigSubset bool
	// BigLeaveOut: an answer to a big resolver that would name every
	// healthy record, three or more, names all but one, the one left out
	// drawn at random (for weighted sets by weight: the lightest most
	// often). Learning the resolvers' audience needs it: an answer of
	// every record spreads its resolver's sessions like everybody's, and
	// AudienceConfig.Learn can tell nothing of it from them. Read by the
	// policies that read BigN.
	BigLeaveOut bool
}

// Validate reports what is wrong with c as *FieldError values joined with
// errors.Join, whose messages start with "answer: ". A field that the
// policy does not read must be left at its zero value.
func (c Config) Validate() error {
	p := c.Policy
	if p == nil {
		p = Simple
	}
	var errs []error
	if p.Index() < 0 {
		errs = append(errs, setErr(FieldPolicy, "unknown policy %q", p.name))
		return errors.Join(errs...)
	}
	if len(c.Records) == 0 {
		errs = append(errs, setErr(FieldRecords, "a set needs at least one record"))
	}
	if len(c.Records) > MaxRecords {
		errs = append(errs, setErr(FieldRecords, "a set holds at most %d records, got %d", MaxRecords, len(c.Records)))
	}
	if c.N < 0 {
		errs = append(errs, setErr(FieldN, "n must not be negative, got %d", c.N))
	}
	// Fields the policy does not read.
	unused := func(f Field) bool { return !p.fields.has(f) }
	applies := func(f Field) string {
		ps, noun := usedBy(f), " policy, not "
		if len(ps) > 1 {
			noun = " policies, not "
		}
		return f.String() + " applies to the " + oneOf(ps, "and") + noun + p.name
	}
	if c.N != 0 && unused(FieldN) {
		errs = append(errs, setErr(FieldN, "%s", applies(FieldN)))
	}
	if c.BigN < 0 {
		errs = append(errs, setErr(FieldBigN, "big n must not be negative, got %d", c.BigN))
	}
	if c.BigN != 0 && unused(FieldBigN) {
		errs = append(errs, setErr(FieldBigN, "%s", applies(FieldBigN)))
	}
	if c.BigSubset && unused(FieldBigSubset) {
		errs = append(errs, setErr(FieldBigSubset, "%s", applies(FieldBigSubset)))
	}
	if c.BigLeaveOut && unused(FieldBigLeaveOut) {
		errs = append(errs, setErr(FieldBigLeaveOut, "%s", applies(FieldBigLeaveOut)))
	}
	if c.Dealer != nil && unused(FieldDealer) {
		errs = append(errs, setErr(FieldDealer, "%s", applies(FieldDealer)))
	}
	if len(c.Locations) > 0 && unused(FieldLocations) {
		errs = append(errs, setErr(FieldLocations, "%s", applies(FieldLocations)))
	}
	for i, r := range c.Records {
		if r.Weight != 0 && unused(FieldWeight) {
			errs = append(errs, recErr(i, FieldWeight, "%s", applies(FieldWeight)))
		}
		if r.Secondary && unused(FieldSecondary) {
			errs = append(errs, recErr(i, FieldSecondary, "%s", applies(FieldSecondary)))
		}
		if r.Location != "" && unused(FieldLocation) {
			errs = append(errs, recErr(i, FieldLocation, "%s", applies(FieldLocation)))
		}
	}
	if len(errs) == 0 && p.validate != nil {
		errs = p.validate(&c)
	}
	return errors.Join(errs...)
}
