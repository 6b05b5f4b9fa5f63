package answer

import (
	"fmt"
	"math"
)

// Class is the class of the resolver a query comes from, by the share of
// the server's queries it sends (resolver-aware answers). One resolver
// answers for all of its clients with the answer it caches, so a resolver
// that sends a large share of the queries speaks for many hosts: it gets
// more records per answer (Config.BigN), spreading its clients over more
// origins. The zero value is ClassSmall, what every query is when
// resolver-aware answers are off.
type Class uint8

// The classes.
const (
	// ClassSmall is a resolver of no particular share: the answers of the
	// set's configuration.
	ClassSmall Class = iota
	// ClassBig is a resolver whose share of the queries is above the
	// configured one (ClassConfig.BigShare).
	ClassBig
	// NumClasses is the number of classes.
	NumClasses = int(ClassBig) + 1
)

var classNames = [NumClasses]string{"small", "big"}

// String returns the class's name in lower case ("big").
func (c Class) String() string {
	if int(c) < NumClasses {
		return classNames[c]
	}
	return fmt.Sprintf("class %d", uint8(c))
}

// DefaultBigShare is the share of the queries above which a resolver is
// big when ClassConfig.BigShare is 0: one query in a hundred.
const DefaultBigShare = 0.01

// ClassConfig classes resolvers by their share of the queries. The zero
// value takes DefaultBigShare. It is the rule the server applies to the
// query rates it measures, and the one a simulator applies to the rates
// it models.
type ClassConfig struct {
	// BigShare: a resolver that sends more than this share of the
	// queries (over the same window) is big; 0 < BigShare < 1.
	BigShare float64
}

// WithDefaults returns c with a zero BigShare set to DefaultBigShare.
func (c ClassConfig) WithDefaults() ClassConfig {
	if c.BigShare == 0 {
		c.BigShare = DefaultBigShare
	}
	return c
}

// Validate reports what is wrong with c after defaults.
func (c ClassConfig) Validate() error {
	c = c.WithDefaults()
	if !(c.BigShare > 0 && c.BigShare < 1) {
		return fmt.Errorf("answer: big share %v: need 0 < big share < 1", c.BigShare)
	}
	return nil
}

// Of returns the class of a resolver that sent queries of the total
// queries of every resolver (counted over the same window): ClassBig when
// queries is above BigShare of total, ClassSmall otherwise (and for a
// total of 0). c must have its defaults.
func (c ClassConfig) Of(queries, total float64) Class {
	if total > 0 && !math.IsNaN(queries) && queries > c.BigShare*total {
		return ClassBig
	}
	return ClassSmall
}
