package sim

import (
	"math"
	"slices"
	"time"

	"github.com/corralhq/corral/limit"
)

// Step advances the run by one time step. It does nothing once Done.
func (s *Sim) Step() {
	if s.Done() {
		return
	}
	t := s.now
	st := s.newStep(t)
	s.events(t, &st)
	s.updateHealth(t)
	s.feedbackTick(t)
	s.dns.refresh(t)
	for _, o := range s.origins {
		o.setRate(0, s.dts)
	}

	// Who tries to connect now: the waiting devices whose delay ends, and
	// the arrivals.
	s.due = s.wheel.take(t, s.due)
	s.due = s.arrivals(t, s.due, &st)
	s.demand = s.demand[:0]
	for range s.dns.routeCount() {
		s.demand = append(s.demand, 0)
	}
	for _, c := range s.due {
		st.Attempts += c.n
		s.demand[s.routeIndex(int(c.flow))] += float64(c.n)
	}
	s.routes = s.dns.routes(s.routes, s.sc.Edge.Pick, s.pickLoads, s.demand, len(s.origins))
	for _, c := range s.due {
		s.routeCohort(c)
	}
	for i, o := range s.origins {
		s.admit(t, i, o, &st)
	}
	// The edge hosts try another address of their answers for what an
	// origin refused at once, up to edge.attempts addresses per stream.
	for len(s.retry) > 0 {
		batch := s.retry
		s.retry, s.retry2 = s.retry2[:0], batch
		for _, r := range batch {
			s.routeRetry(r, &st)
		}
		for i, o := range s.origins {
			s.admit(t, i, o, &st)
		}
	}
	s.complete(t, &st)
	for _, o := range s.origins {
		o.work = max(0, o.work-o.mu)
		// Upstream connections left without a stream close at the end of
		// the step (a reconnect pays for its connection again).
		o.pool = math.Min(o.pool, math.Ceil(float64(o.conns+o.pending)/s.spc))
	}
	s.requests(&st)
	s.now++
	s.settleFails(t)
	s.finishStep(t, &st)
}

// events applies region loss and recovery, poison and mass disconnects.
func (s *Sim) events(t int, st *Step) {
	for _, r := range s.sc.Traffic.RegionLoss {
		at := stepsOf(r.At, s.dt)
		end := -1
		if r.For > 0 {
			end = at + max(1, stepsOf(r.For, s.dt))
		}
		for i, o := range s.origins {
			if o.region != r.Region {
				continue
			}
			if t == at && o.up {
				s.crash(i, st)
			}
			if t == end && !o.up {
				o.up, o.changedStep = true, t
			}
		}
	}
	if s.tenants != nil {
		// A poison tenant's held connections crash their origins.
		for tn, at := range s.poison {
			if at < 0 || t < at {
				continue
			}
			for i, o := range s.origins {
				if o.up && s.tenantConns(i, tn) > 0 {
					s.crash(i, st)
				}
			}
		}
	}
	for _, d := range s.drops {
		if t < d.start || t >= d.start+d.steps {
			continue
		}
		// Drop share/steps of the connections held at the start of the
		// window each step: of what is left, that is this fraction.
		j := t - d.start
		frac := (d.share / float64(d.steps)) / (1 - d.share*float64(j)/float64(d.steps))
		frac = min(1, max(0, frac))
		for i, o := range s.origins {
			if d.region != "" && o.region != d.region {
				continue
			}
			for f, n := range s.conn[i] {
				m := int64(math.Floor(float64(n)*frac + s.rng.Float64()))
				m = min(m, n)
				if m > 0 {
					s.addConn(i, f, -m)
					st.Dropped += m
					s.fail(cohort{flow: int32(f)}, m, limit.Retry{})
				}
			}
		}
	}
}

// crash takes origin i down: its connections drop and its queued
// handshakes are lost.
func (s *Sim) crash(i int, st *Step) {
	o := s.origins[i]
	o.up, o.changedStep = false, s.now
	o.epoch++ // handshakes queued before the crash are lost
	for f, n := range s.conn[i] {
		if n > 0 {
			s.addConn(i, f, -n)
			st.Dropped += n
			s.fail(cohort{flow: int32(f)}, n, limit.Retry{})
		}
	}
	o.work = 0
	o.pool = 0
}

func (s *Sim) tenantConns(o, tenant int) int64 {
	var n int64
	for f := tenant * s.nP; f < s.nF; f += s.nT * s.nP {
		for p := range s.nP {
			n += s.conn[o][f+p]
		}
	}
	return n
}

// updateHealth runs the health checks due at step t, on the state the
// previous step left: a check fails while the origin is down and, for
// stream checks, while it refuses new streams (origin.refusing). The DNS
// health view marks an origin unhealthy after threshold failed checks in
// a row and healthy again after threshold passed ones.
func (s *Sim) updateHealth(t int) {
	if t%s.checkAt != 0 {
		return
	}
	hc := s.sc.DNS.HealthCheck
	for i, o := range s.origins {
		fail := !o.up
		if hc.Kind == "stream" {
			fail = o.refusing(hc.Timeout)
		}
		if fail {
			o.checkFails++
			o.checkPasses = 0
		} else {
			o.checkPasses++
			o.checkFails = 0
		}
		switch {
		case s.health.up[i] && o.checkFails >= hc.Threshold:
			s.health.up[i] = false
		case !s.health.up[i] && o.checkPasses >= hc.Threshold:
			s.health.up[i] = true
		}
	}
}

// arrivals appends the devices that come online at step t.
func (s *Sim) arrivals(t int, dst []cohort, st *Step) []cohort {
	for wi, a := range s.sc.Traffic.Arrivals {
		at := stepsOf(a.At, s.dt)
		span := max(1, stepsOf(a.Over, s.dt))
		if t < at || t >= at+span {
			continue
		}
		frac := float64(t-at+1) / float64(span)
		for f, n := range s.waves[wi] {
			target := int64(math.Floor(float64(n) * frac))
			if t == at+span-1 {
				target = n
			}
			m := min(target-s.waveDone[wi][f], s.offline[f])
			if m <= 0 {
				continue
			}
			s.waveDone[wi][f] += m
			s.offline[f] -= m
			s.offPrio[s.prioOf(f)] -= m
			st.Arrivals += m
			dst = append(dst, cohort{flow: int32(f), n: m})
		}
	}
	return dst
}

// routeIndex is the index of flow f's route: its PoP, and its tenant
// when answers are per tenant.
func (s *Sim) routeIndex(f int) int {
	ri := s.popOf(f)
	if s.dns.perTenant {
		ri = ri*s.nT + s.tenantOf(f)
	}
	return ri
}

// pickLoads writes into dst the load the edge hosts of PoP k see on each
// origin of ans: their own streams there, infinite when the origin is
// down (its connections fail at once).
func (s *Sim) pickLoads(dst []float64, k int, ans []int) {
	for j, o := range ans {
		dst[j] = s.popLoad[k][o]
		if !s.origins[o].up {
			dst[j] = math.Inf(1)
		}
	}
}

// routeCohort sends the attempts of c to origins along its route.
func (s *Sim) routeCohort(c cohort) {
	rt := &s.routes[s.routeIndex(int(c.flow))]
	s.sendAlong(c, rt.origin, rt.share)
}

// sendAlong splits c over origins by shares (which add up to 1) and queues
// each part at its origin.
func (s *Sim) sendAlong(c cohort, origins []int, shares []float64) {
	if len(origins) == 1 {
		o := s.origins[origins[0]]
		o.arr = append(o.arr, c)
		return
	}
	out := s.split[:len(origins)]
	splitInto(out, c.n, shares, s.rng.Float64())
	for i, oi := range origins {
		if out[i] > 0 {
			d := c
			d.n = out[i]
			o := s.origins[oi]
			o.arr = append(o.arr, d)
		}
	}
}

// routeRetry sends a cohort refused at origin r.from to other addresses
// of the answers its edge hosts hold: the hosts behind a resolver whose
// answer names no other address fail it with the cause of the refusal.
func (s *Sim) routeRetry(r retryCohort, st *Step) {
	f := int(r.c.flow)
	origins, shares, none := s.dns.retryRoute(s.popOf(f), s.tenantOf(f), int(r.from), s.sc.Edge.Pick, s.pickLoads)
	lost := int64(math.Floor(float64(r.c.n)*none + s.rng.Float64()))
	lost = min(lost, r.c.n)
	if len(origins) == 0 {
		lost = r.c.n
	}
	if lost > 0 {
		s.deviceFail(r.c, lost, r.cause, nil, st)
	}
	if n := r.c.n - lost; n > 0 {
		c := r.c
		c.n = n
		s.sendAlong(c, origins, shares)
	}
}

// admit decides the fate of the attempts that reached origin i.
func (s *Sim) admit(t, i int, o *origin, st *Step) {
	arr := o.arr
	o.arr = o.arr[:0]
	if len(arr) == 0 {
		return
	}
	slices.SortFunc(arr, func(a, b cohort) int { return cmpKey(a.key(), b.key()) })
	if s.tenants != nil && o.up {
		for _, c := range arr {
			if at := s.poison[s.tenantOf(int(c.flow))]; at >= 0 && t >= at {
				s.crash(i, st)
				break
			}
		}
	}
	var demand int64
	for _, c := range arr {
		demand += c.n
	}
	o.stepAttempts += demand
	if !o.up {
		for _, c := range arr {
			s.reject(i, c, c.n, CauseDown, nil, st)
		}
		return
	}
	// The origin refuses attempts past its maximum of connections.
	free := max(0, o.maxConn-o.conns-o.willConn)
	if demand > free {
		arr = s.cut(i, arr, demand, free, CauseCapacity, nil, st)
		demand = free
	}
	if o.adm != nil {
		arr, demand = s.adaptiveAdmit(t, i, o, arr, st)
	} else if o.backlog > 0 {
		room := int64(max(0, o.backlog-o.work))
		if demand > room {
			arr = s.cut(i, arr, demand, room, CauseBacklog, nil, st)
			demand = room
		}
	}
	if demand == 0 {
		return
	}
	s.enqueue(t, i, o, arr, demand)
}

// cut keeps keep of the demand in arr at origin oi (proportionally over
// its cohorts) and refuses the rest with cause.
func (s *Sim) cut(oi int, arr []cohort, demand, keep int64, cause Cause, hints []limit.Retry, st *Step) []cohort {
	ratio := float64(keep) / float64(demand)
	u := s.rng.Float64()
	cum := 0.0
	var done int64
	out := arr[:0]
	for _, c := range arr {
		cum += float64(c.n) * ratio
		hi := min(int64(math.Floor(cum+u)), keep)
		k := max(0, min(hi-done, c.n))
		done += k
		if c.n-k > 0 {
			s.reject(oi, c, c.n-k, cause, hints, st)
		}
		if k > 0 {
			c.n = k
			out = append(out, c)
		}
	}
	return out
}

// reject records that origin oi refused n devices of c with cause. What
// an origin refuses at once (down, full, backlog full) its edge hosts try
// on another address while the stream has tries left (edge.attempts);
// the rest fail, spread over the retry hints they carry (none when hints
// is empty).
func (s *Sim) reject(oi int, c cohort, n int64, cause Cause, hints []limit.Retry, st *Step) {
	s.origins[oi].stepFail[cause] += n
	if retryable(cause) && int(c.try)+1 < s.sc.Edge.Attempts {
		d := c
		d.n = n
		d.try++
		s.retry = append(s.retry, retryCohort{c: d, from: int32(oi), cause: cause})
		return
	}
	s.deviceFail(c, n, cause, hints, st)
}

// retryable reports whether an edge host tries another address after a
// refusal for cause: the origin refused at once, before any work.
func retryable(c Cause) bool { return c == CauseDown || c == CauseCapacity || c == CauseBacklog }

// deviceFail fails n devices of c with cause: the devices see the error
// and back off.
func (s *Sim) deviceFail(c cohort, n int64, cause Cause, hints []limit.Retry, st *Step) {
	st.Errors[cause][s.prioOf(int(c.flow))] += n
	s.failHinted(c, n, hints)
}

// enqueue admits arr (demand devices in all) into the origin's handshake
// queue. Arrivals are spread evenly over the step and the origin serves
// them first in, first out at mu per step: the device at position x of the
// step's A arrivals comes at x/A of the step and finds the queue
// Q(x) = max(0, W + x - mu*x/A) ahead of it. It connects at the step its
// turn comes, or, when Q(x)/mu plus the idle handshake latency is past the
// connect timeout, gives up then while its handshake still costs the origin
// its work.
func (s *Sim) enqueue(t, i int, o *origin, arr []cohort, demand int64) {
	timeout := s.sc.Client.ConnectTimeout
	a := float64(demand)
	// Pooling: the edge hosts open a connection for every
	// streams_per_connection streams the pool grows by; the share of the
	// step's attempts that need one sets the origin's rate (setRate).
	need := math.Ceil(float64(o.conns+o.pending+demand) / s.spc)
	newC := max(0, need-o.pool)
	o.pool += newC
	o.newConns += newC
	o.setRate(math.Min(1, newC/a), s.dts)
	w0 := o.work
	okWork := (timeout - o.hl).Seconds() * o.muSec // queue a device may find and still make it
	grow := 1 - o.mu/a                             // dQ/dx
	var liveX float64
	switch {
	case w0 > okWork && grow >= 0:
		liveX = 0
	case grow <= 0:
		liveX = a // the queue only shrinks during the step
		if w0 > okWork {
			liveX = min(a, (w0-okWork)/-grow)
			liveX = a - liveX // the late part of the step makes it
		}
	default:
		liveX = min(a, (okWork-w0)/grow)
	}
	liveFrac := liveX / a
	tOut := max(1, stepsOf(timeout, s.dt))
	queueAt := func(x float64) float64 { return max(0, w0+x*grow) }
	chunks := min(16, max(1, int(math.Ceil(liveX/math.Max(o.mu, 1)))))
	var offs [16]int
	for j := range chunks {
		x := liveX * (float64(j) + 0.5) / float64(chunks)
		done := x/a*s.dts + queueAt(x)/o.muSec + o.hl.Seconds()
		offs[j] = int(done / s.dts)
	}
	for _, c := range arr {
		live := int64(math.Floor(float64(c.n)*liveFrac + s.rng.Float64()))
		live = min(live, c.n)
		if dead := c.n - live; dead > 0 {
			d := c
			d.n = dead
			s.pendAt(t+tOut, pending{origin: int32(i), epoch: o.epoch, c: d})
		}
		var done int64
		for j := range chunks {
			hi := live * int64(j+1) / int64(chunks)
			m := hi - done
			done = hi
			if m <= 0 {
				continue
			}
			d := c
			d.n = m
			s.pendAt(t+offs[j], pending{origin: int32(i), epoch: o.epoch, c: d, ok: true})
			o.willConn += m
		}
		o.pending += c.n
		s.popLoad[s.popOf(int(c.flow))][i] += float64(c.n)
	}
	o.work += a
	if o.adm != nil {
		meanQ := (w0 + max(0, w0+a-o.mu)) / 2
		wait := o.hl + time.Duration(meanQ/o.muSec*float64(time.Second))
		s.observe(t, o, wait, liveFrac < 1)
	}
}

func (s *Sim) pendAt(step int, p pending) {
	b := &s.pend[step%s.pendSize]
	*b = append(*b, p)
}

// complete finishes the handshakes due at step t.
func (s *Sim) complete(t int, st *Step) {
	b := s.pend[t%s.pendSize]
	s.pend[t%s.pendSize] = b[:0]
	for _, p := range b {
		o := s.origins[p.origin]
		o.pending -= p.c.n
		s.popLoad[s.popOf(int(p.c.flow))][p.origin] -= float64(p.c.n)
		prio := s.prioOf(int(p.c.flow))
		// Not retried on another address: the device's time is spent.
		switch {
		case p.ok && o.up && p.epoch == o.epoch:
			o.willConn -= p.c.n
			s.addConn(int(p.origin), int(p.c.flow), p.c.n)
			st.Successes[prio] += p.c.n
			o.fresh[prio] += p.c.n
			o.opened += p.c.n
		case p.ok:
			o.willConn -= p.c.n
			o.stepFail[CauseDown] += p.c.n
			s.deviceFail(p.c, p.c.n, CauseDown, nil, st)
		default:
			o.stepFail[CauseTimeout] += p.c.n
			s.deviceFail(p.c, p.c.n, CauseTimeout, nil, st)
		}
	}
}

// requests serves the requests of held connections and of the devices
// that just connected ("what did I miss").
func (s *Sim) requests(st *Step) {
	rps := s.sc.Client.RequestsPerSecond * s.dts
	catch := s.sc.Client.CatchupRequests
	for _, o := range s.origins {
		if o.maxReq <= 0 || !o.up {
			continue
		}
		demand := s.reqDemand[:s.nP]
		var total float64
		for p := range s.nP {
			demand[p] = float64(o.connPrio[p]) * rps
			total += demand[p]
		}
		for p := range s.nP {
			// Catch-up requests of this step's new connections.
			demand[p] += float64(o.fresh[p]) * catch
			total += float64(o.fresh[p]) * catch
		}
		st.Requests += int64(total)
		if total <= o.maxReq {
			continue
		}
		if o.adm != nil {
			// Staged shedding: the lowest priorities lose first.
			left := o.maxReq
			for p := range s.nP {
				served := min(demand[p], left)
				left -= served
				st.RequestErrors[p] += int64(demand[p] - served)
			}
			continue
		}
		ratio := o.maxReq / total
		for p := range s.nP {
			st.RequestErrors[p] += int64(demand[p] * (1 - ratio))
		}
	}
}

// settleFails draws the next delay of every device that failed in step t,
// once per distinct cohort, in key order: those without a hint or with a
// point hint, then those with a retry window.
func (s *Sim) settleFails(t int) {
	s.failKeys = s.failKeys[:0]
	for k := range s.fails {
		s.failKeys = append(s.failKeys, k)
	}
	slices.Sort(s.failKeys)
	for _, p := range s.failKeys {
		fk := unpackFail(p)
		s.spread.spread(s.wheel, t, fk.key, limit.Retry{After: time.Duration(fk.hint) * s.dt}, s.fails[p], hashU(uint64(t), p))
	}
	clear(s.fails)
	s.windowKeys = s.windowKeys[:0]
	for k := range s.windowFails {
		s.windowKeys = append(s.windowKeys, k)
	}
	slices.SortFunc(s.windowKeys, cmpWindowFail)
	for _, wf := range s.windowKeys {
		u0 := hashU(uint64(t), wf.key, uint64(wf.retry.After), uint64(wf.retry.Within))
		s.spread.spread(s.wheel, t, unpack(wf.key), wf.retry, s.windowFails[wf], u0)
	}
	clear(s.windowFails)
}

// hashU maps its arguments to a number in [0, 1), independent of the
// order in which a map hands out the keys.
func hashU(xs ...uint64) float64 {
	h := uint64(0x9e3779b97f4a7c15)
	for _, x := range xs {
		h ^= x + 0x9e3779b97f4a7c15 + (h << 6) + (h >> 2)
		h ^= h >> 31
		h *= 0xbf58476d1ce4e5b9
		h ^= h >> 29
	}
	return float64(h>>11) / (1 << 53)
}
