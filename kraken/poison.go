package kraken

import (
	"cmp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// A poison tenant (traffic.poison[] {at, tenant}) is a tenant whose
// traffic crashes every origin it reaches, from `at` on: each origin that
// holds a session of the tenant at `at`, or welcomes one later, is killed
// through Config.Kill (KillRequest.Node names it), once. The origin of a
// session is its Welcome's node_id (through an edge "edge-1/hub-2": the
// part after the last "/"). What it killed and when is the storm's
// Killed; the attempts of the tenant's devices and of the others' from
// `at` on are its Poisoned and Others.

// poisons are the run's poison storms.
type poisons struct {
	storms []*poisonRun
	tenant []bool // by tenant: named by a poison of the run

	mu     sync.Mutex
	killed map[string]bool // origins asked to be killed
	done   bool            // the run ended: no more kills
	wg     sync.WaitGroup  // kills in flight
}

// poisonRun is one poison storm.
type poisonRun struct {
	storm  int // index in the plan's storms
	tenant uint16
	start  atomic.Int64 // UnixNano of its start; 0 before
}

func (p *poisons) init(pl *plan) {
	p.tenant = make([]bool, pl.tenants)
	p.killed = map[string]bool{}
	for i, s := range pl.storms {
		if s.kind == "poison" {
			p.storms = append(p.storms, &poisonRun{storm: i, tenant: uint16(s.tenant)})
			p.tenant[s.tenant] = true
		}
	}
}

// poisonEach calls f with every poison started by t and the tenant attempts of
// d's side of it: its tenant's, or the others' (nil for the tenant of
// another poison).
func (r *runner) poisonEach(d *device, t time.Time, f func(*TenantAttempts)) {
	if len(r.poison.storms) == 0 {
		return
	}
	at := t.UnixNano()
	for _, p := range r.poison.storms {
		s := p.start.Load()
		if s == 0 || at < s {
			continue
		}
		st := r.rec.res.Storms[p.storm]
		var ta *TenantAttempts
		switch {
		case d.tenant == p.tenant:
			ta = st.Poisoned
		case !r.poison.tenant[d.tenant]:
			ta = st.Others
		}
		if ta != nil {
			r.rec.mu.Lock()
			f(ta)
			r.rec.mu.Unlock()
		}
	}
}

// poisonAttempt counts an attempt of d started at t.
func (r *runner) poisonAttempt(d *device, t time.Time) {
	r.poisonEach(d, t, func(ta *TenantAttempts) { ta.Attempts++ })
}

// poisonFailed counts the failure of d's attempt started at t.
func (r *runner) poisonFailed(d *device, t time.Time) {
	r.poisonEach(d, t, func(ta *TenantAttempts) { ta.Failed++ })
}

// poisonLost counts a held session of d that ended at t.
func (r *runner) poisonLost(d *device, t time.Time) {
	r.poisonEach(d, t, func(ta *TenantAttempts) { ta.Lost++ })
}

// poisonWelcome counts the Welcome (from node) of d's attempt started at
// t, and kills node's origin when d's tenant is a poison one that has
// started. The device is up before this is called, so that a poison
// starting meanwhile finds it (poisonStart) if this does not see the
// start.
func (r *runner) poisonWelcome(d *device, t time.Time, node string) {
	r.poisonEach(d, t, func(ta *TenantAttempts) { ta.Welcomes++ })
	for _, p := range r.poison.storms {
		if p.tenant == d.tenant && p.start.Load() != 0 {
			r.poisonReached(p.storm, node)
			return
		}
	}
}

// poisonStart starts poison storm i: every origin that holds a session of
// its tenant now is killed.
func (r *runner) poisonStart(i int) {
	var p *poisonRun
	for _, q := range r.poison.storms {
		if q.storm == i {
			p = q
		}
	}
	var nodes []string
	var poisoned, others int64
	p.start.Store(time.Now().UnixNano())
	for _, d := range r.devices {
		d.mu.Lock()
		if d.state == stUp {
			switch {
			case d.tenant == p.tenant:
				poisoned++
				if d.node != nil {
					nodes = append(nodes, d.node.name)
				}
			case !r.poison.tenant[d.tenant]:
				others++
			}
		}
		d.mu.Unlock()
	}
	st := r.rec.res.Storms[i]
	r.rec.mu.Lock()
	st.Poisoned.HeldAtStart, st.Others.HeldAtStart = poisoned, others
	r.rec.mu.Unlock()
	for _, n := range nodes {
		r.poisonReached(i, n)
	}
}

// poisonReached kills the origin of node (a Welcome's node_id) for poison
// storm i, unless it was asked already or the run has ended. The kill
// runs on its own goroutine: a device's Welcome comes from the poller.
func (r *runner) poisonReached(i int, node string) {
	origin := node[strings.LastIndexByte(node, '/')+1:]
	pz := &r.poison
	pz.mu.Lock()
	if pz.done || pz.killed[origin] {
		pz.mu.Unlock()
		return
	}
	pz.killed[origin] = true
	pz.wg.Add(1)
	pz.mu.Unlock()
	at := time.Now()
	go func() {
		defer pz.wg.Done()
		_, err := r.cfg.Kill(r.ctx, KillRequest{Origins: 1, Node: origin})
		k := KilledOrigin{Origin: origin, AtSeconds: at.Sub(time.Unix(0, r.rec.start.Load())).Seconds()}
		if err != nil {
			k.Error = err.Error()
			r.cfg.Logger.Warn("kraken: a poison kill failed", "storm", i, "origin", origin, "err", err)
			r.rec.failure("kill_error", 0)
			r.rec.stormError(i, err)
		}
		r.rec.mu.Lock()
		st := r.rec.res.Storms[i]
		j, _ := slices.BinarySearchFunc(st.Killed, k.AtSeconds, func(x KilledOrigin, at float64) int { return cmp.Compare(x.AtSeconds, at) })
		st.Killed = slices.Insert(st.Killed, j, k)
		r.rec.mu.Unlock()
	}()
}

// poisonEnd stops the kills, waits for those in flight and counts the
// sessions each poison's sides hold at the end.
func (r *runner) poisonEnd() {
	if len(r.poison.storms) == 0 {
		return
	}
	r.poison.mu.Lock()
	r.poison.done = true
	r.poison.mu.Unlock()
	r.poison.wg.Wait()
	for _, d := range r.devices {
		d.mu.Lock()
		up := d.state == stUp
		d.mu.Unlock()
		if !up {
			continue
		}
		r.poisonEach(d, time.Now(), func(ta *TenantAttempts) { ta.HeldAtEnd++ })
	}
}
