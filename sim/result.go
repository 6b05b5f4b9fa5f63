package sim

import (
	"time"

	"github.com/corralhq/corral/authdns/answer"
)

// Cause is why a connection attempt failed.
type Cause int

// The causes of a failed attempt and the status an edge in front of the
// origin would return for each.
const (
	// CauseDown: the origin is down (502).
	CauseDown Cause = iota
	// CauseBacklog: the origin's handshake backlog was full (503).
	CauseBacklog
	// CauseCapacity: the origin holds its maximum of connections (503).
	CauseCapacity
	// CauseShed: adaptive admission turned the attempt away with a
	// retry-after hint (503).
	CauseShed
	// CauseTimeout: the handshake did not finish within the client's
	// connect timeout (504).
	CauseTimeout
	// NumCauses is the number of causes.
	NumCauses
)

var causeNames = [NumCauses]string{"down", "backlog", "capacity", "shed", "timeout"}

// String returns the cause's name as reports spell it.
func (c Cause) String() string {
	if c >= 0 && c < NumCauses {
		return causeNames[c]
	}
	return "unknown"
}

// CauseNames returns the names of the causes in Cause order.
func CauseNames() []string { return append([]string(nil), causeNames[:]...) }

// Step is what happened during one time step. Counts are devices (or
// requests) in the step; slices by priority follow Result.Priorities and
// slices by origin follow Result.Origins.
type Step struct {
	// T is the start of the step, in seconds of event time.
	T float64 `json:"t"`
	// Connected is the number of devices holding a connection at the end
	// of the step.
	Connected           int64   `json:"connected"`
	ConnectedByPriority []int64 `json:"connected_by_priority"`
	// Connecting devices have an attempt in flight at an origin.
	Connecting int64 `json:"connecting"`
	// Waiting devices wait out a backoff delay.
	Waiting int64 `json:"waiting"`
	// Offline devices have not arrived yet (or never do).
	Offline int64 `json:"offline"`
	// Arrivals is the number of devices that came online.
	Arrivals int64 `json:"arrivals"`
	// Dropped is the number of held connections that were lost.
	Dropped int64 `json:"dropped"`
	// Attempts is the number of connection attempts started; AttemptsPerSec
	// is the same per second of event time.
	Attempts       int64   `json:"attempts"`
	AttemptsPerSec float64 `json:"attempts_per_sec"`
	// Successes by priority: attempts that ended with a connection.
	Successes []int64 `json:"successes"`
	// Errors by cause, then by priority: attempts that failed.
	Errors [NumCauses][]int64 `json:"errors"`
	// Requests is the number of requests sent on held connections;
	// RequestErrors by priority those that failed for lack of capacity.
	Requests      int64   `json:"requests"`
	RequestErrors []int64 `json:"request_errors"`
	// FiveXXRate is the share of attempts and requests that got a 5xx
	// answer (every failed attempt or request). It mixes two kinds of
	// traffic of very different sizes; AttemptErrorRate and
	// RequestErrorRate tell them apart.
	FiveXXRate float64 `json:"five_xx_rate"`
	// AttemptErrors is the number of connection attempts that failed (the
	// sum of Errors); AttemptErrorRate is AttemptErrors over Attempts (0
	// without attempts). An attempt is a device's: the edge's retry of
	// another address is part of the same attempt.
	AttemptErrors    int64   `json:"attempt_errors"`
	AttemptErrorRate float64 `json:"attempt_error_rate"`
	// RequestErrorRate is the sum of RequestErrors over Requests (0
	// without requests): requests on held streams, apart from attempts.
	RequestErrorRate float64 `json:"request_error_rate"`
	// Origins is the state of each origin at the end of the step.
	Origins []OriginStep `json:"origins"`
	// BigResolvers is the number of resolvers classed big, by their
	// query share or their audience, at the end of the step
	// (dns.resolvers; 0 and left out otherwise).
	BigResolvers int `json:"big_resolvers,omitempty"`
}

// OriginStep is one origin at the end of a step.
type OriginStep struct {
	// Connected is the number of connections it holds.
	Connected int64 `json:"connected"`
	// Utilisation is Connected over its maximum of connections.
	Utilisation float64 `json:"utilisation"`
	// Queue is the handshake work waiting, in handshakes (abandoned ones
	// included: the origin still works on them).
	Queue float64 `json:"queue"`
	// Limit is the adaptive limit on handshakes in flight (0 in errors
	// mode).
	Limit int `json:"limit,omitempty"`
	// Up is false while the origin is down; Healthy is what the DNS
	// health view believes of it at the end of the step.
	Up      bool `json:"up"`
	Healthy bool `json:"healthy"`
	// Attempts is the number of stream set-ups that reached the origin in
	// the step (an edge's retry on another address counts at each origin
	// it reaches); Failures those it refused or that timed out there,
	// by cause (Result.Causes).
	Attempts int64            `json:"attempts"`
	Failures [NumCauses]int64 `json:"failures"`
	// Connections is the number of pooled upstream connections edge hosts
	// hold to the origin (equal to Connected without pooling);
	// NewConnections those opened in the step (each a TLS handshake at
	// the origin).
	Connections    int64 `json:"connections"`
	NewConnections int64 `json:"new_connections"`
	// WeightFactor is the factor of its DNS weight load feedback gives it
	// at the end of the step (its effective weight is its configured
	// weight times this; 1 once its last report is older than the
	// feedback timeout), 0 without feedback.
	WeightFactor float64 `json:"weight_factor,omitempty"`
}

// Result is a whole run.
type Result struct {
	// Scenario is the scenario's name and Variant the sweep combination
	// ("" without a sweep).
	Scenario string `json:"scenario"`
	Variant  string `json:"variant,omitempty"`
	// Seed is the seed the run used.
	Seed uint64 `json:"seed"`
	// Draw numbers the run among the Draws runs of its variant (from 1,
	// at the seeds of scenario's sim.draws); both are 0 when the scenario
	// draws once.
	Draw  int `json:"draw,omitempty"`
	Draws int `json:"draws,omitempty"`
	// Devices is the population after the scenario's Scale.
	Devices int64 `json:"devices"`
	// Step is the time step in seconds.
	Step float64 `json:"step_seconds"`
	// Priorities, Origins and Causes name the entries of the per-priority,
	// per-origin and per-cause slices of each Step.
	Priorities []string `json:"priorities"`
	Origins    []string `json:"origins"`
	Causes     []string `json:"causes"`
	// Summary condenses the run; Steps is its series, one per step.
	Summary Summary `json:"summary"`
	Steps   []Step  `json:"steps,omitempty"`
}

// Summary condenses a run.
type Summary struct {
	// PeakConnected and FinalConnected count devices.
	PeakConnected  int64 `json:"peak_connected"`
	FinalConnected int64 `json:"final_connected"`
	// Attempts, Successes and Errors are totals over the run.
	Attempts        int64            `json:"attempts"`
	PeakAttemptsSec float64          `json:"peak_attempts_per_sec"`
	Successes       int64            `json:"successes"`
	Errors          map[string]int64 `json:"errors"`
	// AttemptErrors is the number of attempts that failed (the sum of
	// Errors).
	AttemptErrors int64 `json:"attempt_errors"`
	// ErrorsByPriority totals failed attempts per priority.
	ErrorsByPriority []int64 `json:"errors_by_priority"`
	Requests         int64   `json:"requests"`
	RequestErrors    int64   `json:"request_errors"`
	// FiveXXPeak is the highest step 5xx rate; FiveXXAverage is every 5xx
	// over every attempt and request of the run; FiveXXEvent is the same
	// over the event: from the first scheduled event to the step the fleet
	// settled (or the end of the run).
	FiveXXPeak    float64 `json:"five_xx_peak"`
	FiveXXAverage float64 `json:"five_xx_average"`
	FiveXXEvent   float64 `json:"five_xx_event"`
	// AttemptErrorPeak is the highest AttemptErrorRate over the steps
	// with at least PeakMinAttempts attempts (a step of three attempts
	// and one failure is no peak): PeakMinAttempts is one attempt per
	// 10,000 devices of the run, at least 100. AttemptErrorPeakAt is the
	// start of that step in seconds (-1 when no step qualifies).
	// AttemptErrorAverage and AttemptErrorEvent are failed attempts over
	// attempts, over the run and over the event (as FiveXXEvent).
	AttemptErrorPeak    float64 `json:"attempt_error_peak"`
	AttemptErrorPeakAt  float64 `json:"attempt_error_peak_at"`
	PeakMinAttempts     int64   `json:"peak_min_attempts"`
	AttemptErrorAverage float64 `json:"attempt_error_average"`
	AttemptErrorEvent   float64 `json:"attempt_error_event"`
	// AttemptErrorSeconds is how long the attempt error rate stayed above
	// 1 % (steps with at least PeakMinAttempts attempts), in seconds.
	AttemptErrorSeconds float64 `json:"attempt_error_seconds"`
	// RequestErrorPeak and RequestErrorAverage are the same for requests
	// on held streams (RequestErrorPeak over steps with at least
	// PeakMinAttempts requests).
	RequestErrorPeak    float64 `json:"request_error_peak"`
	RequestErrorAverage float64 `json:"request_error_average"`
	// PeakNewShare is the highest share of a step's stream set-ups that
	// one origin received (steps with at least PeakMinAttempts attempts);
	// PeakNewShareOrigin is that origin's index in Result.Origins.
	PeakNewShare       float64 `json:"peak_new_share"`
	PeakNewShareOrigin int     `json:"peak_new_share_origin"`
	// P0Downtime is the mean time a P0 device that was online spent without
	// a connection, in seconds; P0DowntimeDeviceSec is the total.
	P0Downtime          float64 `json:"p0_downtime_sec"`
	P0DowntimeDeviceSec float64 `json:"p0_downtime_device_sec"`
	// PeakUtilisation is the highest Connected/max over origins and steps.
	PeakUtilisation float64 `json:"peak_utilisation"`
	// PeakImbalance is the highest ratio of the busiest up origin's
	// connections to the mean over up origins.
	PeakImbalance float64 `json:"peak_imbalance"`
	// TimeToSettle is the time after the last scheduled event until the
	// run is settled for good, in seconds: from that step to the end of
	// the run at least 99 % of the devices online hold a connection and
	// at most 1 % of the requests on held streams fail. -1 when the end
	// of the run is not settled.
	TimeToSettle float64 `json:"time_to_settle_sec"`
	// Tenants summarises tenant isolation when the scenario has poison.
	Tenants *TenantSummary `json:"tenants,omitempty"`
	// Resolvers counts resolver-aware answers when dns.resolvers is on.
	Resolvers *ResolverSummary `json:"resolvers,omitempty"`
	// Elapsed is the wall time of the run.
	Elapsed time.Duration `json:"elapsed_ns"`
}

// TenantSummary measures the blast radius of a poison tenant.
type TenantSummary struct {
	// Tenants is the number of tenants besides the poison ones.
	Tenants int `json:"tenants"`
	// Affected is the share of them that had at least one failed attempt
	// after the poison started.
	Affected float64 `json:"affected"`
	// FullyDown is the share of them that had no connection at all at some
	// step after the poison started.
	FullyDown float64 `json:"fully_down"`
	// PredictedAffected and PredictedFullyDown are the exact shares of the
	// shard package's hypergeometric maths: the probability that a hand
	// shares at least one, and all, of its workers with the poison hand.
	PredictedAffected  float64 `json:"predicted_affected"`
	PredictedFullyDown float64 `json:"predicted_fully_down"`
}

// ResolverSummary counts resolver-aware answers (dns.resolvers) over the
// run, as authdns's corral_dns_resolver_* metrics count them: by class,
// in answer.Class order (small, big).
type ResolverSummary struct {
	// Resolvers is the number of resolvers modelled.
	Resolvers int `json:"resolvers"`
	// PeakBig is the most resolvers classed big by their query share at
	// once, first at PeakBigAt (seconds; -1 when none ever was).
	PeakBig   int     `json:"peak_big"`
	PeakBigAt float64 `json:"peak_big_at"`
	// Queries counts the resolvers' queries by the class they were
	// answered as, Records the records of those answers: Records over
	// Queries is the mean records per answer of each class.
	Queries [answer.NumClasses]int64 `json:"queries"`
	Records [answer.NumClasses]int64 `json:"records"`
	// With dns.resolvers.audience: AudienceBigAtStart is the resolvers
	// whose learned audience classed them big at step 0 (what the
	// replay of the steady state before the run taught), PeakAudienceBig
	// the most at once over the run, first at PeakAudienceBigAt
	// (seconds; -1 when none ever was). A query is big when its
	// resolver's query share or its audience is.
	AudienceBigAtStart int     `json:"audience_big_at_start,omitempty"`
	PeakAudienceBig    int     `json:"peak_audience_big,omitempty"`
	PeakAudienceBigAt  float64 `json:"peak_audience_big_at,omitempty"`
}
