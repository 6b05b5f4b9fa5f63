package sim

import (
	"math"
	"time"

	"github.com/corralhq/corral/limit"
)

// origin is one origin (a load balancer, a hub) and the handshakes it
// works on. Handshakes are a fluid FIFO queue served at mu per step:
// an attempt admitted behind work W completes after W/mu plus the idle
// handshake latency, or, when that is later than the client's connect
// timeout, fails with a timeout while the origin still spends the work on
// it (the client is gone but the handshake was queued). A session that
// ends on a live origin joins the same queue as muSec/tdSec of work (the
// share of a second its teardown takes, in attempts at the step's rate).
type origin struct {
	name      string
	region    string
	weight    int
	secondary bool

	maxConn int64
	mu      float64 // attempts completed per step at this step's mix
	muSec   float64 // per second
	hsSec   float64 // TLS handshakes (new connections) per second
	stSec   float64 // stream set-ups per second, 0: bounded by hsSec alone
	backlog float64 // 0: unbounded
	hl      time.Duration
	maxReq  float64 // requests per step, 0: not modelled
	tdSec   float64 // sessions ended per second when doing nothing else, 0: free

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

	fresh  []int64 // connections completed this step, by priority
	opened int64   // connections completed since the start (a report's opened count)

	// pool is the upstream connections edge hosts hold to the origin
	// (fluid: streams over streams per connection, rounded up).
	pool float64
	// Counters of the step, for OriginStep.
	stepAttempts int64
	stepFail     [NumCauses]int64
	newConns     float64
	// Consecutive failed and passed health checks.
	checkFails, checkPasses int
}

// setRate sets the attempts the origin completes per second when a share
// f of them needs a new upstream connection: stream set-ups and
// handshakes are two stages in series, the slower bounds the rate (a
// share f of the attempts costs a handshake each).
func (o *origin) setRate(f float64, dts float64) {
	r := math.Inf(1)
	if o.stSec > 0 {
		r = o.stSec
	}
	if f > 0 {
		r = math.Min(r, o.hsSec/f)
	}
	if math.IsInf(r, 1) {
		r = o.hsSec // no stream bound and nothing to connect: validation keeps this to unpooled runs
	}
	o.muSec = r
	o.mu = r * dts
}

// refusing reports whether a stream check opened now would fail: the
// origin is full, its backlog full, or the check would wait in the set-up
// queue longer than timeout.
func (o *origin) refusing(timeout time.Duration) bool {
	if !o.up {
		return true
	}
	if o.conns+o.willConn >= o.maxConn {
		return true
	}
	if o.backlog > 0 && o.work >= o.backlog {
		return true
	}
	wait := o.work/o.muSec + o.hl.Seconds()
	return wait > timeout.Seconds()
}

// admitter is adaptive admission: it says how many of the attempts of each
// priority an origin takes now, and learns from what happened.
type admitter interface {
	// admit returns, for the demand of each priority, how many to admit
	// and how many held connections to sever; the devices turned away or
	// severed spread evenly over the retry hints of their priority, each
	// a window (Within > 0: the devices draw within it) or a point (the
	// policy's jitter above it), as the servers send them.
	admit(now time.Time, work float64, demand []int64, open []int64) (admitted, sever []int64, hints [][]limit.Retry)
	// observe feeds the step's handshake latency and work in flight.
	observe(now time.Time, latency time.Duration, inflight float64, served int64, dropped bool)
	// limit returns the current limit on handshakes in flight.
	limit() int
	// stage returns the shedding stage, 0 (normal) to answer.MaxStage.
	stage() int
}
