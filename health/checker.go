package health

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"reflect"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Options are the collaborators of a Checker. The zero value works: no
// metrics registry, a discarding logger, the wall clock, net.Dialer and a
// randomly seeded source.
type Options struct {
	// Registerer receives the metrics (see metrics.go); nil keeps them
	// unregistered.
	Registerer prometheus.Registerer
	// Logger receives one line per change of state; nil discards.
	Logger *slog.Logger
	// Now is the clock used for timestamps and probe latencies; nil means
	// time.Now. The wait between probes always uses real timers.
	Now func() time.Time
	// Dial opens the connections of http, tcp and grpc probes; nil uses a
	// net.Dialer. Tests use it to count or fail connections.
	Dial DialFunc
	// Rand seeds the per-check sources that place the first probes and
	// draw the jitter; nil seeds randomly. The Checker owns it after New.
	Rand *rand.Rand
}

// Change is a change of state of a check, passed to subscribers.
type Change struct {
	// Name is the check that changed.
	Name string
	// Healthy is the state entered.
	Healthy bool
	// At is when it changed, by Options.Now.
	At time.Time
	// Reason says why: the last probe error, the count of passed probes,
	// the children's count of a calculated check, or "forced".
	Reason string
}

// Status is a snapshot of one check, as the status page shows it.
type Status struct {
	Name   string
	Kind   string
	Target string
	// Healthy is the current state.
	Healthy bool
	// Forced is true while the state is pinned by Force.
	Forced bool
	// Since is when the current state began (the start of the Checker, or
	// the check's arrival by Update, for the initial state).
	Since time.Time
	// LastProbe is when the last probe ended; zero before the first.
	LastProbe time.Time
	// LastError is the error of the last probe; empty when it passed. For
	// a calculated check it explains an unhealthy count.
	LastError string
	// LastLatency is how long the last probe took.
	LastLatency time.Duration
	// Failures and Successes count the consecutive failed and passed
	// probes up to now (one of them is zero). For a calculated check they
	// count its unhealthy and healthy children.
	Failures, Successes int
	// Probes counts every probe of the check.
	Probes uint64
}

// Result is the outcome of one probe run by Probe.
type Result struct {
	// Err is nil when the probe passed.
	Err error
	// Latency is how long the probe took.
	Latency time.Duration
	// Healthy is the check's state after the result was applied.
	Healthy bool
}

// Checker runs a set of named health checks and is the View servers ask.
// Build it with New, run it with Run, stop it with Shutdown; Update
// replaces its checks while it runs. Healthy is what most callers want: it
// is lock-free and allocation-free. All methods are safe for concurrent
// use.
//
// Lock order: mu (the running loops) before tmu (states and transitions)
// before a check's own mu or qmu (the queue of changes for subscribers).
type Checker struct {
	opts Options
	log  *slog.Logger
	now  func() time.Time
	m    *metrics

	tab atomic.Pointer[table]
	// subs is the copy-on-write list of subscribers; subMu serializes its
	// writers.
	subs  atomic.Pointer[[]*subscriber]
	subMu sync.Mutex

	// qmu guards the queue of changes not yet delivered to subscribers
	// and the flag of the goroutine delivering them. It is taken under tmu
	// and never held while calling a subscriber.
	qmu      sync.Mutex
	pending  []Change
	draining bool

	// tmu serializes every change of state, so that calculated checks and
	// subscribers see transitions in order.
	tmu   sync.Mutex
	slots map[string]*slot // by check name; guarded by tmu

	mu      sync.Mutex
	seed    *rand.Rand // guarded by mu
	runCtx  context.Context
	stopRun context.CancelFunc
	runDone chan struct{}
	shut    bool
	// stopping is set once Run's context ended; no loop starts after it.
	stopping bool
	wg       sync.WaitGroup
}

type subscriber struct{ fn func(Change) }

// slot holds the state of the check of one name. A name keeps its slot for
// the life of the Checker, across Update.
type slot struct{ healthy atomic.Bool }

// table is one immutable set of checks; a reload swaps in a new table.
type table struct {
	byName map[string]*check
	list   []*check // in configuration order
	calc   []*check // calculated checks, children before parents
}

// check is the state of one check. healthy is read without locks; the
// rest is guarded by mu (and changed only under the Checker's tmu).
type check struct {
	cfg    CheckConfig // normalized, immutable
	target string
	// state is shared by every generation of the check of this name, so
	// that a Ref stays valid across Update.
	state *slot

	prober   prober     // nil for calculated checks
	rng      *rand.Rand // used by the check's loop only
	stop     context.CancelFunc
	children []*check // calculated checks; guarded by the Checker's tmu
	removed  bool     // left the configuration; guarded by tmu

	mu          sync.Mutex
	forced      bool
	since       time.Time
	lastProbe   time.Time
	lastErr     string
	lastLatency time.Duration
	fails, oks  int
	probes      uint64
}

// New builds a Checker for cfg after validating it. It does no I/O and
// starts no goroutine; probes begin with Run. Every check starts in its
// initial state.
func New(cfg Config, opts Options) (*Checker, error) {
	checks, err := cfg.normalized()
	if err != nil {
		return nil, err
	}
	c := &Checker{opts: opts, log: opts.Logger, now: opts.Now, seed: opts.Rand, slots: map[string]*slot{}}
	if c.log == nil {
		c.log = slog.New(slog.DiscardHandler)
	}
	if c.now == nil {
		c.now = time.Now
	}
	if c.seed == nil {
		c.seed = rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))
	}
	if c.opts.Dial == nil {
		c.opts.Dial = (&net.Dialer{}).DialContext
	}
	if c.m, err = newMetrics(opts.Registerer); err != nil {
		return nil, fmt.Errorf("health: registering metrics: %w", err)
	}
	c.subs.Store(&[]*subscriber{})
	c.tab.Store(&table{byName: map[string]*check{}})
	c.mu.Lock()
	c.tmu.Lock()
	c.swap(checks) // no changes: every check starts in its state
	c.tmu.Unlock()
	c.mu.Unlock()
	return c, nil
}

// Healthy reports whether the named check is healthy; false for a name the
// Checker does not know. It takes no lock and allocates nothing.
func (c *Checker) Healthy(name string) bool {
	ch := c.tab.Load().byName[name]
	return ch != nil && ch.state.healthy.Load()
}

// Ref is a resolved reference to the check of one name: its Healthy is a
// single atomic load, for callers that resolve their checks once (when a
// zone is built, say) instead of on every query. A Ref follows the check of
// its name across Update: it reports the new definition's state when the
// check changed, and false while no check of that name is configured. The
// zero Ref reports false. It is safe for concurrent use.
type Ref struct{ s *slot }

// Healthy reports whether the referenced check is healthy.
func (r Ref) Healthy() bool { return r.s != nil && r.s.healthy.Load() }

// HealthyFlag returns the boolean Healthy reads, nil for the zero Ref, so
// that a caller on a hot path (authdns/answer's FlagProbe) can load it
// without a method call. Only the Checker stores to it.
func (r Ref) HealthyFlag() *atomic.Bool {
	if r.s == nil {
		return nil
	}
	return &r.s.healthy
}

// Ref returns a reference to the named check and whether a check of that
// name is configured now. The reference is valid either way: for a name
// not configured yet it reads false until an Update adds the check, so a
// caller can resolve the checks of a new configuration before it applies
// it (authdns compiles the zones of a reload, then updates the checks).
// Ref takes tmu when the name is not configured.
func (c *Checker) Ref(name string) (Ref, bool) {
	if ch := c.tab.Load().byName[name]; ch != nil {
		return Ref{ch.state}, true
	}
	c.tmu.Lock()
	defer c.tmu.Unlock()
	if ch := c.tab.Load().byName[name]; ch != nil {
		return Ref{ch.state}, true
	}
	st := c.slots[name]
	if st == nil {
		st = &slot{}
		c.slots[name] = st
	}
	return Ref{st}, false
}

// Run starts the probes and blocks until ctx ends or Shutdown is called;
// it returns nil then. The first probe of each check comes at a random
// point of its first interval. Run may be called once.
func (c *Checker) Run(ctx context.Context) error {
	c.mu.Lock()
	if c.runDone != nil {
		c.mu.Unlock()
		return errors.New("health: Run called twice")
	}
	c.runDone = make(chan struct{})
	if c.shut {
		close(c.runDone)
		c.mu.Unlock()
		return nil
	}
	c.runCtx, c.stopRun = context.WithCancel(ctx)
	for _, ch := range c.tab.Load().list {
		c.start(ch)
	}
	runCtx := c.runCtx
	c.mu.Unlock()

	<-runCtx.Done()
	c.mu.Lock()
	c.stopping = true
	c.mu.Unlock()
	c.wg.Wait()
	close(c.runDone)
	return nil
}

// Shutdown stops the probes and waits until Run has returned or ctx ends.
// It may be called before Run, which then returns at once.
func (c *Checker) Shutdown(ctx context.Context) error {
	c.mu.Lock()
	c.shut = true
	if c.stopRun != nil {
		c.stopRun()
	}
	done := c.runDone
	c.mu.Unlock()
	if done == nil {
		return nil
	}
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("health: shutdown: %w", ctx.Err())
	}
}

// Update replaces the checks with those of cfg, as a configuration reload
// does. A check whose definition did not change keeps its state, its
// counters and its probe schedule; a new or changed check starts in its
// initial state; a removed check stops, its metric series go and it reads
// unhealthy. Subscribers get a Change for every name whose state the
// reload moved. An invalid cfg changes nothing and returns the validation
// error. Checks are matched by name and compared after defaults apply.
func (c *Checker) Update(cfg Config) error {
	checks, err := cfg.normalized()
	if err != nil {
		return err
	}
	c.mu.Lock()
	c.tmu.Lock()
	started, stopped := c.swap(checks)
	c.tmu.Unlock()
	for _, ch := range stopped {
		if ch.stop != nil {
			ch.stop()
		}
	}
	if c.runCtx != nil && !c.stopping {
		for _, ch := range started {
			c.start(ch)
		}
	}
	c.mu.Unlock()
	c.deliver()
	return nil
}

// swap builds a table from checks, reusing unchanged checks of the current
// one (a check whose definition changed but not its kind and target gets a
// new loop and keeps its state), and installs it. It returns the new checks that need a loop and the
// removed ones whose loop must stop, and queues the changes it made. The
// caller holds mu and tmu.
func (c *Checker) swap(checks []CheckConfig) (started, stopped []*check) {
	var changes []Change
	old := c.tab.Load()
	at := c.now()
	before := make(map[string]bool, len(old.list))
	for _, ch := range old.list {
		before[ch.cfg.Name] = ch.state.healthy.Load()
	}
	t := &table{byName: make(map[string]*check, len(checks)), list: make([]*check, 0, len(checks))}
	for _, cc := range checks {
		ch := old.byName[cc.Name]
		if ch == nil || !reflect.DeepEqual(ch.cfg, cc) {
			st := c.slots[cc.Name]
			if st == nil {
				st = &slot{}
				c.slots[cc.Name] = st
			}
			prev := ch
			ch = &check{cfg: cc, target: cc.target(), since: at, state: st}
			if prev != nil && prev.cfg.Kind == cc.Kind && prev.target == ch.target {
				// Only how it is probed changed (interval, timeout,
				// thresholds...): the state, its age and the counters carry
				// over, so a check known to be dead stays dead.
				prev.mu.Lock()
				ch.since, ch.forced = prev.since, prev.forced
				ch.lastProbe, ch.lastErr, ch.lastLatency = prev.lastProbe, prev.lastErr, prev.lastLatency
				ch.fails, ch.oks, ch.probes = prev.fails, prev.oks, prev.probes
				prev.mu.Unlock()
			} else {
				st.healthy.Store(cc.Initial != InitialUnhealthy)
			}
			if cc.Kind != KindCalculated {
				ch.prober = newProber(cc, c.opts.Dial)
				ch.rng = rand.New(rand.NewPCG(c.seed.Uint64(), c.seed.Uint64()))
				started = append(started, ch)
			}
		}
		t.byName[cc.Name] = ch
		t.list = append(t.list, ch)
	}
	for _, ch := range old.list {
		if t.byName[ch.cfg.Name] != ch {
			ch.removed = true
			stopped = append(stopped, ch)
		}
		if t.byName[ch.cfg.Name] == nil {
			ch.state.healthy.Store(false)
			c.m.remove(ch.cfg.Name)
		}
	}
	// Link calculated checks and order them children first; the
	// configuration has no cycles.
	done := make(map[*check]bool, len(t.list))
	var visit func(ch *check)
	visit = func(ch *check) {
		if done[ch] {
			return
		}
		done[ch] = true
		ch.children = ch.children[:0]
		for _, name := range ch.cfg.Children {
			child := t.byName[name]
			visit(child)
			ch.children = append(ch.children, child)
		}
		if ch.cfg.Kind == KindCalculated {
			t.calc = append(t.calc, ch)
		}
	}
	for _, ch := range t.list {
		visit(ch)
	}
	c.tab.Store(t)
	c.recalc(t, at)
	// Subscribers hear of every name whose state the reload moved (a
	// changed check back in its initial state, a calculated check whose
	// children changed, a removed check); a name new to the Checker simply
	// starts in its state.
	var added, changed, kept int
	for _, ch := range t.list {
		name := ch.cfg.Name
		now := ch.state.healthy.Load()
		was, existed := before[name]
		switch {
		case !existed:
			added++
		case old.byName[name] != ch:
			changed++
		default:
			kept++
		}
		if old.byName[name] != ch {
			c.m.add(name, now)
		}
		if existed && was != now {
			changes = append(changes, Change{Name: name, Healthy: now, At: at, Reason: "configuration reloaded"})
		}
	}
	removed := 0
	for _, ch := range old.list {
		if t.byName[ch.cfg.Name] == nil {
			removed++
			if before[ch.cfg.Name] {
				changes = append(changes, Change{Name: ch.cfg.Name, Healthy: false, At: at, Reason: "removed from the configuration"})
			}
		}
	}
	if len(old.list) > 0 {
		c.log.Info("health checks reloaded", "added", added, "changed", changed, "kept", kept, "removed", removed)
	}
	c.record(changes)
	return started, stopped
}

// start launches the probe loop of ch. The caller holds mu and Run has
// begun.
func (c *Checker) start(ch *check) {
	if ch.prober == nil {
		return
	}
	ctx, cancel := context.WithCancel(c.runCtx)
	ch.stop = cancel
	first := firstDelay(ch.cfg.Interval, ch.rng.Float64())
	c.wg.Add(1)
	go c.loop(ctx, ch, first)
}

// firstDelay places the first probe at fraction u of the first interval.
func firstDelay(interval time.Duration, u float64) time.Duration {
	return time.Duration(u * float64(interval))
}

// nextDelay is the wait between probes: the interval varied by up to
// jitter of itself either way, u uniform in [0, 1).
func nextDelay(interval time.Duration, jitter, u float64) time.Duration {
	return time.Duration(float64(interval) * (1 + jitter*(2*u-1)))
}

func (c *Checker) loop(ctx context.Context, ch *check, first time.Duration) {
	defer c.wg.Done()
	defer ch.prober.close()
	t := time.NewTimer(first)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		begin := time.Now()
		c.probe(ctx, ch)
		wait := nextDelay(ch.cfg.Interval, ch.cfg.Jitter, ch.rng.Float64()) - time.Since(begin)
		t.Reset(max(wait, 0))
	}
}

// probe runs one probe of ch and applies its result.
func (c *Checker) probe(ctx context.Context, ch *check) Result {
	pctx, cancel := context.WithTimeout(ctx, ch.cfg.Timeout)
	defer cancel()
	begin := c.now()
	err := ch.prober.probe(pctx)
	end := c.now()
	if err != nil && pctx.Err() != nil && ctx.Err() == nil {
		err = fmt.Errorf("timeout after %v: %w", ch.cfg.Timeout, err)
	}
	timeout := err != nil && errors.Is(pctx.Err(), context.DeadlineExceeded)
	if err != nil && ctx.Err() != nil {
		// Shutting down: the probe was cut short, it says nothing.
		return Result{Err: err, Healthy: ch.state.healthy.Load()}
	}
	lat := end.Sub(begin)
	c.m.duration.WithLabelValues(ch.cfg.Kind).Observe(lat.Seconds())
	healthy := c.apply(ch, err, timeout, lat, end)
	return Result{Err: err, Latency: lat, Healthy: healthy}
}

// Probe runs one probe of the named check now, applies its result exactly
// as the probe loop does, and returns it. It works whether or not Run is
// running; it fails for an unknown or calculated check.
func (c *Checker) Probe(ctx context.Context, name string) (Result, error) {
	ch := c.tab.Load().byName[name]
	if ch == nil {
		return Result{}, fmt.Errorf("health: unknown check %q", name)
	}
	if ch.prober == nil {
		return Result{}, fmt.Errorf("health: check %q is calculated; it has no probe", name)
	}
	return c.probe(ctx, ch), nil
}

// Status returns a snapshot of every check in configuration order.
func (c *Checker) Status() []Status {
	t := c.tab.Load()
	out := make([]Status, 0, len(t.list))
	for _, ch := range t.list {
		out = append(out, ch.status())
	}
	return out
}

// StatusOf returns the snapshot of one check, and false for an unknown
// name.
func (c *Checker) StatusOf(name string) (Status, bool) {
	ch := c.tab.Load().byName[name]
	if ch == nil {
		return Status{}, false
	}
	return ch.status(), true
}

func (ch *check) status() Status {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	return Status{
		Name: ch.cfg.Name, Kind: ch.cfg.Kind, Target: ch.target,
		Healthy: ch.state.healthy.Load(), Forced: ch.forced, Since: ch.since,
		LastProbe: ch.lastProbe, LastError: ch.lastErr, LastLatency: ch.lastLatency,
		Failures: ch.fails, Successes: ch.oks, Probes: ch.probes,
	}
}
