package kraken

import (
	"context"
	"crypto/x509"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/corralhq/corral/backoff"
	"github.com/corralhq/corral/scenario"
	"github.com/corralhq/corral/wire"
)

// Kraken is one run of a scenario against a target. Create it with New
// (which checks everything and does no I/O), then call Run once. It is not
// safe for concurrent use.
type Kraken struct {
	cfg   Config
	pl    *plan
	roots *x509.CertPool // Config.CAFile's CAs; nil: the system roots
	ran   bool
	link  *agentLink // the coordinator of a split run; nil alone
}

// New checks the scenario and the configuration and returns the run. A
// scenario key kraken cannot run yet, or cannot run against this target,
// is an error naming the key with its file and line; nothing has started
// then.
func New(sc *scenario.Scenario, cfg Config) (*Kraken, error) {
	cfg, fileTargets := cfg.withTarget(sc)
	if err := cfg.validate(!fileTargets); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	pl, err := newPlan(sc, cfg, fileTargets, part{0, 1})
	if err != nil {
		return nil, err
	}
	roots, _, err := loadCA(cfg.CAFile, cfg.caPEM)
	if err != nil {
		return nil, err
	}
	return &Kraken{cfg: cfg, pl: pl, roots: roots}, nil
}

// Devices returns the number of devices the run drives (the scenario's
// population at its scale).
func (k *Kraken) Devices() int { return k.pl.part.count(k.pl.devices) }

// runner is the state of a run while it goes on.
type runner struct {
	cfg             Config
	pl              *plan
	ctx             context.Context
	eng             *engine
	codec           *wire.Codec
	rec             *recorder
	connectTimeout  time.Duration
	targets         []target
	regionTargets   [][]target   // by region of the plan (Config.Regions)
	endpoints       []endpoint   // of targets when every one is an address (literals)
	regionEndpoints [][]endpoint // of regionTargets, by region, likewise
	resolver        *net.Resolver
	roots           *x509.CertPool // the CAs of TLS targets; nil: the system's
	tokens          [][3]string
	devices         []*device // this part's, by number
	link            *agentLink
	events          int64 // waves, storms and publish streams of the run
	srcBase         uint32
	srcN            uint32

	held, attempts, recovering, launched atomic.Int64
	eventsDone                           atomic.Int64 // waves, storms and publish streams finished
	lastLoss                             atomic.Int64 // UnixNano of the last held session lost
	lastStorm                            atomic.Int64 // UnixNano at which the last storm finished firing
	cutting                              atomic.Int64 // sessions a storm has cut whose end the device has not seen yet
	latest                               atomic.Int32 // the latest storm fired, -1 before any
	stopped                              atomic.Bool

	afterFunc func(time.Duration, func()) *time.Timer // time.AfterFunc; a test's to see the delays
	backoff   backoff.Config                          // the scenario's client.backoff, its defaults filled

	dialMu sync.RWMutex // held to start a dial; taken to stop starting them

	epochMu sync.Mutex
	epochs  map[string]string

	nodeMu sync.Mutex
	nodes  map[string]*originCount // sessions held per origin (Welcome.node_id)

	poison poisons // the poison tenants' storms

	pub *publisher

	liveLines int // lines of the live table drawn last (progress only)

	restores restores      // freezes and unhealthy spells to end
	ended    chan struct{} // closed when the run stops driving
}

func (r *runner) stopping() bool { return r.stopped.Load() }

func (r *runner) latestStorm() int16 { return int16(r.latest.Load()) }

// intern returns one copy of each epoch string for every device.
func (r *runner) intern(s string) string {
	r.epochMu.Lock()
	defer r.epochMu.Unlock()
	if v, ok := r.epochs[s]; ok {
		return v
	}
	r.epochs[s] = s
	return s
}

// originCount is the sessions held on one origin (Welcome.node_id).
type originCount struct {
	name string
	held atomic.Int64
}

// originHeld returns the counter of sessions held on node.
func (r *runner) originHeld(node string) *originCount {
	r.nodeMu.Lock()
	defer r.nodeMu.Unlock()
	c, ok := r.nodes[node]
	if !ok {
		c = &originCount{name: node}
		r.nodes[node] = c
	}
	return c
}

// heldByOrigin returns the sessions held per origin now.
func (r *runner) heldByOrigin() map[string]int64 {
	r.nodeMu.Lock()
	defer r.nodeMu.Unlock()
	out := make(map[string]int64, len(r.nodes))
	for n, c := range r.nodes {
		out[n] = c.held.Load()
	}
	return out
}

// dial starts attempt gen of d: its set-up runs on its own, whatever
// the other devices' connects wait for (ws.go, the engine).
func (r *runner) dial(d *device, gen uint32, ep endpoint, targets []target) {
	r.dialMu.RLock()
	defer r.dialMu.RUnlock()
	if r.stopping() {
		return
	}
	r.eng.start(dialJob{dev: d, gen: gen, src: r.source(d.id), timeout: r.connectTimeout, ep: ep, targets: targets})
}

// source is the local address of device id's connections.
func (r *runner) source(id int32) netip.Addr {
	var b [4]byte
	binary.BigEndian.PutUint32(b[:], r.srcBase+1+uint32(id)%r.srcN)
	return netip.AddrFrom4(b)
}

// targetsOf returns the targets d's rounds go to: the run's, or its
// region's when the run has regions; and their endpoints when every one
// is an address (nil when a name must be resolved at each round's start).
func (r *runner) targetsOf(d *device) ([]target, []endpoint) {
	if r.regionTargets != nil {
		i := d.region.Load()
		return r.regionTargets[i], r.regionEndpoints[i]
	}
	return r.targets, r.endpoints
}

// literals returns the endpoints of ts when every target is an address;
// nil when one is a name.
func literals(ts []target) []endpoint {
	var eps []endpoint
	for _, t := range ts {
		ep, ok := t.literal()
		if !ok {
			return nil
		}
		eps = append(eps, ep)
	}
	return eps
}

// literal returns the endpoint of t when its host is an address (no
// resolution); false for a name.
func (t target) literal() (endpoint, bool) {
	if _, err := netip.ParseAddr(t.host); err != nil {
		return endpoint{}, false
	}
	host := net.JoinHostPort(t.host, t.port)
	return endpoint{addr: host, host: host, path: t.path, grpc: t.grpc(), tls: t.tls, name: t.host}, true
}

// resolveRound returns the endpoints of one round of attempts to ts, as
// the client SDK resolves them: an address is itself, a name every
// address it resolves to now. A name that does not resolve is skipped;
// the error says why when nothing resolved.
func (r *runner) resolveRound(ctx context.Context, ts []target) ([]endpoint, error) {
	var eps []endpoint
	var errs []error
	for _, t := range ts {
		if ep, ok := t.literal(); ok {
			eps = append(eps, ep)
			continue
		}
		var addrs []netip.Addr
		var err error
		if r.cfg.Resolve != nil {
			addrs, err = r.cfg.Resolve(ctx, t.host)
		} else {
			addrs, err = r.resolver.LookupNetIP(ctx, "ip4", t.host)
		}
		if err == nil && len(addrs) == 0 {
			err = errors.New("no address")
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("kraken: resolving %s: %w", t.host, err))
			continue
		}
		host := net.JoinHostPort(t.host, t.port)
		for _, a := range addrs {
			eps = append(eps, endpoint{addr: net.JoinHostPort(a.Unmap().String(), t.port), host: host, path: t.path, grpc: t.grpc(), tls: t.tls, name: t.host})
		}
	}
	if len(eps) == 0 {
		return nil, errors.Join(errs...)
	}
	return eps, nil
}

// Run drives the devices through the scenario and returns what it
// measured. It returns when the run ends by itself (its duration, or a
// stop condition) or ctx ends; the Result is complete in every case.
func (k *Kraken) Run(ctx context.Context) (*Result, error) {
	if k.ran {
		return nil, fmt.Errorf("kraken: Run called twice")
	}
	k.ran = true
	pl, cfg := k.pl, k.cfg
	codec, err := wire.NewCodec(wire.FormatProto, wire.Config{MaxFrameBytes: maxServerFrame})
	if err != nil {
		return nil, fmt.Errorf("kraken: %w", err)
	}
	r := &runner{
		cfg: cfg, pl: pl, codec: codec, connectTimeout: pl.connectTimeout, roots: k.roots,
		rec: &recorder{res: newResult(pl.name)}, epochs: map[string]string{}, ended: make(chan struct{}), nodes: map[string]*originCount{},
		events:    int64(len(pl.waves) + len(pl.storms) + len(pl.publishes)),
		afterFunc: time.AfterFunc,
	}
	r.rec.start.Store(time.Now().Add(100 * 365 * 24 * time.Hour).UnixNano()) // warm-up: outside the series
	r.latest.Store(-1)
	for _, t := range cfg.Targets {
		tt, _ := parseTarget(t) // checked by Validate
		r.targets = append(r.targets, tt)
	}
	r.endpoints = literals(r.targets)
	for _, name := range pl.regions {
		var ts []target
		for _, t := range cfg.Regions[name] {
			tt, _ := parseTarget(t) // checked by Validate
			ts = append(ts, tt)
		}
		r.regionTargets = append(r.regionTargets, ts)
		r.regionEndpoints = append(r.regionEndpoints, literals(ts))
	}
	r.resolver = net.DefaultResolver
	if cfg.Resolver != "" {
		r.resolver = &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, network, cfg.Resolver)
		}}
	}
	r.srcBase = binary.BigEndian.Uint32(cfg.Sources.Masked().Addr().AsSlice())
	r.srcN = uint32(1)<<(32-cfg.Sources.Bits()) - 2
	for t := range pl.tenants {
		var toks [3]string
		for rank := range 3 {
			if toks[rank], err = cfg.Token("t"+strconv.Itoa(t), rank); err != nil {
				return nil, fmt.Errorf("kraken: a token for tenant t%d, P%d: %w", t, rank, err)
			}
		}
		r.tokens = append(r.tokens, toks)
	}
	if r.backoff, err = pl.backoff.WithDefaults(); err != nil {
		return nil, fmt.Errorf("kraken: %w", err)
	}
	for i := range pl.devices {
		if !pl.part.owns(i) {
			continue
		}
		d := &device{r: r, id: int32(i), prio: pl.prio[i], tenant: uint16(i % pl.tenants), storm: -1, pending: -1, chans: make([]chanPos, pl.channels)}
		d.rnd = devRand{s: pl.seed*0x9e3779b97f4a7c15 + uint64(i)}
		b, err := backoff.NewBackoff(r.backoff, &d.rnd)
		if err != nil {
			return nil, fmt.Errorf("kraken: %w", err)
		}
		d.retry = *b
		if pl.region != nil {
			d.region.Store(uint32(pl.region[i]))
		}
		r.devices = append(r.devices, d)
	}
	r.rec.res.Storms = pl.stormResults()
	r.poison.init(pl)
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	r.ctx = rctx
	if r.eng, err = newEngine(rctx, cfg.Pollers); err != nil {
		return nil, err
	}
	r.pub = newPublisher(r)
	if k.link != nil {
		r.link = k.link
		k.link.attach(r)
	}
	res := r.run(rctx)
	return res, nil
}

// stormResults returns the empty results of the plan's storms.
func (pl *plan) stormResults() []*Storm {
	var out []*Storm
	for _, s := range pl.storms {
		st := newStorm(s.kind, s.at)
		st.Share, st.Origins, st.ForSeconds = s.share, s.origins, s.dur.Seconds()
		if s.kind == "move" || s.kind == "drop" && s.region >= 0 {
			st.From = pl.regions[s.region]
		}
		if s.kind == "move" {
			st.To = pl.regions[s.toRegion]
		}
		if s.kind == "poison" {
			st.Tenant = "t" + strconv.Itoa(s.tenant)
			st.Poisoned, st.Others = &TenantAttempts{}, &TenantAttempts{}
		}
		out = append(out, st)
	}
	return out
}

// run is the run's timeline: warm-up, the scenario's clock, the end.
func (r *runner) run(ctx context.Context) *Result {
	pl, cfg := r.pl, r.cfg
	begin := time.Now()
	deadline := begin.Add(pl.duration)
	// Warm-up: the initial devices connect before the scenario's clock
	// starts (the file places them as a steady state at time 0).
	initial := r.devicesIn(0, pl.initial)
	go r.launch(ctx, initial, time.Now(), 0, 0, pl.initial)
	for r.held.Load() < int64(len(initial))-r.terminalCount() && time.Now().Before(deadline) && ctx.Err() == nil {
		r.progress(time.Now(), "warm-up")
		sleepCtx(ctx, 20*time.Millisecond)
	}
	if r.link != nil {
		r.link.warm(ctx) // the clock starts when every agent is warm
	}
	t0 := time.Now()
	r.rec.start.Store(t0.UnixNano())
	end := t0.Add(pl.duration)
	next := pl.initial
	var wg sync.WaitGroup
	for _, w := range pl.waves {
		first := next
		devs := r.devicesIn(first, first+w.n)
		next += w.n
		wg.Go(func() {
			defer r.eventsDone.Add(1)
			if sleepUntil(ctx, t0.Add(w.at)) {
				r.launch(ctx, devs, t0.Add(w.at), w.over, first, w.n)
			}
		})
	}
	for i, s := range pl.storms {
		wg.Go(func() {
			defer r.eventsDone.Add(1)
			if sleepUntil(ctx, t0.Add(s.at)) {
				r.fireStorm(ctx, i, s)
				r.lastStorm.Store(time.Now().UnixNano())
			}
		})
	}
	for _, p := range pl.publishes {
		wg.Go(func() {
			defer r.eventsDone.Add(1)
			if pl.part.publishes() {
				r.pub.stream(ctx, t0, p)
			}
		})
	}
	res := r.rec.res
	res.Stopped = "duration"
	nextLine := time.Now()
	for {
		now := time.Now()
		r.rec.held(now, r.held.Load())
		r.rec.heldByOrigin(now, r.heldByOrigin())
		if !now.Before(nextLine) {
			r.progress(now, "")
			nextLine = now.Add(cfg.ProgressEvery)
		}
		if ctx.Err() != nil {
			res.Stopped = "context"
			break
		}
		if !now.Before(end) {
			break
		}
		if r.link != nil {
			// A split run's stop conditions hold over every agent: the
			// coordinator decides.
			if why := r.link.stopReason(); why != "" {
				res.Stopped = why
				break
			}
		} else if pl.stop.MaxAttempts > 0 && r.attempts.Load() >= pl.stop.MaxAttempts {
			res.Stopped = "max_attempts"
			break
		} else if pl.stop.OnRecovery && r.recovered(now) {
			res.Stopped = "on_recovery"
			break
		}
		sleepCtx(ctx, 20*time.Millisecond)
	}
	// The end: no new attempt, the publishers stop, the messages in
	// flight arrive (bounded by Settle), then every session closes.
	r.stopped.Store(true)
	r.pub.stop()
	if r.link != nil {
		r.link.p0Settle(time.Now().Add(cfg.Settle)) // the publishing agent's last acknowledgements
	}
	wgDone := make(chan struct{})
	go func() { wg.Wait(); close(wgDone) }()
	settleEnd := time.Now().Add(cfg.Settle)
	for time.Now().Before(settleEnd) && r.p0Missing() > 0 {
		time.Sleep(20 * time.Millisecond)
	}
	r.finishMessages()
	res.Held = r.held.Load()
	res.Seconds = time.Since(t0).Seconds()
	res.Devices = int64(len(r.devices))
	r.progress(time.Now(), "end")
	r.poisonEnd() // the kills asked for are done; the tenants' sessions counted
	if cfg.AtEnd != nil {
		cfg.AtEnd()
	}
	// Frozen and unhealthy origins come back before the sessions close,
	// so that the fleet is left as it was found.
	close(r.ended)
	for _, err := range r.restores.all() {
		cfg.Logger.Warn("kraken: ending a storm failed", "err", err)
	}
	r.dialMu.Lock()
	for _, d := range r.devices {
		d.stop()
	}
	r.dialMu.Unlock()
	<-wgDone
	r.eng.stop()
	r.rec.mu.Lock()
	res.derive()
	r.rec.mu.Unlock()
	return res
}

// recovered reports whether the run has recovered at now: every event has
// run to its end (a storm's drops are all made, so a storm that is firing
// now cannot be missed), every session a storm cut has been seen to end
// by its device (a cut is a close of our own socket, which the device's
// reader sees a moment later: until then it is still counted held), no
// held session was lost and no storm fired for a second (which lets a
// server-side close that is still starting, after a kill, show), no
// device is recovering, all are launched and held but the terminal ones.
func (r *runner) recovered(now time.Time) bool {
	return r.eventsDone.Load() == r.events && r.cutting.Load() == 0 &&
		now.Sub(time.Unix(0, r.lastLoss.Load())) >= time.Second &&
		now.Sub(time.Unix(0, r.lastStorm.Load())) >= time.Second &&
		r.recovering.Load() == 0 && r.launched.Load() == int64(len(r.devices)) &&
		r.held.Load() >= int64(len(r.devices))-r.terminalCount()
}

// devicesIn returns this part's devices numbered in [lo, hi).
func (r *runner) devicesIn(lo, hi int) []*device {
	a := sort.Search(len(r.devices), func(i int) bool { return int(r.devices[i].id) >= lo })
	b := sort.Search(len(r.devices), func(i int) bool { return int(r.devices[i].id) >= hi })
	return r.devices[a:b]
}

func (r *runner) terminalCount() int64 {
	r.rec.mu.Lock()
	defer r.rec.mu.Unlock()
	return r.rec.res.Terminal.Total()
}

// launch starts devs, devices of a wave of n numbered from first, at a
// constant rate over `over` from start (an open model: each at its own
// time, whatever the others' fate; the time of device first+i is the
// same in any part).
func (r *runner) launch(ctx context.Context, devs []*device, start time.Time, over time.Duration, first, n int) {
	for _, d := range devs {
		if over > 0 && !sleepUntil(ctx, start.Add(time.Duration(int64(over)*int64(int(d.id)-first)/int64(n)))) {
			return
		}
		if ctx.Err() != nil || r.stopping() {
			return
		}
		r.launched.Add(1)
		d.attempt()
	}
}

// fireStorm runs storm i.
func (r *runner) fireStorm(ctx context.Context, i int, s stormEvent) {
	r.latest.Store(int32(i))
	switch s.kind {
	case "drop":
		var up []*device
		for _, d := range r.devices {
			if s.region >= 0 && int(d.region.Load()) != s.region {
				continue
			}
			d.mu.Lock()
			if d.state == stUp {
				up = append(up, d)
			}
			d.mu.Unlock()
		}
		rnd := rand.New(rand.NewPCG(r.pl.seed, uint64(i)))
		rnd.Shuffle(len(up), func(a, b int) { up[a], up[b] = up[b], up[a] })
		n := int(float64(len(up))*s.share + 0.5)
		start := time.Now()
		for j, d := range up[:n] {
			if s.over > 0 && !sleepUntil(ctx, start.Add(time.Duration(int64(s.over)*int64(j)/int64(n)))) {
				return
			}
			d.drop(int16(i))
		}
	case "move":
		r.move(i, s.region, s.toRegion)
	case "poison":
		r.poisonStart(i)
	default:
		r.fireOriginStorm(ctx, i, s)
	}
}

func (r *runner) clock(now time.Time, phase string) string {
	if phase == "" {
		return fmt.Sprintf("t=%.1fs", now.Sub(time.Unix(0, r.rec.start.Load())).Seconds())
	}
	return phase
}

func sleepCtx(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// sleepUntil waits until t; false when ctx ended first.
func sleepUntil(ctx context.Context, t time.Time) bool {
	if d := time.Until(t); d > 0 {
		sleepCtx(ctx, d)
	}
	return ctx.Err() == nil
}
