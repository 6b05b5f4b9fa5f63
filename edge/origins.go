package edge

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/bits"
	"math/rand/v2"
	"net"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/corralhq/corral/backoff"
	"github.com/corralhq/corral/health"
	"github.com/corralhq/corral/pick"
	"github.com/corralhq/corral/shard"
)

// ErrNoOrigins is returned by Origins.Pick while no origin address is known:
// before the first resolution succeeded. The caller refuses the session
// with a retry hint.
var ErrNoOrigins = errors.New("edge: no origin address is known yet")

// ErrOriginsDown is returned by Origins.Pick when the Relay transport of
// every origin it may pick (of the tenant's hand with shard) is down: no
// session can be carried, so none is sent. The caller refuses the session
// with a retry hint.
var ErrOriginsDown = errors.New("edge: the transport to every origin is down")

// Outcome is what one exchange with an origin says about its health, as
// the outlier detection counts it. The zero value is OriginNeutral.
type Outcome uint8

const (
	// OriginNeutral says nothing about the origin (the device went away,
	// the origin refused the device's token): the failure count stays.
	OriginNeutral Outcome = iota
	// OriginSuccess is an answer from the origin (a Welcome, a clean
	// close): it resets the origin's consecutive failures.
	OriginSuccess
	// OriginFailure is a failed handshake, an Unavailable answer or a
	// broken stream: ConsecutiveFailures of them in a row eject the origin.
	OriginFailure
)

// OriginsOptions are the collaborators of Origins; every field may be left
// zero.
type OriginsOptions struct {
	// Registerer receives the origin metrics; nil registers nothing.
	Registerer prometheus.Registerer
	// Logger receives resolution failures and ejections; nil discards.
	Logger *slog.Logger
	// Now is the clock of ejections; nil is time.Now.
	Now func() time.Time
	// Rand seeds the picks and the retry jitter, for reproducible tests;
	// it is used under a lock. Nil uses the runtime's lock-free per-thread
	// generator (math/rand/v2's top-level functions).
	Rand *rand.Rand
	// Dial opens the connections of the active health checks; nil is a
	// net.Dialer.
	Dial func(ctx context.Context, network, address string) (net.Conn, error)
	// OnChange, when set, is called with the new answer (in answer order)
	// after every change of the set of addresses (not of their order), one
	// call at a time, outside of any
	// lock of Origins. The upstream code opens connections to the new
	// addresses there; an address that left keeps its sessions, so its
	// connection stays until they end (Origin.Load).
	OnChange func(list []*Origin)
}

// Origins is the set of origin addresses of an edge: it resolves the
// origin name at the answer's TTL, keeps per address the sessions and
// handshakes in flight and the ejection state, and picks the origin of
// each new session (Pick). Build it with NewOrigins, run its resolver with
// Run. It is safe for concurrent use; Pick and the accounting methods of
// Origin take no lock and allocate nothing.
type Origins struct {
	cfg     OriginsConfig // defaults applied
	log     *slog.Logger
	now     func() time.Time
	rnd     func() uint64
	randMu  sync.Mutex // guards opts.Rand when set
	opts    OriginsOptions
	stable  *shard.StableConfig // template of the hands; nil without shard
	server  string              // DNS server host:port; "" for system or static
	fqdn    string
	checker *health.Checker // nil without health checks

	snap atomic.Pointer[originSnapshot]

	// mu guards byAddr and the ejection decisions (Origin.multiplier,
	// Origin.lastUntil). Lock order: mu before the health checker's locks
	// (Update is called under mu).
	mu     sync.Mutex
	byAddr map[netip.AddrPort]*Origin // in the answer, or out of it with load left or remembered for the hands

	stale         atomic.Bool // the last resolution failed; the set is the last good one
	resolveErrors atomic.Uint64
	resolves      atomic.Uint64
	failOpen      atomic.Uint64
	allDown       atomic.Uint64
	ejectSkipped  atomic.Uint64

	refresh  chan struct{} // Refresh's wake-up of the resolve loop
	changeMu sync.Mutex    // serializes OnChange calls

	runMu   sync.Mutex
	started bool
	stopped bool // Shutdown came first: Run returns at once
	cancel  context.CancelFunc
	done    chan struct{}
}

// originSnapshot is one answer: immutable once published.
type originSnapshot struct {
	list   []*Origin     // answer order
	deck   []*Origin     // the hands' deck: list, then the remembered addresses out of it (by address); list without shard
	stable *shard.Stable // hands over deck; nil without shard
}

// Origin is one origin address. Its counters are the load Pick compares:
// sessions established plus handshakes in flight. The methods are safe
// for concurrent use and allocate nothing.
type Origin struct {
	set  *Origins
	ap   netip.AddrPort
	addr string

	sessions   atomic.Int64
	handshakes atomic.Int64

	failures     atomic.Int32 // consecutive
	penaltyEnd   atomic.Int64 // unix nanoseconds when the failures' penalty in p2c's score is worn off; 0: none
	ejectedUntil atomic.Int64 // unix nanoseconds; <= now: in service
	down         atomic.Bool  // the Relay transport is down (SetTransportDown)
	ejections    atomic.Uint64
	inAnswer     atomic.Bool
	healthy      *atomic.Bool // the health check's flag; nil without checks

	// guarded by set.mu
	multiplier int   // times ejected, less the decay
	lastUntil  int64 // end of the last ejection, unix nanoseconds
	leftAt     int64 // when it left the answer, unix nanoseconds; 0 while in it
}

// NewOrigins validates cfg and builds the set. It does no I/O and starts no
// goroutine: a static list is usable at once, a name after the first
// successful Resolve (Run resolves at once, then at every TTL).
func NewOrigins(cfg OriginsConfig, opts OriginsOptions) (*Origins, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	s := &Origins{cfg: cfg.withDefaults(), opts: opts, log: opts.Logger, now: opts.Now, byAddr: map[netip.AddrPort]*Origin{},
		refresh: make(chan struct{}, 1)}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if s.now == nil {
		s.now = time.Now
	}
	s.rnd = rand.Uint64
	if opts.Rand != nil {
		s.rnd = func() uint64 {
			s.randMu.Lock()
			defer s.randMu.Unlock()
			return opts.Rand.Uint64()
		}
	}
	if s.cfg.Shard.HandSize > 0 {
		secret, _ := shard.ParseSecret(s.cfg.Shard.Secret) // validated
		s.stable = &shard.StableConfig{Secret: secret, HandSize: s.cfg.Shard.HandSize}
	}
	if len(s.cfg.Static) == 0 {
		s.fqdn, _ = dnsName(s.cfg.Name)
		if s.cfg.Resolver != ResolverSystem {
			s.server, _ = resolverAddr(s.cfg.Resolver)
		}
	}
	if s.cfg.HealthCheck.Kind != "" {
		reg := opts.Registerer
		if reg != nil {
			reg = prometheus.WrapRegistererWith(prometheus.Labels{"checker": "origins"}, reg)
		}
		var dial health.DialFunc
		if opts.Dial != nil {
			dial = opts.Dial
		}
		c, err := health.New(health.Config{}, health.Options{Registerer: reg, Logger: s.log, Now: opts.Now, Dial: dial})
		if err != nil {
			return nil, fmt.Errorf("edge: origin health checks: %w", err)
		}
		s.checker = c
	}
	if opts.Registerer != nil {
		if err := opts.Registerer.Register(&originCollector{s: s}); err != nil {
			return nil, fmt.Errorf("edge: registering origin metrics: %w", err)
		}
	}
	if len(s.cfg.Static) > 0 {
		addrs := make([]netip.AddrPort, len(s.cfg.Static))
		for i, a := range s.cfg.Static {
			addrs[i] = netip.MustParseAddrPort(a) // validated
		}
		if err := s.apply(addrs); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// Pick returns the origin for a new session of tenant and counts a
// handshake in flight on it: the caller ends it with exactly one
// Origin.HandshakeDone. With pick p2c it draws two distinct usable origins
// at random (of the tenant's hand with shard) and takes the one with the
// lower score (sessions plus handshakes, raised by recent consecutive
// failures: originstransport.go says why), the first drawn on a tie (itself random, never
// the lower index); with first-address, the first usable address of the
// answer. Usable is in the answer, not ejected, not failing its health
// check and with its Relay transport not down; when none is usable, the
// pick fails open over those whose transport is not down (the hand's with
// shard) rather than refuse, and returns ErrOriginsDown when there is
// none: a transport that is down carries nothing, whatever the share of
// origins it leaves. It returns ErrNoOrigins before the first resolution.
// The tenant matters only with shard.
func (s *Origins) Pick(tenant string) (*Origin, error) {
	sn := s.snap.Load()
	if sn == nil || len(sn.list) == 0 {
		return nil, ErrNoOrigins
	}
	now := s.now().UnixNano()
	var o *Origin
	switch {
	case s.cfg.Pick == PickFirstAddress:
		o = s.first(sn.list, now)
	case sn.stable != nil:
		var idx [MaxOriginHand]int
		var hand [MaxOriginHand]*Origin
		h := sn.stable.Hand(idx[:0], tenant)
		for i, w := range h {
			hand[i] = sn.deck[w]
		}
		o = s.p2c(hand[:len(h)], now)
	default:
		o = s.p2c(sn.list, now)
	}
	if o == nil {
		s.allDown.Add(1)
		return nil, ErrOriginsDown
	}
	o.handshakes.Add(1)
	return o, nil
}

// first returns the first usable origin of list, else the first whose
// transport is not down, else nil.
func (s *Origins) first(list []*Origin, now int64) *Origin {
	for _, o := range list {
		if o.usable(now) {
			return o
		}
	}
	s.failOpen.Add(1)
	for _, o := range list {
		if !o.down.Load() {
			return o
		}
	}
	return nil
}

// p2c draws two distinct usable origins of list uniformly and returns the
// one of lower score, the first drawn on a tie (pick.TwoChoices, the draw
// sim models). With none usable it draws among those whose transport is
// not down; with none of those it returns nil.
func (s *Origins) p2c(list []*Origin, now int64) *Origin {
	failOpen := false
	ok := func(o *Origin) bool {
		if failOpen {
			return !o.down.Load()
		}
		return o.usable(now)
	}
	k := 0
	for _, o := range list {
		if ok(o) {
			k++
		}
	}
	if k == 0 {
		s.failOpen.Add(1)
		failOpen = true
		for _, o := range list {
			if ok(o) {
				k++
			}
		}
		if k == 0 {
			return nil
		}
	}
	all := k == len(list)
	nth := func(i int) *Origin {
		if all {
			return list[i]
		}
		for _, o := range list {
			if ok(o) {
				if i == 0 {
					return o
				}
				i--
			}
		}
		return list[i%len(list)] // only when an origin changed state between the scans
	}
	return nth(pick.TwoChoices(k, func(i int) float64 { return nth(i).score(now) }, s.intn))
}

// intn returns a uniform integer in [0, n), n > 0.
func (s *Origins) intn(n int) int {
	hi, _ := bits.Mul64(s.rnd(), uint64(n))
	return int(hi)
}

// usable reports whether o may get a new session at now: in the current
// answer (a hand's deck also holds remembered addresses out of it), not
// ejected, not failing its health check, its Relay transport not down.
func (o *Origin) usable(now int64) bool {
	return o.inAnswer.Load() && o.ejectedUntil.Load() <= now && (o.healthy == nil || o.healthy.Load()) && !o.down.Load()
}

// Addr returns the origin's address, host:port.
func (o *Origin) Addr() string { return o.addr }

// AddrPort returns the origin's address.
func (o *Origin) AddrPort() netip.AddrPort { return o.ap }

// Sessions returns the sessions established on the origin.
func (o *Origin) Sessions() int64 { return o.sessions.Load() }

// Handshakes returns the handshakes in flight to the origin.
func (o *Origin) Handshakes() int64 { return o.handshakes.Load() }

// Load is the origin's load: sessions plus handshakes in flight. Pick
// compares Score, which is Load while the origin's last outcome was no
// failure.
func (o *Origin) Load() int64 { return o.sessions.Load() + o.handshakes.Load() }

// InAnswer reports whether the origin is in the current answer; an origin
// that left it gets no new sessions, but its sessions stay.
func (o *Origin) InAnswer() bool { return o.inAnswer.Load() }

// Ejected reports whether the outlier detection has the origin ejected now.
func (o *Origin) Ejected() bool { return o.ejectedUntil.Load() > o.set.now().UnixNano() }

// Ejections returns how many times the origin was ejected.
func (o *Origin) Ejections() uint64 { return o.ejections.Load() }

// HandshakeDone ends the handshake that Pick counted. OriginSuccess (the
// origin answered Welcome) turns it into a session, which the caller ends
// with SessionDone; OriginFailure counts towards ejection; OriginNeutral
// only ends it.
func (o *Origin) HandshakeDone(out Outcome) {
	o.handshakes.Add(-1)
	if out == OriginSuccess {
		o.sessions.Add(1)
	}
	o.Report(out)
}

// SessionDone ends a session that HandshakeDone(OriginSuccess) began, with
// the outcome of its end: OriginFailure for a broken stream or an
// Unavailable close, OriginSuccess for a clean close, OriginNeutral when
// the device left.
func (o *Origin) SessionDone(out Outcome) {
	o.sessions.Add(-1)
	o.Report(out)
}

// Report records an outcome outside of the session accounting, such as a
// Relay stream that broke (reported once for the stream, its sessions end
// with OriginNeutral).
func (o *Origin) Report(out Outcome) {
	switch out {
	case OriginSuccess:
		if o.failures.Load() != 0 {
			o.failures.Store(0)
		}
		if o.penaltyEnd.Load() != 0 {
			o.penaltyEnd.Store(0)
		}
	case OriginFailure:
		o.set.failure(o)
	}
}

// Ready returns nil once the set holds an answer (at once for a static
// list), an error before.
func (s *Origins) Ready() error {
	if sn := s.snap.Load(); sn == nil || len(sn.list) == 0 {
		return ErrNoOrigins
	}
	return nil
}

// List returns the origins of the current answer, in answer order.
func (s *Origins) List() []*Origin {
	sn := s.snap.Load()
	if sn == nil {
		return nil
	}
	return append([]*Origin(nil), sn.list...)
}

// Stale reports whether the last resolution failed, so that the set is the
// last good answer.
func (s *Origins) Stale() bool { return s.stale.Load() }

// apply makes addrs (answer order, distinct) the current set. Origins that
// left keep their load and get no new session; one that comes back is the
// same Origin with its counters.
func (s *Origins) apply(addrs []netip.AddrPort) error {
	s.changeMu.Lock()
	defer s.changeMu.Unlock()
	list, changed, err := s.swap(addrs)
	if err != nil || !changed || s.opts.OnChange == nil {
		return err
	}
	s.opts.OnChange(append([]*Origin(nil), list...))
	return nil
}

// swap installs addrs under mu and reports whether the set of addresses
// changed.
func (s *Origins) swap(addrs []netip.AddrPort) ([]*Origin, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	list := make([]*Origin, 0, len(addrs))
	in := make(map[netip.AddrPort]bool, len(addrs))
	for _, ap := range addrs {
		if in[ap] {
			continue
		}
		in[ap] = true
		o := s.byAddr[ap]
		if o == nil {
			o = &Origin{set: s, ap: ap, addr: ap.String()}
			if s.checker != nil {
				ref, _ := s.checker.Ref(originCheckName(ap))
				o.healthy = ref.HealthyFlag()
			}
			s.byAddr[ap] = o
		}
		list = append(list, o)
	}
	if len(list) == 0 {
		return nil, false, errors.New("edge: the answer holds no address")
	}
	now := s.now().UnixNano()
	deck := s.deckOf(list, in, now)
	old := s.snap.Load()
	if old != nil && slices.Equal(old.list, list) && slices.Equal(old.deck, deck) {
		s.prune(in, now)
		return list, false, nil
	}
	// A new order of the same addresses is a new answer (first-address
	// follows it) but no change of the set.
	sameSet := old != nil && len(old.list) == len(list)
	for i := 0; sameSet && i < len(old.list); i++ {
		sameSet = in[old.list[i].ap]
	}
	var st *shard.Stable
	if s.stable != nil {
		sc := *s.stable
		sc.Workers = make([]shard.Worker, len(deck))
		for i, o := range deck {
			sc.Workers[i] = shard.Worker{ID: o.addr}
		}
		sc.HandSize = min(sc.HandSize, len(deck))
		var err error
		if st, err = shard.NewStable(sc); err != nil {
			return nil, false, fmt.Errorf("edge: origin hands: %w", err)
		}
	}
	if s.checker != nil && !sameSet {
		names := make([]string, len(list))
		for i, o := range list {
			names[i] = o.addr
		}
		checks, err := originHealthChecks(s.cfg.HealthCheck, names)
		if err != nil {
			return nil, false, err
		}
		if err := s.checker.Update(checks); err != nil {
			return nil, false, fmt.Errorf("edge: origin health checks: %w", err)
		}
	}
	s.prune(in, now)
	s.snap.Store(&originSnapshot{list: list, deck: deck, stable: st})
	return list, !sameSet, nil
}

// deckOf returns the hands' deck for the answer list (in: its addresses)
// at now: list, then the addresses out of it that left it less than
// shard.remember ago (or leave it with this answer), by address. Without
// shard it is list. Called under mu.
func (s *Origins) deckOf(list []*Origin, in map[netip.AddrPort]bool, now int64) []*Origin {
	if s.stable == nil {
		return list
	}
	deck := list
	for ap, o := range s.byAddr {
		if !in[ap] && s.remembered(o, now) {
			if len(deck) == len(list) {
				deck = slices.Clip(slices.Clone(list))
			}
			deck = append(deck, o)
		}
	}
	slices.SortFunc(deck[len(list):], func(a, b *Origin) int { return strings.Compare(a.addr, b.addr) })
	return deck
}

// remembered reports whether o, out of the answer, still belongs to the
// hands' deck at now: it leaves the answer now, or left it less than
// shard.remember ago. Called under mu.
func (s *Origins) remembered(o *Origin, now int64) bool {
	return s.stable != nil && (o.leftAt == 0 || now-o.leftAt < int64(s.cfg.Shard.Remember))
}

// prune marks the origins of byAddr in or out of the answer, notes when
// one left it, and forgets those out of it with no load left and no
// longer remembered for the hands. Called under mu.
func (s *Origins) prune(in map[netip.AddrPort]bool, now int64) {
	for ap, o := range s.byAddr {
		if in[ap] {
			o.inAnswer.Store(true)
			o.leftAt = 0
			continue
		}
		o.inAnswer.Store(false)
		if o.leftAt == 0 {
			o.leftAt = now
		}
		if o.Load() == 0 && !s.remembered(o, now) {
			delete(s.byAddr, ap)
		}
	}
}

// Run resolves the origin name now and again at every TTL (clamped by
// min_ttl and max_ttl), retrying failures with jittered backoff and
// keeping the last good set meanwhile, and runs the active health checks.
// It blocks until ctx ends or Shutdown is called and returns nil then. Run
// may be called once.
func (s *Origins) Run(ctx context.Context) error {
	s.runMu.Lock()
	if s.started {
		s.runMu.Unlock()
		return errors.New("edge: origins already running")
	}
	s.started = true
	if s.stopped {
		s.runMu.Unlock()
		return nil
	}
	ctx, s.cancel = context.WithCancel(ctx)
	s.done = make(chan struct{})
	s.runMu.Unlock()
	defer close(s.done)
	defer s.cancel()

	var wg sync.WaitGroup
	if s.checker != nil {
		wg.Go(func() {
			if err := s.checker.Run(ctx); err != nil {
				s.log.Error("origin health checks stopped", "err", err)
			}
		})
	}
	if len(s.cfg.Static) == 0 {
		s.resolveLoop(ctx)
	}
	<-ctx.Done()
	if s.checker != nil {
		_ = s.checker.Shutdown(context.Background())
	}
	wg.Wait()
	return nil
}

// Shutdown stops Run and waits for it to return, within ctx. Called
// before Run, it makes Run return at once.
func (s *Origins) Shutdown(ctx context.Context) error {
	s.runMu.Lock()
	s.stopped = true
	cancel, done := s.cancel, s.done
	s.runMu.Unlock()
	if cancel == nil {
		return nil
	}
	cancel()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// resolveLoop resolves until ctx ends.
func (s *Origins) resolveLoop(ctx context.Context) {
	var rnd backoff.Rand
	if s.opts.Rand != nil {
		rnd = lockedFloat{s}
	}
	b, err := backoff.NewBackoff(s.cfg.Retry, rnd)
	if err != nil { // validated
		s.log.Error("origin retry policy", "err", err)
		return
	}
	timer := time.NewTimer(0)
	defer timer.Stop()
	<-timer.C
	for {
		last := time.Now()
		ttl, err := s.Resolve(ctx)
		wait := ttl
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			wait = b.Next()
			s.log.Warn("origin resolution failed; keeping the last good set", "name", s.cfg.Name,
				"resolver", s.cfg.Resolver, "err", err, "retry_in", wait, "addresses", len(s.List()))
		} else {
			b.Reset()
		}
		timer.Reset(wait)
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		case <-s.refresh:
			// Early, but not sooner than min_ttl after the last one.
			timer.Stop()
			if d := s.cfg.MinTTL - time.Since(last); d > 0 {
				timer.Reset(d)
				select {
				case <-ctx.Done():
					return
				case <-timer.C:
				}
			}
		}
	}
}

// Refresh asks Run to resolve the name again now, not sooner than min_ttl
// after the previous resolution: the upstream code calls it when a Relay
// stream to an origin broke. It does not block.
func (s *Origins) Refresh() {
	select {
	case s.refresh <- struct{}{}:
	default:
	}
}

// lockedFloat draws the backoff's numbers from OriginsOptions.Rand.
type lockedFloat struct{ s *Origins }

func (l lockedFloat) Float64() float64 {
	l.s.randMu.Lock()
	defer l.s.randMu.Unlock()
	return l.s.opts.Rand.Float64()
}

// Resolve resolves the origin name once and applies the answer. It returns
// the time until the next resolution: the answer's TTL clamped by min_ttl
// and max_ttl. On failure the set stays as it was (Stale reports it) and
// the error says why. A static list returns max_ttl and nil.
func (s *Origins) Resolve(ctx context.Context) (time.Duration, error) {
	if len(s.cfg.Static) > 0 {
		return s.cfg.MaxTTL, nil
	}
	s.resolves.Add(1)
	addrs, ttl, err := s.lookup(ctx)
	if err == nil {
		err = s.apply(addrs)
	}
	if err != nil {
		s.resolveErrors.Add(1)
		s.stale.Store(s.snap.Load() != nil)
		return 0, err
	}
	s.stale.Store(false)
	return min(max(ttl, s.cfg.MinTTL), s.cfg.MaxTTL), nil
}
