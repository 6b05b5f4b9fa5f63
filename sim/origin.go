package sim

import (
	"math"
	"time"
)

// origin is one origin (a load balancer, a hub) and the handshakes it
// works on. Handshakes are a fluid FIFO queue served at mu per step:
// an attempt admitted behind work W completes after W/mu plus the idle
// handshake latency, or, when that is later than the client's connect
// timeout, fails with a timeout while the origin still spends the work on
// it (the client is gone but the handshake was queued).
type origin struct {
	name      string
	region    string
	weight    int
	secondary bool

	maxConn int64
	mu      float64 // handshakes completed per step
	muSec   float64 // per second
	backlog float64 // 0: unbounded
	hl      time.Duration
	maxReq  float64 // requests per step, 0: not modelled

	up          bool
	changedStep int
	epoch       int32 // crashes so far

	conns    int64
	connPrio []int64
	pending  int64   // devices whose handshake is in flight here
	willConn int64   // of which will connect
	work     float64 // queued handshake work, abandoned work included

	arr []cohort // attempts that reached it this step
	adm admitter // nil: no admission control (errors mode)

	fresh []int64 // connections completed this step, by priority
}

// admitter is adaptive admission: it says how many of the attempts of each
// priority an origin takes now, and learns from what happened.
type admitter interface {
	// admit returns, for the demand of each priority, how many to admit
	// and how many held connections to sever; the devices turned away or
	// severed spread evenly over the retry-after hints of their priority.
	admit(now time.Time, work float64, demand []int64, open []int64) (admitted, sever []int64, hints [][]time.Duration)
	// observe feeds the step's handshake latency and work in flight.
	observe(now time.Time, latency time.Duration, inflight float64, served int64, dropped bool)
	// limit returns the current limit on handshakes in flight.
	limit() int
}

// load is the origin's connections and sure arrivals over its maximum:
// what p2c compares.
func (o *origin) load() float64 {
	if !o.up {
		return math.Inf(1)
	}
	return float64(o.conns+o.willConn) / float64(o.maxConn)
}
