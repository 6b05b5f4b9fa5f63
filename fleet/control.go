package fleet

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/corralhq/corral/hub"
	"github.com/corralhq/corral/limit"
)

// gate is the admission policy fleet puts in front of each hub's own
// (hub.Options.Overload): it passes every call through, and while the hub
// is paused it holds each new session's admission until the hub is
// resumed, killed or shut down. A nil inner policy admits everything.
type gate struct {
	inner hub.Overload

	mu     sync.Mutex
	paused chan struct{} // non-nil while paused; closed on resume
}

var _ hub.Overload = (*gate)(nil)

// newGate wraps the hub's admission policy in a gate and installs it in
// o; a hub without one (o.Overload nil, overload.enabled off) gets no gate
// (nil), so that it keeps the hub's no-admission fast path and cannot be
// paused. A hub whose overload control is on builds its own Shedder and
// exports its metrics only when it holds a *limit.Shedder itself, so the
// gate builds that Shedder and registers its metrics in reg under the
// names the hub would give them (corral_hub_overload_...).
func newGate(cfg hub.Config, o *hub.Options, reg prometheus.Registerer) (*gate, error) {
	if o.Overload == nil && !cfg.Overload.Enabled {
		return nil, nil
	}
	g := &gate{inner: o.Overload}
	if g.inner == nil {
		sh, err := limit.NewShedder(cfg.Overload.Shedder)
		if err != nil {
			return nil, fmt.Errorf("overload.shedder: %w", err)
		}
		if _, err := limit.NewCollector(limit.MetricsConfig{Registerer: reg, Subsystem: "hub_overload", Shedder: sh}); err != nil {
			return nil, err
		}
		g.inner = sh
	}
	o.Overload = g
	return g, nil
}

// AdmitAt waits while the hub is paused, then asks the inner policy.
func (g *gate) AdmitAt(p limit.Priority, now time.Time) limit.Decision {
	g.mu.Lock()
	wait := g.paused
	g.mu.Unlock()
	if wait != nil {
		<-wait
		now = time.Now()
	}
	if g.inner == nil {
		return limit.Decision{Admit: true}
	}
	return g.inner.AdmitAt(p, now)
}

// SeverQuotaAt asks the inner policy.
func (g *gate) SeverQuotaAt(open limit.Counts, now time.Time) limit.Counts {
	if g.inner == nil {
		return limit.Counts{}
	}
	return g.inner.SeverQuotaAt(open, now)
}

// RetryWindowAt asks the inner policy.
func (g *gate) RetryWindowAt(p limit.Priority, now time.Time) limit.Retry {
	if g.inner == nil {
		return limit.Retry{}
	}
	return g.inner.RetryWindowAt(p, now)
}

// Observe hands a handshake latency to the inner policy when it learns
// from them (as *limit.Shedder does).
func (g *gate) Observe(d time.Duration) {
	if o, ok := g.inner.(interface{ Observe(time.Duration) }); ok {
		o.Observe(d)
	}
}

// ObserveResources hands the hub's heap and descriptors to the inner
// policy when it learns from them.
func (g *gate) ObserveResources(heap uint64, fds int) {
	if o, ok := g.inner.(interface{ ObserveResources(uint64, int) }); ok {
		o.ObserveResources(heap, fds)
	}
}

// pause starts holding admissions; false when already paused.
func (g *gate) pause() bool {
	if g == nil {
		return false
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.paused != nil {
		return false
	}
	g.paused = make(chan struct{})
	return true
}

// release lets the held admissions go; false when not paused (or no
// gate).
func (g *gate) release() bool {
	if g == nil {
		return false
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.paused == nil {
		return false
	}
	close(g.paused)
	g.paused = nil
	return true
}

func (g *gate) isPaused() bool {
	if g == nil {
		return false
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.paused != nil
}

// HubState is what has been done to a hub: "up", "paused" or "killed".
func (f *Fleet) HubState(i int) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	h, err := f.hubLocked(i)
	switch {
	case err != nil:
		return "", err
	case h.killed:
		return "killed", nil
	case h.gate.isPaused():
		return "paused", nil
	}
	return "up", nil
}

func (f *Fleet) hubLocked(i int) (*Hub, error) {
	if i < 0 || i >= len(f.hubs) {
		return nil, fmt.Errorf("fleet: no hub %d (the fleet has %d, from 0)", i, len(f.hubs))
	}
	return f.hubs[i], nil
}

// PauseHub pauses hub i: every new session's handshake waits at the hub's
// admission until ResumeHub (or KillHub, or Shutdown); the sessions it
// holds keep flowing and its ports keep answering, so its health check
// stays green and DNS keeps it (as a stopped process's kernel keeps
// accepting). It is the in-process stand-in for SIGSTOP: the edges see
// the handshakes of one origin stall. The hold is at the hub's admission:
// a hub without an admission policy (no Options.Overload from
// Options.Hub, overload.enabled off) cannot be paused, nor a killed one.
func (f *Fleet) PauseHub(i int) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	h, err := f.hubLocked(i)
	if err != nil {
		return err
	}
	if h.killed {
		return fmt.Errorf("fleet: hub %d is stopped", i)
	}
	if h.gate == nil {
		return fmt.Errorf("fleet: hub %d has no admission to hold (turn its overload control on)", i)
	}
	if !h.gate.pause() {
		return fmt.Errorf("fleet: hub %d is already paused", i)
	}
	return nil
}

// ResumeHub lets the handshakes a paused hub i held go on.
func (f *Fleet) ResumeHub(i int) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	h, err := f.hubLocked(i)
	if err != nil {
		return err
	}
	if !h.gate.release() {
		return fmt.Errorf("fleet: hub %d is not paused", i)
	}
	return nil
}

// Policy is the routing policy the origin record answers with now.
func (f *Fleet) Policy() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.policy
}

// Switchable are the policies SetPolicy takes.
var Switchable = []string{"multivalue", "weighted", "weighted-subset"}

// SetPolicy switches the origin record to policy, one of Switchable,
// while the fleet runs (the DNS server's reload: the health checks keep
// their state). Any other value is an error and changes nothing.
func (f *Fleet) SetPolicy(policy string) error {
	if !slices.Contains(Switchable, policy) {
		return fmt.Errorf("fleet: policy %q: want one of %s", policy, strings.Join(Switchable, ", "))
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.dns == nil {
		return errors.New("fleet: not running")
	}
	cfg, err := f.dnsConfig(policy)
	if err != nil {
		return err
	}
	if err := f.dns.Reload(cfg); err != nil {
		return fmt.Errorf("fleet: dns: %w", err)
	}
	f.policy = policy
	return nil
}

// DropSessions cuts share (0 to 1) of every edge's device sessions, each
// without a frame, as a flapping route would: the devices reconnect by
// their backoff. It returns how many it cut.
func (f *Fleet) DropSessions(share float64) (int, error) {
	if !(share > 0 && share <= 1) {
		return 0, fmt.Errorf("fleet: drop share %v: want more than 0 and at most 1", share)
	}
	n := 0
	for _, e := range f.Edges() {
		if !e.stopped {
			n += e.Drop(share)
		}
	}
	return n, nil
}
