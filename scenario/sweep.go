package scenario

import (
	"fmt"
	"strings"
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
	// OriginCount lists counts for the first origin group; a group sized
	// by Headroom keeps its total capacity, so each origin grows as the
	// count shrinks.
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
// sweep, in the order the file lists the values (backoff outermost).
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
	var out []Variant
	for _, b := range backoffs {
		for _, m := range modes {
			for _, c := range counts {
				v := s.clone()
				v.Sweep = Sweep{}
				var name []string
				if b != nil {
					v.Client.Backoff = retune(v.Client.Backoff, *b)
					name = append(name, "backoff="+*b)
				}
				if m != nil {
					v.Overload.Mode = *m
					name = append(name, "overload="+*m)
				}
				if c != nil && len(v.Origins) > 0 {
					v.Origins[0].Count = *c
					name = append(name, fmt.Sprintf("origins=%d", *c))
				}
				v.WithDefaults()
				if err := v.Validate(); err != nil {
					return nil, fmt.Errorf("scenario: variant %s: %w", strings.Join(name, " "), err)
				}
				out = append(out, Variant{Name: strings.Join(name, " "), Scenario: v})
			}
		}
	}
	return out, nil
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
