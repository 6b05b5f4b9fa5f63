package shard

import "fmt"

// Health is a view of worker health. Healthy reports whether worker i (an
// index in [0, n)) may receive traffic. Implementations are called from
// Pick on the caller's goroutine and must be safe for concurrent use if
// Pick is called concurrently.
type Health interface {
	Healthy(worker int) bool
}

// HealthFunc adapts a function to Health.
type HealthFunc func(worker int) bool

// Healthy calls f(worker).
func (f HealthFunc) Healthy(worker int) bool { return f(worker) }

// AllHealthy is a Health under which every worker is healthy.
type AllHealthy struct{}

// Healthy returns true.
func (AllHealthy) Healthy(int) bool { return true }

var (
	_ Health = HealthFunc(nil)
	_ Health = AllHealthy{}
)

// Status says how a Choice was made.
type Status uint8

// The outcomes of Pick, from best to worst.
const (
	// StatusHealthy: at least MinHealthy hand members are healthy; Workers
	// holds every healthy hand member, in preference order.
	StatusHealthy Status = iota
	// StatusSpilled: fewer than MinHealthy hand members were healthy, and
	// healthy spill workers made up the difference. Workers holds the healthy
	// hand members, then the healthy spill workers that were needed.
	StatusSpilled
	// StatusDegraded: some but fewer than MinHealthy workers of the hand and
	// spill together are healthy. Workers holds all of them.
	StatusDegraded
	// StatusFailOpen: no worker of the hand or spill is healthy. Workers is
	// the whole hand: one tenant stays on its own hand instead of spreading
	// over the fleet.
	StatusFailOpen
)

// String returns "healthy", "spilled", "degraded" or "fail-open".
func (s Status) String() string {
	switch s {
	case StatusHealthy:
		return "healthy"
	case StatusSpilled:
		return "spilled"
	case StatusDegraded:
		return "degraded"
	case StatusFailOpen:
		return "fail-open"
	}
	return fmt.Sprintf("Status(%d)", uint8(s))
}

// Choice is the result of a health-aware pick.
type Choice struct {
	// Workers are the chosen worker indices in preference order; the slice
	// is the dst passed to Pick.
	Workers []int
	// Status says whether the choice is healthy, spilled, degraded or a
	// fail-open.
	Status Status
	// Spilled counts the workers of Workers that come from the spill list.
	Spilled int
}

// Pick appends to dst[:0] the workers id should use under health h, with
// the dealer's MinHealthy and Spill: every healthy member of the hand in
// preference order; if fewer than MinHealthy are healthy, the healthy spill
// workers in spill order until MinHealthy is reached; if none of hand and
// spill is healthy, the whole hand with StatusFailOpen. The spill list is
// computed only when needed. Pick allocates nothing when cap(dst) >=
// HandSize+Spill and h does not allocate; a caller that would have to
// convert an adapter to Health on every call (which allocates when the
// adapter escapes) wants PickFunc.
func (d *Dealer) Pick(dst []int, id string, h Health) Choice {
	return d.PickFunc(dst, id, h.Healthy)
}

// PickFunc is Pick with health given as a function: healthy(i) reports
// whether worker i may receive traffic. PickFunc only calls healthy and
// does not keep it, so a closure built by the caller for one call stays on
// the caller's stack: PickFunc allocates nothing when cap(dst) >=
// HandSize+Spill and healthy does not allocate. It is safe for concurrent
// use when healthy is.
func (d *Dealer) PickFunc(dst []int, id string, healthy func(worker int) bool) Choice {
	var hand [MaxHand]int
	hs := d.Hand(hand[:0], id)
	dst = appendHealthy(dst[:0], hs, healthy, len(hs))
	if len(dst) >= d.minHealthy {
		return Choice{Workers: dst, Status: StatusHealthy}
	}
	var spill [MaxHand]int
	return finishPick(dst, hs, d.spillOf(spill[:0], hs), d.minHealthy, healthy)
}

// PickFrom is Pick for any hand (a stable, lattice or stored hand) and an
// explicit spill list: it appends to dst[:0] the healthy members of hand in
// order, then, if fewer than minHealthy (at least 1) were healthy, healthy
// workers of spill in order until minHealthy is reached, and fails open to
// the whole hand when none is healthy. It allocates nothing when dst has
// room for len(hand)+len(spill) workers and h does not allocate.
func PickFrom(dst []int, hand, spill []int, minHealthy int, h Health) Choice {
	return PickFromFunc(dst, hand, spill, minHealthy, h.Healthy)
}

// PickFromFunc is PickFrom with health given as a function, which it calls
// and does not keep (see PickFunc).
func PickFromFunc(dst []int, hand, spill []int, minHealthy int, healthy func(worker int) bool) Choice {
	minHealthy = max(minHealthy, 1)
	dst = appendHealthy(dst[:0], hand, healthy, len(hand))
	if len(dst) >= minHealthy {
		return Choice{Workers: dst, Status: StatusHealthy}
	}
	return finishPick(dst, hand, spill, minHealthy, healthy)
}

// appendHealthy appends the healthy workers of ws to dst until dst holds
// limit workers.
func appendHealthy(dst []int, ws []int, healthy func(int) bool, limit int) []int {
	for _, w := range ws {
		if len(dst) >= limit {
			break
		}
		if healthy(w) {
			dst = append(dst, w)
		}
	}
	return dst
}

// finishPick completes a pick whose hand gave fewer than minHealthy
// healthy workers.
func finishPick(dst []int, hand, spill []int, minHealthy int, healthy func(int) bool) Choice {
	fromHand := len(dst)
	dst = appendHealthy(dst, spill, healthy, minHealthy)
	switch {
	case len(dst) >= minHealthy:
		return Choice{Workers: dst, Status: StatusSpilled, Spilled: len(dst) - fromHand}
	case len(dst) > 0:
		return Choice{Workers: dst, Status: StatusDegraded, Spilled: len(dst) - fromHand}
	}
	return Choice{Workers: append(dst[:0], hand...), Status: StatusFailOpen}
}
