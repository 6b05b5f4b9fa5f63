package kraken

import (
	"context"
	"fmt"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/corralhq/corral/edge"
	"github.com/corralhq/corral/fleet"
	"github.com/corralhq/corral/hub"
	"github.com/corralhq/corral/internal/testkit"
	"github.com/corralhq/corral/limit"
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

// hintsOver returns how many retry hints an edge gave refused Hellos
// (corral_edge_handshake_retry_after_seconds) and how many of them were
// over bound, the histogram's largest bucket bound at or under sec.
func hintsOver(t *testing.T, reg prometheus.Gatherer, sec float64) (n, over uint64, bound float64) {
	t.Helper()
	for _, m := range testkit.Metrics(t, reg, "corral_edge_handshake_retry_after_seconds") {
		h := m.GetHistogram()
		within := uint64(0)
		for _, b := range h.GetBucket() {
			if b.GetUpperBound() <= sec {
				within, bound = b.GetCumulativeCount(), b.GetUpperBound()
			}
		}
		n += h.GetSampleCount()
		over += h.GetSampleCount() - within
	}
	return n, over, bound
}

// poolOrigin is a hub's admission with a fixed capacity: at most workers
// handshakes at once, each held for hold, so the fleet's set-up rate is
// known (workers / hold per hub) whatever this machine's speed. Nothing is
// refused or severed: a hub that cannot keep up makes the handshake wait.
type poolOrigin struct {
	sem  chan struct{}
	hold time.Duration
}

func newPoolOrigin(workers int, hold time.Duration) *poolOrigin {
	return &poolOrigin{sem: make(chan struct{}, workers), hold: hold}
}

func (o *poolOrigin) AdmitAt(limit.Priority, time.Time) limit.Decision {
	o.sem <- struct{}{}
	time.Sleep(o.hold)
	<-o.sem
	return limit.Decision{Admit: true}
}
func (o *poolOrigin) SeverQuotaAt(limit.Counts, time.Time) limit.Counts   { return limit.Counts{} }
func (o *poolOrigin) RetryWindowAt(limit.Priority, time.Time) limit.Retry { return limit.Retry{} }

// TestTenTimesStormWithAdmission runs scenarios/reliability/storm-10x.yaml
// (1,500 devices at its scale) through the fleet's two edges with their
// adaptive admission on, in front of three hubs whose set-up capacity is
// fixed (poolOrigin: 4 handshakes at once of 50 ms each, 80 a second per
// hub, 240 for the fleet). Every device is dropped at once and comes back
// within about 100 ms: 15,000 attempts a second, over 10x the capacity.
// Asserted: every device back, every P0 among them and none of P0's
// attempts refused; the edges' Shedders never in the lifeboat (a heap
// emergency, max_heap 1 GiB, takes them there), and the test process's
// heap below that bound after the storm. Logged: goodput, the sessions
// set up until 90 % were back, per second, against the fleet's 240 (the
// capacity is the stand-ins' wall-clock pool, which this machine drives at
// a fraction of its speed).
func TestTenTimesStormWithAdmission(t *testing.T) {
	const maxHeap = 1 << 30
	const workers, hold, capacity = 4, 50 * time.Millisecond, 3 * 4 * 20.0
	f := startFleetWith(t, fleet.Config{}, fleet.Options{
		Hub: func(_ int, _ *hub.Config, o *hub.Options) { o.Overload = newPoolOrigin(workers, hold) },
		Edge: func(_ int, c *edge.Config) {
			c.Admission.Enabled = true
			c.Admission.Shedder.Resources.MaxHeap = maxHeap
			c.Load.SharePlaces = true // one pool: as corral up runs it
		},
	})
	cfg := fleetConfig(t, f)
	cfg.Targets = f.EdgeURLs()
	cfg.Resolver = ""
	// The highest stage of any edge's Shedder, polled through the run: a
	// heap emergency takes it to the lifeboat at once.
	var top atomic.Uint32
	done := make(chan struct{})
	polled := make(chan struct{})
	go func() {
		defer close(polled)
		for {
			for _, e := range f.Edges() {
				if st := uint32(e.Stats().Stage); st > top.Load() {
					top.Store(st)
				}
			}
			select {
			case <-done:
				return
			case <-time.After(10 * time.Millisecond):
			}
		}
	}()
	// The run stops once every device is back (7 s after the drop in
	// the runs of 2026-12-04). It is bounded by three minutes, not by
	// the scenario's one, so that a machine busy with the rest of the
	// suite under -race gets there too. Once, in CI, 1,496 of the 1,500
	// were back when a minute's bound ended the run: after the rooms
	// expired the refused came back at 10 to 30 a second for 40 s (not
	// reproduced on the same machine under -race with the edge, hub,
	// fleet, sim and authdns tests beside it).
	sc := loadShipped(t, "reliability/storm-10x.yaml")
	sc.Duration = 3 * time.Minute
	res := runScenarioWithin(t, sc, cfg, sc.Duration+time.Minute)
	close(done)
	<-polled
	k := res.Storms[0]
	attempts := int64(0)
	for n, c := range k.AttemptsToBack {
		i, err := strconv.Atoi(n)
		if err != nil {
			t.Fatalf("attempts_to_back key %q", n)
		}
		attempts += int64(i) * c
	}
	drop := int(k.AtSeconds)
	peak := int64(0)
	for _, a := range res.AttemptsPerSecond[min(drop, len(res.AttemptsPerSecond)):] {
		peak = max(peak, a)
	}
	// Goodput from the sessions held each second: the time from the drop
	// until 90 % of the dropped are held again, against the time the
	// fleet's capacity needs for them.
	base := res.HeldPerSecond[min(drop, len(res.HeldPerSecond))-1] - k.Dropped
	t90 := time.Duration(0)
	for i := drop; i < len(res.HeldPerSecond); i++ {
		if res.HeldPerSecond[i]-base >= k.Dropped*9/10 {
			t90 = time.Duration(i+1-drop) * time.Second
			break
		}
	}
	goodput := 0.0
	if t90 > 0 {
		goodput = 0.9 * float64(k.Dropped) / t90.Seconds() / capacity
	}
	// The same from the exact time 90 % were back (the held count is
	// read once a second, which rounds the time up to whole seconds).
	exact90 := k.BackAfter.Quantile(90)
	goodputExact := 0.0
	if exact90 > 0 {
		goodputExact = 0.9 * float64(k.Dropped) / exact90.Seconds() / capacity
	}
	t.Logf("dropped %d, back %d in %d attempts; storm peak %d attempts/s (%.0fx the capacity of %.0f/s); 90 %% back after %v (whole seconds): goodput %.3f; exactly %v: goodput %.3f; failures %v; back after p50 %v p99 %v; P0 p99 %v",
		k.Dropped, k.Back, attempts, peak, float64(peak)/capacity, capacity, t90, goodput, exact90, goodputExact, res.Failures,
		k.BackAfter.Quantile(50), k.BackAfter.Quantile(99), k.BackAfterByPriority["p0"].Quantile(99))
	t.Logf("held per second %v; attempts per second %v", res.HeldPerSecond, res.AttemptsPerSecond)
	for i, e := range f.Edges() {
		n, late, bound := hintsOver(t, e.Registry, 10)
		t.Logf("edge %d: queued %v refused %v; %d retry hints (the warm-up's too), %d of them over %.1f s", i, metric(t, e.Registry, "corral_edge_handshake_queued_total"), metric(t, e.Registry, "corral_edge_handshake_rejected_total"), n, late, bound)
	}
	if res.Stopped != "on_recovery" || k.Dropped != 1500 || k.Back != k.Dropped {
		t.Fatalf("stopped by %s, %d dropped, %d back; want all 1,500 back", res.Stopped, k.Dropped, k.Back)
	}
	if p0 := k.DroppedByPriority["p0"]; p0 == 0 || k.BackAfterByPriority["p0"].Count() != p0 {
		t.Errorf("P0: %d dropped, %d back; want all back", p0, k.BackAfterByPriority["p0"].Count())
	}
	for reason, c := range res.Failures {
		if c["p0"] != 0 {
			t.Errorf("P0 attempts refused: %d (%s); want none", c["p0"], reason)
		}
	}
	// Goodput is logged, not asserted (a timed figure): issue 14 asks
	// 90 %. 20 runs on 2026-12-04 (load under 0.9): median 0.963 from the
	// exact 90th percentile, 0.954 to 0.972. The herd fits the waiting
	// rooms for 2 s; the rest are refused when the rooms expire, each
	// edge placing its own at its share of the edges' capacity estimates,
	// so goodput is as good as those estimates (kraken/README).
	if st := limit.Stage(top.Load()); st >= limit.StageLifeboat {
		t.Errorf("an edge's Shedder reached %v (its heap bound)", st)
	}
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	if ms.HeapInuse > maxHeap {
		t.Errorf("heap in use %d MiB after the storm, above the bound of %d MiB", ms.HeapInuse>>20, maxHeap>>20)
	}
}
