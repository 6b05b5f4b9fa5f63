package main

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/corralhq/corral/hub"
	"github.com/corralhq/corral/hub/auth"
	"github.com/corralhq/corral/kraken"
	"github.com/corralhq/corral/limit"
	"github.com/corralhq/corral/scenario"
)

const testSecret = "calibrate-test-secret-0123456789abcdef"

// rateAdmission is a load balancer stand-in with a known capacity: it
// admits new sessions at rate per second (a token bucket of one token)
// with a bucket of burst tokens (a tenth of a second of admissions: a
// bucket of one would turn away the attempts that come close together
// and admit less than rate under a herd) and refuses the rest at once
// with 1013 and no hint, so the devices' backoff alone paces them. It
// queues nothing.
type rateAdmission struct {
	mu     sync.Mutex
	rate   float64
	burst  float64
	tokens float64
	last   time.Time
}

func (a *rateAdmission) AdmitAt(_ limit.Priority, now time.Time) limit.Decision {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.last.IsZero() {
		a.last, a.tokens = now, a.burst
	}
	a.tokens = min(a.tokens+now.Sub(a.last).Seconds()*a.rate, a.burst)
	a.last = now
	if a.tokens >= 1 {
		a.tokens--
		return limit.Decision{Admit: true}
	}
	return limit.Decision{}
}

func (a *rateAdmission) SeverQuotaAt(limit.Counts, time.Time) limit.Counts { return limit.Counts{} }
func (a *rateAdmission) RetryWindowAt(limit.Priority, time.Time) limit.Retry {
	return limit.Retry{}
}

// startHub runs a hub on loopback (port 0) with node id id behind a
// rateAdmission of rate per second, and returns its WebSocket URL and
// its metrics.
func startHub(t *testing.T, id string, rate float64) (string, *prometheus.Registry) {
	t.Helper()
	cfg := hub.DefaultConfig()
	cfg.Listen, cfg.GRPCListen, cfg.Admin.Addr = "127.0.0.1:0", "", ""
	cfg.NodeID = id
	cfg.Auth = auth.Config{Keys: []auth.KeyConfig{{Algorithm: "HS256", Secret: testSecret}}}
	cfg.Drain.Deadline = 5 * time.Second
	reg := prometheus.NewRegistry()
	h, err := hub.New(cfg, hub.Options{Registerer: reg, Overload: &rateAdmission{rate: rate, burst: max(1, rate/10)}})
	if err != nil {
		t.Fatal(err)
	}
	errc := make(chan error, 1)
	go func() { errc <- h.Run(context.Background()) }()
	<-h.Started()
	if err := h.Ready(); err != nil {
		t.Fatalf("hub did not start: %v (%v)", err, <-errc)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = h.Shutdown(ctx)
	})
	return "ws://" + h.Addr().String() + "/v1/ws", reg
}

func token(tenant string, rank int) (string, error) {
	now := time.Now()
	c := auth.Claims{
		Tenant: tenant, Channels: []string{">"}, MaxPriority: &rank,
		RegisteredClaims: jwt.RegisteredClaims{IssuedAt: jwt.NewNumericDate(now), ExpiresAt: jwt.NewNumericDate(now.Add(time.Hour))},
	}
	return jwt.NewWithClaims(jwt.SigningMethodHS256, c).SignedString([]byte(testSecret))
}

// runKraken runs sc against targets in process, bounded by two minutes.
func runKraken(t *testing.T, sc *scenario.Scenario, targets []string) *kraken.Result {
	t.Helper()
	k, err := kraken.New(sc, kraken.Config{Targets: targets, Token: token})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	res, err := k.Run(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func decode(t *testing.T, name, text string) *scenario.Scenario {
	t.Helper()
	sc, err := scenario.Decode(name, []byte(strings.TrimLeft(text, "\n")))
	if err != nil {
		t.Fatal(err)
	}
	return sc
}

// The measuring pass at small scale: a herd (every session dropped, a
// short backoff that keeps the hubs busy) and a trickle.
const (
	herdPass = `
name: herd
duration: 60s
population: {devices: DEVICES, initial: DEVICES, protocol: websocket}
dns: {policy: multivalue}
origins: [{name: hub, count: 3, headroom: 2, max_new_per_second: 1}]
client:
  backoff: {policy: full, base: 250ms, cap: 1s}
  connect_timeout: 10s
traffic:
  disconnects: [{at: 1s, share: 1}]
stop: {on_recovery: true}
`
	idlePass = `
name: idle
duration: 5s
population: {devices: 20, initial: 0, protocol: websocket}
dns: {policy: multivalue}
origins: [{name: hub, count: 3, headroom: 2, max_new_per_second: 1}]
traffic:
  arrivals: [{at: 0s, over: 4s, devices: 20}]
`
)

// TestCalibrationSmall is bench/sim/calibrate.sh at a small scale, in
// process: 3 hubs behind stand-ins that admit 40 new sessions per second
// each; the measuring pass reads their rates from their own counts of
// Welcomes during a kraken herd and the handshake latency with kraken,
// writes them into scenarios/calibrate.yaml (900
// devices, a shorter backoff), and the same storm runs in kraken and in
// the sim at two seeds. What does not depend on the machine's speed is
// asserted: each hub's share of the sessions within the 10 % target (or
// four standard errors of a random pick, below), the
// attempts per device within a factor of 1.5 (below), each hub's rate measured from
// its own count of Welcomes read every 100 ms over the steady part of its
// return (MeasureRates: at 40/s its 300 sessions take about 7 s, far
// longer than the 1 s its readings need), no higher than the stand-ins'
// admit, the sessions it took back those kraken's held series counts
// (within 2 %: a Welcome whose attempt kraken gave up is the hub's, not
// kraken's), and
// every failure kraken saw one the sim models (all refusals). The peak error rate and the time to 99 % back
// are logged, not asserted.
func TestCalibrationSmall(t *testing.T) {
	if testing.Short() {
		t.Skip("four kraken runs against three hubs")
	}
	const devices, rate = 900, 40.0
	var targets []string
	sampler := Sampler{Every: 100 * time.Millisecond, Sources: map[string]Source{}}
	for i := range 3 {
		name := fmt.Sprintf("hub-%d", i+1)
		u, reg := startHub(t, name, rate)
		targets = append(targets, u)
		sampler.Sources[name] = GathererSource{reg}
	}
	n := fmt.Sprint(devices)
	// The hubs' own counts read every 100 ms during the herd, as the
	// script's `calibrate sample` does over their metrics pages.
	ctx, stop := context.WithCancel(context.Background())
	opensc := make(chan *Samples, 1)
	go func() {
		o, err := sampler.Run(ctx)
		if err != nil {
			t.Error(err)
		}
		opensc <- o
	}()
	herd := runKraken(t, decode(t, "herd.yaml", strings.ReplaceAll(herdPass, "DEVICES", n)), targets)
	stop()
	opens := <-opensc
	idle := runKraken(t, decode(t, "idle.yaml", idlePass), targets)
	in, err := Measure(herd, opens, idle)
	if err != nil {
		t.Fatal(err)
	}
	mean, spread := in.Rate()
	t.Logf("measured: %.1f new sessions/s per hub (%s after the drop, spread %.1f %%), handshake latency %v; kraken's held series: %s",
		mean, in.Each(), 100*spread, in.HandshakeLatency, in.CrossCheck())
	// The measured rate is what each hub set up over its steady part
	// (the stand-ins' rate at most: they count a Welcome only for what
	// they admit; less when the machine cannot bring the herd's attempts
	// to them fast enough): the input, whatever it is. The part is each
	// hub's own: a tenth to nine tenths of the sessions it set up after
	// the drop (about 300), timed after it, and kraken's held series
	// agrees on how many came back to each hub.
	for name, s := range in.Steady {
		if r := s.Rate(); r <= 0 || r > 1.1*rate {
			t.Errorf("%s measured at %.1f/s, the stand-in admits at most %.0f/s", name, r, rate)
		}
		if s.Took < devices/6 || s.Took > devices/2 {
			t.Errorf("%s took back %d of %d devices over 3 hubs", name, s.Took, devices)
		}
		if s.From <= 0 || float64(s.To-s.From) < float64(2*sampler.Every)/MaxEnds {
			t.Errorf("%s: steady part %v to %v after the drop, want one of %v or more after it", name, s.From, s.To, time.Duration(float64(2*sampler.Every)/MaxEnds))
		}
		if h, ok := in.Held[name]; !ok || math.Abs(float64(h.Took-s.Took)) > float64(s.Took)/50 {
			t.Errorf("%s: the hub set up %d sessions after the drop, kraken's held series says %+v (want the same within 2 %%)", name, s.Took, h)
		}
	}
	// The stand-ins queue nothing: the sim's nearest origin is one whose
	// backlog holds one step's set-ups.
	src, err := os.ReadFile("../../../scenarios/calibrate.yaml")
	if err != nil {
		t.Fatal(err)
	}
	small := strings.NewReplacer(
		"devices: 50000", "devices: "+n, "initial: 50000", "initial: "+n,
		"backoff: {policy: full, base: 1s, cap: 30s}", "backoff: {policy: full, base: 500ms, cap: 4s}",
	).Replace(string(src))
	base, err := scenario.Decode("calibrate.yaml", []byte(small))
	if err != nil {
		t.Fatal(err)
	}
	in.Backlog = int64(math.Ceil(mean * base.Step.Seconds()))
	seeds := []uint64{1, 2}
	var ks []*kraken.Result
	var sc *scenario.Scenario
	for _, seed := range seeds {
		b, err := Apply("calibrate.yaml", []byte(small), in, seed)
		if err != nil {
			t.Fatal(err)
		}
		sc = decode(t, "calibrate.yaml", string(b))
		k := runKraken(t, sc, targets)
		if k.Storms[0].Back != k.Storms[0].Dropped {
			t.Fatalf("seed %d: %d of %d dropped back; the storm did not end", seed, k.Storms[0].Back, k.Storms[0].Dropped)
		}
		ks = append(ks, k)
	}
	var log bytes.Buffer
	rows, unexplained, err := Calibrate(context.Background(), sc, seeds, ks, &log)
	if err != nil {
		t.Fatal(err)
	}
	_ = Print(&log, rows)
	t.Logf("%d devices, seeds %v:\n%s", devices, seeds, log.String())
	for _, r := range rows {
		bound, off := -1.0, math.Abs(r.Ratio-1)
		switch {
		case strings.HasPrefix(r.Figure, "share of sessions"):
			// Each device's hub is a random pick: at 900 devices over
			// two seeds kraken's share of a hub has a standard error
			// of 3.3 % of itself, so the bound is the 10 % target or
			// four standard errors, whichever is larger (13 % here).
			p := r.Sim
			se := math.Sqrt(p*(1-p)/float64(devices*len(seeds))) / p
			bound = max(Target, 4*se)
		case r.Figure == "attempts per device":
			// The sim refuses an attempt at once; a hub refuses it
			// (1013) after the upgrade and Hello, so on a machine loaded
			// enough to stretch a handshake a kraken device makes fewer
			// attempts in the same time (seen under -race at load 6:
			// 2.46 against the sim's 3.42; in CI on 2026-12-04, beside
			// the suite's other fleets, 8.48 against 10.65, where a
			// quiet run of the same code gave 10.23). The test's bound
			// leaves room for the machine, and still catches devices
			// that take their attempts by another rule (9.12 against
			// 4.21 when kraken's rounds differed from the sim's); the
			// 10 % target is the quiet full run's. Counted as a
			// factor either way: 1.5 at most.
			bound, off = 5*Target, max(r.Ratio, 1/r.Ratio)-1
		}
		if bound >= 0 && off > bound {
			t.Errorf("%s: kraken %.3f, sim %.3f (ratio %.3f): off by more than %.0f %%", r.Figure, r.Kraken, r.Sim, r.Ratio, 100*bound)
		}
	}
	if len(rows) != 3+3 {
		t.Errorf("%d rows, want a share per hub (3) and three figures", len(rows))
	}
	for _, u := range unexplained {
		t.Errorf("unexplained: %s", u)
	}
}

// TestSourcesReadTheHubsWelcomes: a hub behind a stand-in admitting 2
// sessions a second with a bucket of one, against 8 devices arriving at
// once and retrying within 1 s for 3 s (at most 7 admitted, 6 in the run
// written), reads through its registry and through its metrics page the
// Welcomes kraken saw: the admission, not the connections it accepted
// (sessions_opened_total, 35 there, counts every refused attempt too). A
// registry that is no hub's is refused.
func TestSourcesReadTheHubsWelcomes(t *testing.T) {
	u, reg := startHub(t, "hub-1", 2)
	res := runKraken(t, decode(t, "few.yaml", `
name: few
duration: 3s
population: {devices: 8, initial: 0, protocol: websocket}
dns: {policy: multivalue}
origins: [{name: hub, count: 1, headroom: 2, max_new_per_second: 1}]
client:
  backoff: {policy: full, base: 1s, cap: 1s}
traffic:
  arrivals: [{at: 0s, devices: 8}]
`), []string{u})
	var welcomed int64
	for _, c := range res.Welcomes {
		for _, n := range c {
			welcomed += n
		}
	}
	srv := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	defer srv.Close()
	for _, src := range []struct {
		name string
		src  Source
	}{{"registry", GathererSource{reg}}, {"metrics page", HTTPSource{URL: srv.URL}}} {
		w, _, err := src.src.Read(context.Background())
		if err != nil {
			t.Fatalf("%s: %v", src.name, err)
		}
		if w != welcomed || w == 0 || w >= 8 {
			t.Errorf("%s: %d Welcomes, kraken saw %d of 8 devices welcomed (want the same, some refused)", src.name, w, welcomed)
		}
	}
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var opened float64
	for _, f := range fams {
		if f.GetName() == "corral_hub_sessions_opened_total" {
			for _, m := range f.GetMetric() {
				opened += m.GetCounter().GetValue()
			}
		}
	}
	if opened <= float64(welcomed) {
		t.Errorf("the hub opened %v connections for %d Welcomes: want more (the refused ones)", opened, welcomed)
	}
	t.Logf("%d Welcomes, %v connections opened", welcomed, opened)
	if _, _, err := (GathererSource{prometheus.NewRegistry()}).Read(context.Background()); err == nil || !strings.Contains(err.Error(), "not a corral hub's metrics") {
		t.Errorf("an empty registry: %v, want a refusal", err)
	}
}
