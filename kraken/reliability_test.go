package kraken

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/corralhq/corral/fleet"
	"github.com/corralhq/corral/scenario"
)

// loadShipped loads a file of scenarios/.
func loadShipped(t *testing.T, name string) *scenario.Scenario {
	t.Helper()
	sc, err := scenario.Load("../scenarios/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return sc
}

// fleetKill is Config.Kill on an in-process fleet: it kills the hubs from
// the last one down (the first one serves the publish API). A fleet's
// hubs run in this process, so a freeze (SIGSTOP) cannot be had; it is
// an error.
func fleetKill(f *fleet.Fleet) func(context.Context, KillRequest) (func() error, error) {
	var mu sync.Mutex
	next := len(f.Hubs()) - 1
	return func(_ context.Context, k KillRequest) (func() error, error) {
		if k.Freeze {
			return nil, fmt.Errorf("kraken: the fleet's hubs run in this process: no freeze")
		}
		mu.Lock()
		defer mu.Unlock()
		for range k.Origins {
			if next < 1 {
				return nil, fmt.Errorf("kraken: no hub left to kill but the publishing one")
			}
			if err := f.KillHub(next); err != nil {
				return nil, err
			}
			next--
		}
		return nil, nil
	}
}

// TestHubKillLosesNoP0 runs scenarios/reliability/hub-kill.yaml (300
// devices at its scale, through the fleet's two edges, P0 published at
// 20 per second) and kills one of the three hubs in the middle of the
// publishes: no P0 message is lost or duplicated at the application,
// every device of the dead hub is back, and at least 95 % of the resumes
// recovered from the replay (kraken's count of Subscribed{recovered}, and
// the edges' own count of resumes answered from their cache).
func TestHubKillLosesNoP0(t *testing.T) {
	f := startFleet(t)
	edgeResumes := func() (cached, all float64) {
		for _, e := range f.Edges() {
			h := metric(t, e.Registry, "corral_edge_replay_hits_total")
			c := metric(t, e.Registry, "corral_edge_replay_coalesced_total")
			m := metric(t, e.Registry, "corral_edge_replay_misses_total")
			cached, all = cached+h+c, all+h+c+m
		}
		return
	}
	cfg := fleetConfig(t, f)
	cfg.Targets = f.EdgeURLs()
	cfg.Resolver = ""
	cfg.Kill, cfg.Origins = fleetKill(f), 3
	var onKilled float64
	cached0, all0 := edgeResumes()
	var cached, all float64
	cfg.AtEnd = func() {
		cached, all = edgeResumes()
		onKilled = metric(t, f.Hubs()[2].Registry, "corral_hub_sessions")
	}
	res := runScenario(t, loadShipped(t, "reliability/hub-kill.yaml"), cfg)
	cached, all = cached-cached0, all-all0
	m := res.Messages
	t.Logf("P0 expected %d lost %d duplicated %d; resumes %+v; edge resumes %v, %v from the cache; storm %+v", m.P0Expected, m.P0Lost, m.P0Duplicated, res.Resumes, all, cached, res.Storms[0])
	if res.Devices != 300 || res.Stopped != "on_recovery" || res.Held != 300 || onKilled != 0 {
		t.Errorf("%d devices, stopped by %s holding %d (%v on the killed hub); want 300, on_recovery, all held", res.Devices, res.Stopped, res.Held, onKilled)
	}
	if m.P0Expected == 0 || m.P0Lost != 0 || m.P0Duplicated != 0 {
		t.Errorf("P0: expected %d, lost %d, duplicated %d; want some expected, none lost or duplicated", m.P0Expected, m.P0Lost, m.P0Duplicated)
	}
	k := res.Storms[0]
	if k.Kind != "kill" || k.Error != "" || k.Dropped == 0 || k.Back != k.Dropped {
		t.Errorf("kill storm: %s dropped %d back %d error %q; want the killed hub's devices dropped, all back", k.Kind, k.Dropped, k.Back, k.Error)
	}
	r := res.Resumes
	if n := r.Recovered + r.Gaps; n < k.Dropped || float64(r.Recovered) < 0.95*float64(n) {
		t.Errorf("resumes: %d recovered, %d gaps for %d devices dropped; want one at least per channel of each, 95 %% recovered", r.Recovered, r.Gaps, k.Dropped)
	}
	if all < float64(k.Dropped) || cached < 0.95*all {
		t.Errorf("the edges answered %v of %v resumes from their cache, want at least 95 %% (and a resume per device dropped at least)", cached, all)
	}
}

const unhealthyScenario = `
name: unhealthy
duration: 40s
population: {devices: 150, initial: 150, protocol: websocket, tenants: 3}
dns: {policy: multivalue}
origins: [{name: hub, count: 3, headroom: 2, max_new_per_second: 1000}]
client:
  backoff: {policy: full, base: 100ms, cap: 1s}
traffic:
  unhealthy:
    - {at: 0s}
  disconnects:
    - {at: 8s, share: 1}
stop: {on_recovery: true}
`

// TestUnhealthyOriginLeavesTheAnswer: one hub of the fleet is marked
// unhealthy (hub.SetUnhealthy, what POST /health/unhealthy does) at the
// start: it keeps the sessions it holds, the fleet's DNS (gRPC health
// checks, every second) drops it from the answer, and when every session
// is dropped 8 s later the devices all come back on the two others. The
// spell has no end: the run restores the hub after it stopped driving.
func TestUnhealthyOriginLeavesTheAnswer(t *testing.T) {
	f := startFleetConfig(t, fleet.Config{HealthCheck: "grpc", Edges: -1})
	hubs := f.Hubs()
	sick := hubs[2]
	var before float64
	cfg := fleetConfig(t, f)
	cfg.Origins = 3
	cfg.Unhealthy = func(context.Context, int) (func() error, error) {
		before = float64(sick.Sessions())
		sick.SetUnhealthy(true)
		return func() error { sick.SetUnhealthy(false); return nil }, nil
	}
	var atEnd int
	var readyAtEnd error
	cfg.AtEnd = func() { atEnd, readyAtEnd = sick.Sessions(), sick.Ready() }
	res := runScenario(t, loadScenario(t, "unhealthy.yaml", unhealthyScenario), cfg)
	if res.Stopped != "on_recovery" || res.Held != 150 {
		t.Errorf("stopped by %s holding %d, want on_recovery with 150", res.Stopped, res.Held)
	}
	if before == 0 || atEnd != 0 || readyAtEnd == nil {
		t.Errorf("unhealthy hub: %v sessions when marked, %d at the end (ready: %v); want some, then none, still unhealthy at the end", before, atEnd, readyAtEnd)
	}
	if sick.Ready() != nil {
		t.Errorf("the run did not restore the hub: %v", sick.Ready())
	}
	if v := res.HeldByOrigin[sick.Name]; len(v) < 8 || v[6] == 0 || v[len(v)-1] != 0 {
		t.Errorf("sessions held on the unhealthy hub per second: %v; want kept until the drop, none at the end", v)
	}
}
