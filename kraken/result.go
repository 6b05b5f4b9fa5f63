package kraken

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// Counts are counters by label (a priority "p0", "p1", "p2"; a reason; a
// number of attempts).
type Counts map[string]int64

// add adds every counter of o to c.
func (c Counts) add(o Counts) {
	for k, v := range o {
		c[k] += v
	}
}

// addNested adds the nested counters of o to dst, creating inner maps.
func addNested(dst, o map[string]Counts) {
	for k, v := range o {
		if dst[k] == nil {
			dst[k] = Counts{}
		}
		dst[k].add(v)
	}
}

// Result is what a run measured. Every field is documented in
// kraken/README.md ("Result"). Results of agents that ran the same
// scenario from the same start merge exactly with Merge: counters add,
// series add second by second, histograms merge; the derived fields (peak,
// means, percentiles of recovery) are computed again from the merged
// data. A Result is not safe for concurrent use once Run has returned it.
type Result struct {
	Scenario string  `json:"scenario"`
	Agents   int     `json:"agents"`
	Devices  int64   `json:"devices"`
	Seconds  float64 `json:"seconds"`
	Stopped  string  `json:"stopped"`
	Held     int64   `json:"held"`

	Attempts          int64   `json:"attempts"`
	AttemptsPerSecond []int64 `json:"attempts_per_second"`
	HeldPerSecond     []int64 `json:"held_per_second"`
	// HeldMinPerSecond is the fewest sessions held at any sample of each
	// second (samples every 20 ms): a drop the devices recover from within
	// the second shows here, not in HeldPerSecond.
	HeldMinPerSecond []int64 `json:"held_min_per_second"`
	// FailuresPerSecond counts the failed attempts of each second by
	// priority; HeldByOrigin the sessions each origin (Welcome.node_id)
	// held at the end of each second.
	FailuresPerSecond map[string][]int64 `json:"failures_per_second"`
	HeldByOrigin      map[string][]int64 `json:"held_by_origin_per_second"`

	Welcomes    map[string]Counts `json:"welcomes"`
	Failures    map[string]Counts `json:"failures"`
	Disconnects map[string]Counts `json:"disconnects"`
	Terminal    Counts            `json:"terminal"`

	Latency Latency `json:"latency"`
	// TLSHandshakes counts the TLS handshakes of wss and grpcs attempts:
	// "full", and "resumed" (a session ticket of the device's last
	// server accepted).
	TLSHandshakes Counts   `json:"tls_handshakes"`
	Resumes       Resumes  `json:"resumes"`
	Messages      Messages `json:"messages"`
	Storms        []*Storm `json:"storms"`

	// Derived from the fields above (again after Merge).
	PeakAttemptsPerSecond int64   `json:"peak_attempts_per_second"`
	PeakHeld              int64   `json:"peak_held"`
	AttemptsPerDevice     float64 `json:"attempts_per_device"`
}

// Latency holds the latency histograms of a run.
type Latency struct {
	Connect *Histogram            `json:"connect"`
	Welcome *Histogram            `json:"welcome"`
	Resume  *Histogram            `json:"resume"`
	Deliver map[string]*Histogram `json:"deliver"`
	// TLS is the TLS handshake of a wss or grpcs attempt, from the TCP
	// connection to the handshake done (full and resumed together).
	TLS *Histogram `json:"tls"`
}

// Resumes counts the channels resumed after a reconnect.
type Resumes struct {
	Recovered int64 `json:"recovered"`
	Gaps      int64 `json:"gaps"`
}

// Messages counts what was published and what the devices received.
type Messages struct {
	Published       Counts `json:"published"`
	PublishFailures Counts `json:"publish_failures"`
	Received        Counts `json:"received"`
	Delivered       Counts `json:"delivered"`
	WireDuplicates  int64  `json:"wire_duplicates"`
	P0Expected      int64  `json:"p0_expected"`
	P0Lost          int64  `json:"p0_lost"`
	P0Duplicated    int64  `json:"p0_duplicated"`
}

// Storm is what one storm event did and how the devices came back.
type Storm struct {
	Kind      string  `json:"kind"`
	AtSeconds float64 `json:"at_seconds"`
	Share     float64 `json:"share,omitempty"`
	Origins   int     `json:"origins,omitempty"`
	// ForSeconds is how long a freeze or an unhealthy spell lasted (0: to
	// the end of the run).
	ForSeconds float64 `json:"for_seconds,omitempty"`
	// From is the region of a region drop or a move, To the region a
	// move sent the devices to.
	From string `json:"from,omitempty"`
	To   string `json:"to,omitempty"`
	// Error is why the storm's primitive failed (a process gone, an admin
	// page refusing); empty when it did what it should.
	Error   string `json:"error,omitempty"`
	Dropped int64  `json:"dropped"`
	Back    int64  `json:"back"`
	// BackAfter holds, per device back, the time from its drop to its
	// Welcome.
	BackAfter *Histogram `json:"back_after"`
	// BackSince holds, per device back, the time from the storm's start
	// (the moment its process began it) to its Welcome: the fleet's curve
	// after the storm, as the simulator counts it. It differs from
	// BackAfter by the time until each device lost its session (for a
	// drop, until this process cut it: the drop loop takes a while under a
	// large herd; for a server's close, until the close was read) and by
	// a drop spread over its `over`.
	BackSince *Histogram `json:"back_since"`
	// AttemptsToBack counts the devices back by the attempts they needed
	// ("1", "2", ...).
	AttemptsToBack Counts `json:"attempts_to_back"`
	// DroppedByPriority and BackAfterByPriority are Dropped and
	// BackAfter by the devices' priority ("p0", "p1", "p2"): whether P0
	// came back first.
	DroppedByPriority   Counts                `json:"dropped_by_priority"`
	BackAfterByPriority map[string]*Histogram `json:"back_after_by_priority"`

	// Tenant is a poison storm's tenant ("t0").
	Tenant string `json:"tenant,omitempty"`
	// Killed are the origins a poison storm killed (each origin that held
	// or welcomed a session of its tenant from its start on), in the order
	// of the kills.
	Killed []KilledOrigin `json:"killed,omitempty"`
	// Poisoned and Others are a poison storm's attempts of its tenant's
	// devices and of the other tenants' (those no poison of the run
	// names), from its start on.
	Poisoned *TenantAttempts `json:"poisoned,omitempty"`
	Others   *TenantAttempts `json:"others,omitempty"`

	// Derived: time until 50, 90, 99 and 100 % of the dropped devices
	// were back, in milliseconds; null when that share never came back.
	Back50Ms  *float64 `json:"back_50_ms"`
	Back90Ms  *float64 `json:"back_90_ms"`
	Back99Ms  *float64 `json:"back_99_ms"`
	Back100Ms *float64 `json:"back_100_ms"`
	// Derived: the same from the storm's start (BackSince).
	Since50Ms  *float64 `json:"since_50_ms"`
	Since90Ms  *float64 `json:"since_90_ms"`
	Since99Ms  *float64 `json:"since_99_ms"`
	Since100Ms *float64 `json:"since_100_ms"`
	// OthersSuccess (derived, poison storms) is the other tenants'
	// success: Others.Welcomes / (Others.Welcomes + Others.Failed), the
	// share of their attempts from the poison's start on that got a
	// Welcome; null when none ended.
	OthersSuccess *float64 `json:"others_success,omitempty"`
}

// KilledOrigin is one origin a poison storm killed.
type KilledOrigin struct {
	// Origin is the origin's node id (through an edge, the part of the
	// Welcome's node_id after the last "/").
	Origin string `json:"origin"`
	// AtSeconds is when the kill was asked for, in scenario time.
	AtSeconds float64 `json:"at_seconds"`
	// Error is why the kill failed; empty when it was done.
	Error string `json:"error,omitempty"`
}

// TenantAttempts counts the attempts of a group of tenants' devices from
// a poison's start on.
type TenantAttempts struct {
	// Attempts started from the poison's start on.
	Attempts int64 `json:"attempts"`
	// Welcomes and Failed are those attempts that got a Welcome, and
	// those that failed (any reason of failures); the rest were in flight
	// at the end.
	Welcomes int64 `json:"welcomes"`
	Failed   int64 `json:"failed"`
	// Lost is the held sessions that ended from the poison's start on.
	Lost int64 `json:"lost"`
	// HeldAtStart and HeldAtEnd are the sessions held when the poison
	// started and at the end of the run.
	HeldAtStart int64 `json:"held_at_start"`
	HeldAtEnd   int64 `json:"held_at_end"`
}

func (t *TenantAttempts) add(o *TenantAttempts) {
	if t == nil || o == nil {
		return
	}
	t.Attempts += o.Attempts
	t.Welcomes += o.Welcomes
	t.Failed += o.Failed
	t.Lost += o.Lost
	t.HeldAtStart += o.HeldAtStart
	t.HeldAtEnd += o.HeldAtEnd
}

func newStorm(kind string, at time.Duration) *Storm {
	s := &Storm{Kind: kind, AtSeconds: at.Seconds(), BackAfter: NewHistogram(), BackSince: NewHistogram(), AttemptsToBack: Counts{},
		DroppedByPriority: Counts{}, BackAfterByPriority: map[string]*Histogram{}}
	for _, p := range priorityLabels {
		s.BackAfterByPriority[p] = NewHistogram()
	}
	return s
}

// newResult returns an empty Result of one agent.
func newResult(name string) *Result {
	r := &Result{
		Scenario: name, Agents: 1,
		Welcomes: map[string]Counts{}, Failures: map[string]Counts{}, Disconnects: map[string]Counts{}, Terminal: Counts{},
		FailuresPerSecond: map[string][]int64{}, HeldByOrigin: map[string][]int64{},
		Latency:       Latency{Connect: NewHistogram(), Welcome: NewHistogram(), Resume: NewHistogram(), Deliver: map[string]*Histogram{}, TLS: NewHistogram()},
		TLSHandshakes: Counts{},
		Messages:      Messages{Published: Counts{}, PublishFailures: Counts{}, Received: Counts{}, Delivered: Counts{}},
	}
	for _, p := range priorityLabels {
		r.Latency.Deliver[p] = NewHistogram()
	}
	return r
}

// BackWithin returns the time until share (in (0, 1]) of the storm's
// dropped devices were back, and false when fewer came back.
func (s *Storm) BackWithin(share float64) (time.Duration, bool) {
	return s.within(s.BackAfter, share)
}

// SinceWithin is BackWithin from the storm's start (BackSince); false
// also for a result without BackSince (written before it existed).
func (s *Storm) SinceWithin(share float64) (time.Duration, bool) {
	return s.within(s.BackSince, share)
}

// within is the time of h, a histogram of the devices back, by which
// share of the dropped were back: its rank-th smallest time, quantile
// rank/back of it.
func (s *Storm) within(h *Histogram, share float64) (time.Duration, bool) {
	if s.Dropped == 0 || h == nil || h.Count() == 0 {
		return 0, false
	}
	rank := max(int64(math.Ceil(share*float64(s.Dropped)-1e-9)), 1)
	if rank > s.Back {
		return 0, false
	}
	return h.Quantile(100 * float64(rank) / float64(h.Count())), true
}

// derive computes the derived fields.
func (r *Result) derive() {
	r.PeakAttemptsPerSecond, r.PeakHeld = 0, 0
	for _, v := range r.AttemptsPerSecond {
		r.PeakAttemptsPerSecond = max(r.PeakAttemptsPerSecond, v)
	}
	for _, v := range r.HeldPerSecond {
		r.PeakHeld = max(r.PeakHeld, v)
	}
	r.AttemptsPerDevice = 0
	if r.Devices > 0 {
		r.AttemptsPerDevice = float64(r.Attempts) / float64(r.Devices)
	}
	for _, s := range r.Storms {
		ms := func(d time.Duration, ok bool) *float64 {
			if !ok {
				return nil
			}
			v := float64(d.Microseconds()) / 1000
			return &v
		}
		s.Back50Ms, s.Back90Ms, s.Back99Ms, s.Back100Ms = ms(s.BackWithin(0.5)), ms(s.BackWithin(0.9)), ms(s.BackWithin(0.99)), ms(s.BackWithin(1))
		s.Since50Ms, s.Since90Ms, s.Since99Ms, s.Since100Ms = ms(s.SinceWithin(0.5)), ms(s.SinceWithin(0.9)), ms(s.SinceWithin(0.99)), ms(s.SinceWithin(1))
		slices.SortStableFunc(s.Killed, func(a, b KilledOrigin) int { return cmp.Compare(a.AtSeconds, b.AtSeconds) })
		s.OthersSuccess = nil
		if o := s.Others; o != nil && o.Welcomes+o.Failed > 0 {
			v := float64(o.Welcomes) / float64(o.Welcomes+o.Failed)
			s.OthersSuccess = &v
		}
	}
}

// addSeries adds o to dst second by second.
func addSeries(dst, o []int64) []int64 {
	for len(dst) < len(o) {
		dst = append(dst, 0)
	}
	for i, v := range o {
		dst[i] += v
	}
	return dst
}

// addSeriesMap adds the series of o to dst's of the same key.
func addSeriesMap(dst, o map[string][]int64) map[string][]int64 {
	if dst == nil && len(o) > 0 {
		dst = map[string][]int64{}
	}
	for k, v := range o {
		dst[k] = addSeries(dst[k], v)
	}
	return dst
}

// Merge adds the result o of another agent of the same run into r. It
// fails, leaving r unchanged, when o ran another scenario or other storms.
func (r *Result) Merge(o *Result) error {
	if o.Scenario != r.Scenario {
		return fmt.Errorf("kraken: merging a result of scenario %q into one of %q", o.Scenario, r.Scenario)
	}
	if len(o.Storms) != len(r.Storms) {
		return errors.New("kraken: merging results with different storms")
	}
	for i, s := range o.Storms {
		if s.Kind != r.Storms[i].Kind || s.AtSeconds != r.Storms[i].AtSeconds || s.Tenant != r.Storms[i].Tenant {
			return fmt.Errorf("kraken: storm %d differs between the results (%s at %vs, %s at %vs)", i, r.Storms[i].Kind, r.Storms[i].AtSeconds, s.Kind, s.AtSeconds)
		}
	}
	r.Agents += o.Agents
	r.Devices += o.Devices
	r.Seconds = max(r.Seconds, o.Seconds)
	if r.Stopped == "" {
		r.Stopped = o.Stopped
	}
	r.Held += o.Held
	r.Attempts += o.Attempts
	r.AttemptsPerSecond = addSeries(r.AttemptsPerSecond, o.AttemptsPerSecond)
	r.HeldPerSecond = addSeries(r.HeldPerSecond, o.HeldPerSecond)
	r.HeldMinPerSecond = addSeries(r.HeldMinPerSecond, o.HeldMinPerSecond)
	r.FailuresPerSecond = addSeriesMap(r.FailuresPerSecond, o.FailuresPerSecond)
	r.HeldByOrigin = addSeriesMap(r.HeldByOrigin, o.HeldByOrigin)
	addNested(r.Welcomes, o.Welcomes)
	addNested(r.Failures, o.Failures)
	addNested(r.Disconnects, o.Disconnects)
	r.Terminal.add(o.Terminal)
	r.Latency.Connect.Merge(o.Latency.Connect)
	r.Latency.Welcome.Merge(o.Latency.Welcome)
	r.Latency.Resume.Merge(o.Latency.Resume)
	if r.Latency.TLS == nil {
		r.Latency.TLS = NewHistogram()
	}
	r.Latency.TLS.Merge(o.Latency.TLS)
	if r.TLSHandshakes == nil {
		r.TLSHandshakes = Counts{}
	}
	r.TLSHandshakes.add(o.TLSHandshakes)
	for p, h := range o.Latency.Deliver {
		if r.Latency.Deliver[p] == nil {
			r.Latency.Deliver[p] = NewHistogram()
		}
		r.Latency.Deliver[p].Merge(h)
	}
	r.Resumes.Recovered += o.Resumes.Recovered
	r.Resumes.Gaps += o.Resumes.Gaps
	m, om := &r.Messages, o.Messages
	m.Published.add(om.Published)
	m.PublishFailures.add(om.PublishFailures)
	m.Received.add(om.Received)
	m.Delivered.add(om.Delivered)
	m.WireDuplicates += om.WireDuplicates
	m.P0Expected += om.P0Expected
	m.P0Lost += om.P0Lost
	m.P0Duplicated += om.P0Duplicated
	for i, s := range o.Storms {
		d := r.Storms[i]
		d.Dropped += s.Dropped
		d.Back += s.Back
		d.BackAfter.Merge(s.BackAfter)
		if s.BackSince != nil {
			if d.BackSince == nil {
				d.BackSince = NewHistogram()
			}
			d.BackSince.Merge(s.BackSince)
		}
		d.AttemptsToBack.add(s.AttemptsToBack)
		if d.DroppedByPriority == nil {
			d.DroppedByPriority = Counts{}
		}
		d.DroppedByPriority.add(s.DroppedByPriority)
		for p, h := range s.BackAfterByPriority {
			if d.BackAfterByPriority == nil {
				d.BackAfterByPriority = map[string]*Histogram{}
			}
			if d.BackAfterByPriority[p] == nil {
				d.BackAfterByPriority[p] = NewHistogram()
			}
			d.BackAfterByPriority[p].Merge(h)
		}
		if d.Error == "" {
			d.Error = s.Error
		}
		d.Killed = append(d.Killed, s.Killed...) // derive puts them in time order
		d.Poisoned.add(s.Poisoned)
		d.Others.add(s.Others)
	}
	r.derive()
	return nil
}

// Total returns the sum of c's counters.
func (c Counts) Total() int64 {
	var n int64
	for _, v := range c {
		n += v
	}
	return n
}

// recorder is the live, concurrent side of a Result: what the devices and
// the publishers count while the run goes on. Its mutex guards the maps,
// the series and the storms (histograms have their own locks). It is held
// only for counter updates, never while calling out.
type recorder struct {
	start atomic.Int64 // UnixNano of the scenario's time 0

	mu  sync.Mutex
	res *Result
}

// second is the index of the run's second at t.
func (rec *recorder) second(t time.Time) int {
	return int(t.Sub(time.Unix(0, rec.start.Load())) / time.Second)
}

// attempt counts an attempt; those of the warm-up (before time 0) are in
// Attempts but not in the series.
func (rec *recorder) attempt(t time.Time) {
	s := rec.second(t)
	rec.mu.Lock()
	defer rec.mu.Unlock()
	rec.res.Attempts++
	if s < 0 {
		return
	}
	for len(rec.res.AttemptsPerSecond) <= s {
		rec.res.AttemptsPerSecond = append(rec.res.AttemptsPerSecond, 0)
	}
	rec.res.AttemptsPerSecond[s]++
}

func (rec *recorder) count(m map[string]Counts, key string, prio int) {
	rec.mu.Lock()
	if m[key] == nil {
		m[key] = Counts{}
	}
	m[key][priorityLabels[prio]]++
	rec.mu.Unlock()
}

func (rec *recorder) failure(reason string, prio int) { rec.count(rec.res.Failures, reason, prio) }
func (rec *recorder) disconnect(reason string, prio int) {
	rec.count(rec.res.Disconnects, reason, prio)
}
func (rec *recorder) welcome(node string, prio int) { rec.count(rec.res.Welcomes, node, prio) }

func (rec *recorder) terminal(prio int) {
	rec.mu.Lock()
	rec.res.Terminal[priorityLabels[prio]]++
	rec.mu.Unlock()
}

// stormError keeps the first error of storm s.
func (rec *recorder) stormError(s int, err error) {
	rec.mu.Lock()
	if rec.res.Storms[s].Error == "" {
		rec.res.Storms[s].Error = err.Error()
	}
	rec.mu.Unlock()
}

// dropped counts a device of priority prio whose session storm s ended.
func (rec *recorder) dropped(s, prio int) {
	rec.mu.Lock()
	rec.res.Storms[s].Dropped++
	rec.res.Storms[s].DroppedByPriority[priorityLabels[prio]]++
	rec.mu.Unlock()
}

// back records a device of storm s and priority prio back at now, d
// after its drop, after attempts attempts.
func (rec *recorder) back(s int, now time.Time, d time.Duration, attempts, prio int) {
	rec.mu.Lock()
	st := rec.res.Storms[s]
	st.Back++
	st.AttemptsToBack[strconv.Itoa(attempts)]++
	rec.mu.Unlock()
	st.BackAfter.Record(d)
	// The storm began at its time in the run (runner.fireStorm starts at
	// the run's start plus its at).
	began := time.Unix(0, rec.start.Load()).Add(time.Duration(st.AtSeconds * float64(time.Second)))
	st.BackSince.Record(max(0, now.Sub(began)))
	st.BackAfterByPriority[priorityLabels[prio]].Record(d)
}

// failedAt counts a failed attempt of priority prio in the second of t.
func (rec *recorder) failedAt(t time.Time, prio int) {
	s := rec.second(t)
	if s < 0 {
		return
	}
	rec.mu.Lock()
	rec.res.FailuresPerSecond[priorityLabels[prio]] = grow(rec.res.FailuresPerSecond[priorityLabels[prio]], s)
	rec.res.FailuresPerSecond[priorityLabels[prio]][s]++
	rec.mu.Unlock()
}

// heldByOrigin records the sessions each origin holds at t (the last
// sample of a second wins).
func (rec *recorder) heldByOrigin(t time.Time, held map[string]int64) {
	s := rec.second(t)
	if s < 0 {
		return
	}
	rec.mu.Lock()
	for node, n := range held {
		rec.res.HeldByOrigin[node] = grow(rec.res.HeldByOrigin[node], s)
		rec.res.HeldByOrigin[node][s] = n
	}
	rec.mu.Unlock()
}

// grow extends v with zeros to hold index s.
func grow(v []int64, s int) []int64 {
	for len(v) <= s {
		v = append(v, 0)
	}
	return v
}

// held records the sessions held at t (the last sample of a second wins).
func (rec *recorder) held(t time.Time, n int64) {
	s := rec.second(t)
	if s < 0 {
		return
	}
	rec.mu.Lock()
	for len(rec.res.HeldPerSecond) <= s {
		rec.res.HeldPerSecond = append(rec.res.HeldPerSecond, 0)
	}
	rec.res.HeldPerSecond[s] = n
	if len(rec.res.HeldMinPerSecond) <= s {
		rec.res.HeldMinPerSecond = grow(rec.res.HeldMinPerSecond, s)
		rec.res.HeldMinPerSecond[s] = n
	}
	rec.res.HeldMinPerSecond[s] = min(rec.res.HeldMinPerSecond[s], n)
	rec.mu.Unlock()
}

func (rec *recorder) messages(f func(m *Messages)) {
	rec.mu.Lock()
	f(&rec.res.Messages)
	rec.mu.Unlock()
}

// tlsHandshake records one TLS handshake that took d.
func (rec *recorder) tlsHandshake(d time.Duration, resumed bool) {
	rec.res.Latency.TLS.Record(d)
	kind := "full"
	if resumed {
		kind = "resumed"
	}
	rec.mu.Lock()
	rec.res.TLSHandshakes[kind]++
	rec.mu.Unlock()
}

func (rec *recorder) resume(recovered bool) {
	rec.mu.Lock()
	if recovered {
		rec.res.Resumes.Recovered++
	} else {
		rec.res.Resumes.Gaps++
	}
	rec.mu.Unlock()
}

var priorityLabels = [3]string{"p0", "p1", "p2"}
