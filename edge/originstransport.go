package edge

import (
	"math"
	"net/netip"
	"time"
)

// Two things keep an origin that cannot carry a session from getting new
// ones, whatever the outlier detection's max_ejection_percent allows.
//
// The transport. An origin whose Relay transport is down (its HTTP/2
// connection refused, or lost and not re-established) is not usable: the
// upstream code reports the connection's state (SetTransportDown), and
// Pick skips the origin until the connection is READY again. This is a
// fact about the origin, not a statistic, so no ejection cap applies to
// it, as Envoy keeps a host that fails its active health check
// (failed_active_hc) apart from one the outlier detection ejected
// (failed_outlier_check), and bounds only the latter by
// max_ejection_percent. Fail-open does not reach such an origin either: a
// session sent to it would fail at once.
//
// The score. An origin that answers but fails every handshake (a hub that
// refuses every Hello with 1013, a Relay stream that ends at once) ends
// each of them within moments, so its load (sessions plus handshakes in
// flight) stays near zero and p2c, comparing loads, would prefer it in
// every draw it is part of. A failure is not load, so counting recent
// failures as sessions does not help: to lose against origins holding
// 10,000 sessions it would first have to fail 10,000 handshakes per decay
// time. So p2c compares a score in which every failure doubles the
// origin's load plus one and every failurePenaltyHalfLife halves it back,
// down to the load itself; a success clears it. That is scale-free: an
// origin that fails everything stops winning draws after about log2 of
// the others' load failures (a dozen against loads of thousands), then
// gets about one handshake, a probe, per half-life per edge (each failure
// doubles what the time halves), whatever the rates; a healthy origin's
// odd failure costs it about one half-life of new sessions against
// equally loaded peers. The doubling is at most maxPenaltyDoublings, so an
// origin that failed a burst is probed again within that many half-lives.
// The penalty is one atomic, the time at which it is worn off (each
// failure moves it one half-life past the later of now and itself).

// failurePenaltyHalfLife is the time in which the failures' penalty in
// p2c's score halves.
const failurePenaltyHalfLife = time.Second

// maxPenaltyDoublings bounds the penalty: 2^24 (16.7 M) times the load
// plus one, above the sessions any edge holds.
const maxPenaltyDoublings = 24

// penalize adds one failure to p2c's penalty of o at now (unix
// nanoseconds).
func (o *Origin) penalize(now int64) {
	hl := int64(failurePenaltyHalfLife)
	for {
		old := o.penaltyEnd.Load()
		end := min(max(old, now)+hl, now+maxPenaltyDoublings*hl)
		if o.penaltyEnd.CompareAndSwap(old, end) {
			return
		}
	}
}

// score is what p2c compares at now (unix nanoseconds): Load with no
// penalty, else (Load+1) doubled once per half-life of penalty left,
// minus one. It takes no lock and allocates nothing.
func (o *Origin) score(now int64) float64 {
	load := float64(o.Load())
	e := float64(o.penaltyEnd.Load()-now) / float64(failurePenaltyHalfLife)
	if e <= 0 {
		return load
	}
	return (load+1)*math.Exp2(e) - 1
}

// SetTransportDown records whether the origin's Relay transport is down:
// true while its connection is refused or lost and not re-established,
// false once it is READY again. An origin whose transport is down is not
// picked for new sessions, even by fail-open. The edge's upstream code
// calls it; the zero value is up (a connection never tried is no fact).
func (o *Origin) SetTransportDown(down bool) {
	if o.down.Swap(down) == down {
		return
	}
	if down {
		o.set.log.Warn("origin transport down: no new sessions until it is back", "origin", o.addr)
	} else {
		o.set.log.Info("origin transport back", "origin", o.addr)
	}
}

// TransportDown reports whether the origin's Relay transport is down
// (SetTransportDown).
func (o *Origin) TransportDown() bool { return o.down.Load() }

// downCount returns how many origins of the answer have their transport
// down.
func (s *Origins) downCount() int {
	sn := s.snap.Load()
	if sn == nil {
		return 0
	}
	n := 0
	for _, o := range sn.list {
		if o.down.Load() {
			n++
		}
	}
	return n
}

// Lookup returns the origin of addr (host:port, as Origin.Addr) while the
// set knows it (in the answer, or out of it with sessions left or
// remembered for the hands), else nil.
func (s *Origins) Lookup(addr string) *Origin {
	ap, err := netip.ParseAddrPort(addr)
	if err != nil {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.byAddr[ap]
}
