package limit

import (
	"fmt"
	"sync/atomic"
)

// Priority ranks work for admission and shedding. Lower is more important.
type Priority uint8

const (
	// P0 is critical work: shed last, severed only on a hard resource
	// emergency.
	P0 Priority = iota
	// P1 is standard work.
	P1
	// P2 is background work: shed first.
	P2
)

// NumPriorities is the number of priorities; arrays indexed by Priority
// have this length.
const NumPriorities = 3

// String returns "p0", "p1" or "p2".
func (p Priority) String() string {
	if p < NumPriorities {
		return [...]string{"p0", "p1", "p2"}[p]
	}
	return fmt.Sprintf("priority(%d)", uint8(p))
}

// Valid reports whether p is P0, P1 or P2.
func (p Priority) Valid() bool { return p < NumPriorities }

// ParsePriority parses "p0", "p1", "p2" (or "critical", "standard",
// "background").
func ParsePriority(s string) (Priority, error) {
	switch s {
	case "p0", "P0", "critical":
		return P0, nil
	case "p1", "P1", "standard":
		return P1, nil
	case "p2", "P2", "background":
		return P2, nil
	}
	return 0, fmt.Errorf("limit: unknown priority %q (want p0, p1 or p2)", s)
}

// Counts holds one count per priority, indexed by Priority.
type Counts [NumPriorities]int64

// Total returns the sum over all priorities.
func (c Counts) Total() int64 { return c[P0] + c[P1] + c[P2] }

// AtomicCounts is one counter per priority, indexed by Priority, safe for
// concurrent use; the zero value counts nothing yet.
type AtomicCounts [NumPriorities]atomic.Int64

// Load returns the counts, each read atomically (not all at one instant).
func (c *AtomicCounts) Load() Counts {
	var out Counts
	for p := range c {
		out[p] = c[p].Load()
	}
	return out
}
