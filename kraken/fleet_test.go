package kraken

import (
	"context"
	"fmt"
	"math"
	"sync"
	"testing"
	"time"

	"github.com/corralhq/corral/fleet"
	"github.com/corralhq/corral/internal/testkit"
)

// startFleet runs three hubs on a NATS cluster behind a DNS name.
func startFleet(t *testing.T) *fleet.Fleet {
	t.Helper()
	return startFleetConfig(t, fleet.Config{})
}

// startFleetConfig is startFleet with cfg.
func startFleetConfig(t *testing.T, cfg fleet.Config) *fleet.Fleet {
	t.Helper()
	return startFleetWith(t, cfg, fleet.Options{})
}

// startFleetWith is startFleet with cfg and opts.
func startFleetWith(t *testing.T, cfg fleet.Config, opts fleet.Options) *fleet.Fleet {
	t.Helper()
	if testing.Short() {
		t.Skip("starts a NATS cluster and three hubs")
	}
	f, err := fleet.New(cfg, opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := f.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = f.Shutdown(ctx)
	})
	return f
}

// fleetConfig is a run against f: its DNS name, its first hub's publish
// API, its tokens.
func fleetConfig(t *testing.T, f *fleet.Fleet) Config {
	return Config{
		Targets:    []string{fmt.Sprintf("ws://%s:%d/v1/ws", f.OriginName(), f.WSPort())},
		Resolver:   f.DNSAddr(),
		PublishURL: "http://" + f.Hubs()[0].Addr().String(),
		APIKey:     f.APIKey(),
		Token: func(tenant string, rank int) (string, error) {
			return f.Token(tenant, []string{">"}, rank, time.Hour)
		},
		Progress: testWriter{t},
	}
}

// hubCounts sums metrics over the fleet's hubs; handshakes per hub name.
type hubCounts struct {
	sessions, delivered float64
	handshakes          map[string]float64
}

func readHubs(t *testing.T, f *fleet.Fleet) hubCounts {
	c := hubCounts{handshakes: map[string]float64{}}
	for _, h := range f.Hubs() {
		c.sessions += metric(t, h.Registry, "corral_hub_sessions")
		c.delivered += metric(t, h.Registry, "corral_hub_messages_delivered_total")
		c.handshakes[h.Name] = metric(t, h.Registry, "corral_hub_handshake_duration_seconds")
	}
	return c
}

const publishScenario = `
name: fleet-publish
duration: 30s
population:
  devices: 300
  initial: 300
  protocol: websocket
  tenants: 3
  channels: 2
  priorities: [{name: P0, share: 0.2}, {name: P1, share: 0.3}, {name: P2, share: 0.5}]
dns: {policy: multivalue}
origins: [{name: hub, count: 3, headroom: 2, max_new_per_second: 1000}]
traffic:
  publish:
    - {at: 0s, for: 2s, priority: P0, per_second: 10}
    - {at: 0s, for: 2s, priority: P2, per_second: 5}
stop: {on_recovery: true}
`

const stormsScenario = `
name: fleet-storms
duration: 40s
population:
  devices: 300
  initial: 300
  protocol: websocket
  tenants: 3
  channels: 2
  priorities: [{name: P0, share: 0.2}, {name: P1, share: 0.3}, {name: P2, share: 0.5}]
dns: {policy: multivalue}
origins: [{name: hub, count: 3, headroom: 2, max_new_per_second: 1000}]
client:
  backoff: {policy: full, base: 100ms, cap: 1s}
traffic:
  publish:
    - {at: 0s, for: 4s, priority: P0, per_second: 10}
  disconnects:
    - {at: 1s, share: 0.3}
  mass_close:
    - {at: 2500ms, origins: 1}
stop: {on_recovery: true}
`

// within reports whether got is within 1 % of want.
func within(got, want float64) bool { return math.Abs(got-want) <= 0.01*want }

// TestMatchesTheFleetsMetrics: 300 devices on a fleet of three hubs
// behind its DNS name. A first run publishes P0 and P2 messages to them:
// what kraken reports matches the hubs' own metrics within 1 % (sessions
// held at the end: corral_hub_sessions; Welcomes per hub, by
// Welcome.node_id: the count of corral_hub_handshake_duration_seconds;
// messages received: corral_hub_messages_delivered_total). A second run
// publishes P0 while it drops 30 % of the sessions at once and then has
// one hub close all of its sessions with a retry hint (a drain): both
// storms are observed, every dropped device is back, the sessions and
// Welcomes still match, and no P0 message is lost or duplicated.
// (Messages are compared on the first run only: a hub counts a message
// queued to a session that is cut before it is written, and again when
// the resume brings it.)
func TestMatchesTheFleetsMetrics(t *testing.T) {
	f := startFleet(t)
	var at hubCounts
	cfg := fleetConfig(t, f)
	cfg.AtEnd = func() { at = readHubs(t, f) }
	res := runScenario(t, loadScenario(t, "publish.yaml", publishScenario), cfg)
	if !within(float64(res.Held), at.sessions) || res.Held != 300 {
		t.Errorf("kraken holds %d sessions, the hubs %v (want 300, within 1 %%)", res.Held, at.sessions)
	}
	if got := float64(res.Messages.Received.Total()); !within(got, at.delivered) || got == 0 {
		t.Errorf("kraken received %v messages, the hubs delivered %v", got, at.delivered)
	}
	checkWelcomes(t, res, at.handshakes, nil)
	if m := res.Messages; m.P0Expected == 0 || m.P0Lost != 0 || m.P0Duplicated != 0 {
		t.Errorf("P0: expected %d, lost %d, duplicated %d; want some expected, none lost or duplicated", m.P0Expected, m.P0Lost, m.P0Duplicated)
	}

	hubs := f.Hubs()
	before := readHubs(t, f)
	var closeOnce sync.Once
	cfg = fleetConfig(t, f)
	cfg.MassClose = func(context.Context, int) error {
		// The hub drains (Shutdown returns once it is done); the mass
		// close has started once it is no longer ready.
		closeOnce.Do(func() { go func() { _ = hubs[2].Shutdown(context.Background()) }() })
		testkit.WaitFor(t, 10*time.Second, "hub-3 draining", func() bool { return hubs[2].Ready() != nil })
		return nil
	}
	cfg.AtEnd = func() { at = readHubs(t, f) }
	res = runScenario(t, loadScenario(t, "storms.yaml", stormsScenario), cfg)
	if res.Stopped != "on_recovery" {
		t.Errorf("stopped by %s, want on_recovery (every dropped device back)", res.Stopped)
	}
	if !within(float64(res.Held), at.sessions) || res.Held != 300 {
		t.Errorf("kraken holds %d sessions, the hubs %v (want 300, within 1 %%)", res.Held, at.sessions)
	}
	checkWelcomes(t, res, at.handshakes, before.handshakes)
	m := res.Messages
	if m.P0Expected == 0 || m.P0Lost != 0 || m.P0Duplicated != 0 {
		t.Errorf("P0: expected %d, lost %d, duplicated %d; want some expected, none lost or duplicated", m.P0Expected, m.P0Lost, m.P0Duplicated)
	}
	if len(res.Storms) != 2 {
		t.Fatalf("%d storms, want 2", len(res.Storms))
	}
	drop, mass := res.Storms[0], res.Storms[1]
	if drop.Kind != "drop" || drop.Dropped != 90 || drop.Back != drop.Dropped {
		t.Errorf("drop storm: %s dropped %d back %d, want drop 90 of 300, all back", drop.Kind, drop.Dropped, drop.Back)
	}
	if mass.Kind != "mass_close" || mass.Dropped == 0 || mass.Back != mass.Dropped || mass.Back100Ms == nil {
		t.Errorf("mass close: %s dropped %d back %d (100 %% after %v), want some dropped, all back", mass.Kind, mass.Dropped, mass.Back, mass.Back100Ms)
	}
	if res.Disconnects["close_1001"].Total() != mass.Dropped {
		t.Errorf("closes 1001 (drain GoAway) %v, want the %d sessions of the drained hub", res.Disconnects["close_1001"], mass.Dropped)
	}
	if res.Resumes.Recovered == 0 || res.Resumes.Gaps != 0 {
		t.Errorf("resumes: %+v, want recovered, no gap", res.Resumes)
	}
}

// checkWelcomes compares kraken's Welcomes per node with each hub's
// handshakes since before (nil: since the start).
func checkWelcomes(t *testing.T, res *Result, now, before map[string]float64) {
	t.Helper()
	if len(res.Welcomes) != 3 {
		t.Errorf("Welcomes from %d nodes, want the 3 hubs: %v", len(res.Welcomes), res.Welcomes)
	}
	for node, c := range res.Welcomes {
		if got, want := float64(c.Total()), now[node]-before[node]; !within(got, want) {
			t.Errorf("Welcomes from %s: kraken %v, the hub's handshakes %v", node, got, want)
		}
	}
}
