package health

import (
	"context"
	"fmt"
	"log/slog"
	"time"
)

// Observe applies an outcome of the named check measured elsewhere (nil
// err is a pass), as if a probe had ended now; it returns the state after.
// The cohort simulator and tests use it to drive checks without I/O.
func (c *Checker) Observe(name string, err error) (bool, error) {
	return c.ObserveAt(name, err, c.now())
}

// ObserveAt is Observe with the time of the outcome given.
func (c *Checker) ObserveAt(name string, err error, at time.Time) (bool, error) {
	ch := c.tab.Load().byName[name]
	if ch == nil {
		return false, fmt.Errorf("health: unknown check %q", name)
	}
	if ch.prober == nil {
		return false, fmt.Errorf("health: check %q is calculated; it takes no outcomes", name)
	}
	return c.apply(ch, err, false, 0, at), nil
}

// apply records one probe outcome of ch and moves its state when a
// threshold is reached; it returns the state after.
func (c *Checker) apply(ch *check, err error, timeout bool, lat time.Duration, at time.Time) bool {
	c.tmu.Lock()
	if ch.removed {
		// The check left the configuration while this probe ran; its
		// successor of the same name (if any) owns the state now.
		c.tmu.Unlock()
		return c.Healthy(ch.cfg.Name)
	}
	ch.mu.Lock()
	ch.probes++
	ch.lastProbe, ch.lastLatency = at, lat
	if err == nil {
		ch.oks, ch.fails, ch.lastErr = ch.oks+1, 0, ""
	} else {
		ch.fails, ch.oks, ch.lastErr = ch.fails+1, 0, err.Error()
	}
	change, changed := ch.evaluate(at)
	healthy := ch.state.healthy.Load()
	ch.mu.Unlock()
	var changes []Change
	outcome := OutcomeSuccess
	switch {
	case timeout:
		outcome = OutcomeTimeout
	case err != nil:
		outcome = OutcomeFailure
	}
	c.m.results.WithLabelValues(ch.cfg.Name, outcome).Inc()
	if changed {
		changes = append(changes, change)
		changes = append(changes, c.recalc(c.tab.Load(), at)...)
	}
	c.record(changes)
	c.tmu.Unlock()
	c.deliver()
	return healthy
}

// evaluate moves a probed check's state when its counters reach a
// threshold. The caller holds ch.mu.
func (ch *check) evaluate(at time.Time) (Change, bool) {
	if ch.forced {
		return Change{}, false
	}
	cur := ch.state.healthy.Load()
	var reason string
	switch {
	case cur && ch.fails >= ch.cfg.FailureThreshold:
		reason = fmt.Sprintf("%d consecutive failures, last: %s", ch.fails, ch.lastErr)
	case !cur && ch.oks >= ch.cfg.SuccessThreshold:
		reason = fmt.Sprintf("%d consecutive successes", ch.oks)
	default:
		return Change{}, false
	}
	ch.state.healthy.Store(!cur)
	ch.since = at
	return Change{Name: ch.cfg.Name, Healthy: !cur, At: at, Reason: reason}, true
}

// recalc recomputes the calculated checks of t, children first, and
// returns their changes. The caller holds tmu.
func (c *Checker) recalc(t *table, at time.Time) []Change {
	var changes []Change
	for _, ch := range t.calc {
		n := 0
		for _, child := range ch.children {
			if child.state.healthy.Load() {
				n++
			}
		}
		next := n >= ch.cfg.MinHealthy
		ch.mu.Lock()
		ch.lastProbe = at
		ch.oks = n
		ch.fails = len(ch.children) - n
		ch.lastErr = ""
		if !next {
			ch.lastErr = fmt.Sprintf("%d of %d children healthy, need %d", n, len(ch.children), ch.cfg.MinHealthy)
		}
		if !ch.forced && ch.state.healthy.Load() != next {
			ch.state.healthy.Store(next)
			ch.since = at
			changes = append(changes, Change{Name: ch.cfg.Name, Healthy: next, At: at,
				Reason: fmt.Sprintf("%d of %d children healthy, need %d", n, len(ch.children), ch.cfg.MinHealthy)})
		}
		ch.mu.Unlock()
	}
	return changes
}

// record logs changes, counts them and queues them for the subscribers.
// The caller holds tmu, so the queue keeps the order of the changes.
func (c *Checker) record(changes []Change) {
	if len(changes) == 0 {
		return
	}
	c.qmu.Lock()
	c.pending = append(c.pending, changes...)
	c.qmu.Unlock()
	t := c.tab.Load()
	for _, ch := range changes {
		if t.byName[ch.Name] != nil {
			c.m.transition(ch.Name, ch.Healthy)
		}
		level, msg := slog.LevelInfo, "health check healthy"
		if !ch.Healthy {
			level, msg = slog.LevelWarn, "health check unhealthy"
		}
		var kind, target string
		if x := t.byName[ch.Name]; x != nil {
			kind, target = x.cfg.Kind, x.target
		}
		c.log.Log(context.Background(), level, msg, "check", ch.Name, "kind", kind, "target", target, "reason", ch.Reason)
	}
}

// Subscribe calls fn after every change of state, including those a
// reload makes. Calls come one at a time, in the order the changes
// happened, after the Checker's locks are released, usually on the
// goroutine that caused the change (when a delivery is already under way,
// its goroutine delivers the change instead). fn may call any method of
// the Checker; it should return quickly, as it holds up later deliveries
// (not probes, nor Healthy). The returned function ends the subscription.
func (c *Checker) Subscribe(fn func(Change)) (cancel func()) {
	s := &subscriber{fn: fn}
	c.subMu.Lock()
	cur := *c.subs.Load()
	next := append(append(make([]*subscriber, 0, len(cur)+1), cur...), s)
	c.subs.Store(&next)
	c.subMu.Unlock()
	return func() {
		c.subMu.Lock()
		defer c.subMu.Unlock()
		cur := *c.subs.Load()
		next := make([]*subscriber, 0, len(cur))
		for _, x := range cur {
			if x != s {
				next = append(next, x)
			}
		}
		c.subs.Store(&next)
	}
}

// deliver passes the queued changes to the subscribers, one call at a
// time and in order. When another goroutine is delivering already, it
// delivers these too and deliver returns at once; so a subscriber may call
// any method of the Checker without deadlock.
func (c *Checker) deliver() {
	c.qmu.Lock()
	if c.draining || len(c.pending) == 0 {
		c.qmu.Unlock()
		return
	}
	c.draining = true
	defer func() {
		c.qmu.Lock()
		c.draining = false
		c.qmu.Unlock()
	}()
	for len(c.pending) > 0 {
		batch := c.pending
		c.pending = nil
		c.qmu.Unlock()
		subs := *c.subs.Load()
		for _, ch := range batch {
			for _, s := range subs {
				s.fn(ch)
			}
		}
		c.qmu.Lock()
	}
	c.qmu.Unlock()
}

// Force pins the named check to a state until Unforce: probes go on and
// are counted, but do not move it. Forcing a child moves calculated
// parents. It fails for an unknown name.
func (c *Checker) Force(name string, healthy bool) error {
	return c.setForced(name, true, healthy)
}

// Unforce releases a check pinned by Force. A probed check at once takes
// the state its consecutive counters call for; a calculated check follows
// its children again.
func (c *Checker) Unforce(name string) error {
	return c.setForced(name, false, false)
}

func (c *Checker) setForced(name string, forced, healthy bool) error {
	c.tmu.Lock()
	t := c.tab.Load()
	ch := t.byName[name]
	if ch == nil {
		c.tmu.Unlock()
		return fmt.Errorf("health: unknown check %q", name)
	}
	at := c.now()
	var changes []Change
	ch.mu.Lock()
	ch.forced = forced
	switch {
	case forced && ch.state.healthy.Load() != healthy:
		ch.state.healthy.Store(healthy)
		ch.since = at
		changes = append(changes, Change{Name: name, Healthy: healthy, At: at, Reason: "forced"})
	case !forced && ch.prober != nil:
		if change, ok := ch.evaluate(at); ok {
			changes = append(changes, change)
		}
	}
	ch.mu.Unlock()
	changes = append(changes, c.recalc(t, at)...)
	c.record(changes)
	c.tmu.Unlock()
	c.deliver()
	return nil
}
