package authdns

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/corralhq/corral/authdns/answer"
	"github.com/corralhq/corral/health"
	"github.com/corralhq/corral/internal/lifecycle"
)

// Options are the collaborators of a Server. The zero value works: no
// metrics registry, a discarding logger, the wall clock.
type Options struct {
	// Registerer receives the server's metrics and those of its health
	// checks; nil keeps them unregistered.
	Registerer prometheus.Registerer
	// Logger receives the server's logs; nil discards.
	Logger *slog.Logger
	// Now is the clock of response rate limiting; nil means time.Now.
	Now func() time.Time
	// Health tunes the health checker (dialer, clock, random source);
	// its Registerer and Logger default to the server's.
	Health health.Options
}

// state is what a reload replaces, as one immutable value.
type state struct {
	zones      *zoneSet
	rrl        *limiter
	axfr       []netip.Prefix
	tsigKeys   map[string]*tsigKey // every key, by canonical name
	xfrKeys    map[string]*tsigKey // the keys one of which signs a transfer; nil: none needed
	ednsBuffer int
}

func (st *state) transferAllowed(a netip.Addr) bool {
	a = a.Unmap()
	for _, p := range st.axfr {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// Server is an authoritative DNS server with health-aware routing
// policies. Build it with New, serve with Run, stop with Shutdown; Reload
// replaces its zones and checks while it runs. All methods are safe for
// concurrent use.
type Server struct {
	cfg     *Config // the configuration Run binds; reloads change only zones, checks, RRL and transfers
	opts    Options
	log     *slog.Logger
	checker *health.Checker
	coll    *collector
	tcpSt   *stats
	fb      *feedback  // nil without load feedback
	res     *resolvers // nil without resolver-aware answers

	state atomic.Pointer[state]
	// queryHook, when set before Run, is called with each parsed query
	// name: tests inject panics through it.
	queryHook func(name []byte)
	panics    panicLog

	mu           sync.Mutex // guards the fields below
	udp          []*net.UDPConn
	tcp          net.Listener
	conns        map[net.Conn]struct{}
	running      bool
	shutdown     bool
	cancel       context.CancelFunc
	started      chan struct{}
	startOnce    sync.Once
	done         chan struct{}
	wg           sync.WaitGroup
	ready        atomic.Bool
	reloads      atomic.Uint64
	reloadErrors atomic.Uint64
}

// New validates cfg and builds a Server. It does no I/O and starts no
// goroutine. The zones are compiled once, which checks the records as
// Validate does.
func New(cfg *Config, opts Options) (*Server, error) {
	if cfg == nil {
		return nil, errors.New("authdns: nil config")
	}
	if err := cfg.validateSettings(); err != nil {
		return nil, err
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	s := &Server{cfg: cfg, opts: opts, log: opts.Logger, started: make(chan struct{}), done: make(chan struct{}), conns: make(map[net.Conn]struct{})}
	ho := opts.Health
	if ho.Registerer == nil {
		ho.Registerer = opts.Registerer
	}
	if ho.Logger == nil {
		ho.Logger = opts.Logger.With("component", "health")
	}
	var err error
	if s.checker, err = health.New(cfg.Health, ho); err != nil {
		return nil, fmt.Errorf("authdns: %w", err)
	}
	// The zones resolve their health checks in the checker.
	st, err := s.build(cfg)
	if err != nil {
		return nil, err
	}
	s.state.Store(st)
	s.coll = newCollector(func() (int, int) {
		zs := s.state.Load().zones
		return len(zs.zones), zs.sets
	}, func() (uint64, uint64) { return s.reloads.Load(), s.reloadErrors.Load() })
	s.tcpSt = &stats{}
	s.coll.add(s.tcpSt)
	if cfg.Feedback.enabled() {
		s.fb = newFeedback(s)
	}
	if cfg.Resolvers.Enabled {
		s.res = newResolvers(cfg.Resolvers, opts.Now())
		if cfg.Resolvers.learns() && s.fb != nil {
			s.res.aud = newAudience(cfg.Resolvers)
		}
	}
	if opts.Registerer != nil {
		if err := opts.Registerer.Register(s.coll); err != nil {
			return nil, fmt.Errorf("authdns: registering metrics: %w", err)
		}
		if s.fb != nil {
			if err := opts.Registerer.Register(newFeedbackCollector(s.fb)); err != nil {
				return nil, fmt.Errorf("authdns: registering metrics: %w", err)
			}
		}
		if s.res != nil {
			if err := opts.Registerer.Register(newResolverCollector(s.res, s.coll)); err != nil {
				return nil, fmt.Errorf("authdns: registering metrics: %w", err)
			}
		}
	}
	return s, nil
}

// build compiles the state of cfg, its records reading the health of
// s.checker and served under the running load feedback (s.cfg's: a
// reload does not change it).
func (s *Server) build(cfg *Config) (*state, error) {
	zs, err := compile(cfg, s.cfg.Feedback, s.cfg.Resolvers.learns(), s.probe)
	if err != nil {
		return nil, err
	}
	st := &state{zones: zs, rrl: newLimiter(cfg.RRL, s.opts.Now()), ednsBuffer: cfg.EDNSBuffer}
	for _, p := range cfg.AXFRAllow {
		pp, _ := parsePrefix(p)
		st.axfr = append(st.axfr, pp)
	}
	var kerrs []error
	if st.tsigKeys, st.xfrKeys, kerrs = loadTSIGKeys(cfg); len(kerrs) > 0 {
		return nil, errors.Join(kerrs...)
	}
	return st, nil
}

var (
	_ lifecycle.Part = (*Server)(nil)
	_ answer.Probe   = health.Ref{}
)

// probe resolves a check for the records that answer by it, once per
// compile. A check the running checker does not have yet (a reload adding
// it compiles before it updates the checks) reads unhealthy until the
// update configures it.
func (s *Server) probe(check string) answer.Probe {
	ref, _ := s.checker.Ref(check)
	return ref
}

// Checker returns the server's health checker, for its status page.
func (s *Server) Checker() *health.Checker { return s.checker }

// Reload validates cfg and, when it is valid, replaces the zones, health
// checks, rate limiting and transfer rules; an invalid cfg changes nothing
// and its error is returned. Listen address, sockets, EDNS buffer, TCP,
// feedback and resolvers settings keep their values from New (a change is
// logged).
func (s *Server) Reload(cfg *Config) error {
	st, err := s.prepare(cfg)
	if err != nil {
		s.reloadErrors.Add(1)
		return err
	}
	s.state.Store(st)
	s.reloads.Add(1)
	if cfg.Listen != s.cfg.Listen || cfg.Sockets != s.cfg.Sockets || cfg.EDNSBuffer != s.cfg.EDNSBuffer {
		s.log.Warn("reload: listen, sockets and edns_buffer changes need a restart; keeping the old values")
	}
	if cfg.Feedback != s.cfg.Feedback {
		s.log.Warn("reload: feedback changes need a restart; keeping the old feedback settings")
	}
	if cfg.Resolvers != s.cfg.Resolvers {
		s.log.Warn("reload: resolvers changes need a restart; keeping the old resolvers settings")
	}
	s.log.Info("reloaded", "zones", len(st.zones.zones), "record_sets", st.zones.sets)
	return nil
}

// prepare validates cfg, builds its state (compiling the zones once, which
// checks the records and resolves their checks by name) and updates the
// health checks.
func (s *Server) prepare(cfg *Config) (*state, error) {
	if err := cfg.validateSettings(); err != nil {
		return nil, err
	}
	st, err := s.build(cfg)
	if err != nil {
		return nil, err
	}
	st.ednsBuffer = s.cfg.EDNSBuffer
	if err := s.checker.Update(cfg.Health); err != nil {
		return nil, fmt.Errorf("authdns: %w", err)
	}
	return st, nil
}

// Run binds the UDP sockets and the TCP listener, starts the health checks
// and serves until ctx ends or Shutdown is called. It returns nil after a
// clean stop. Run may be called once.
func (s *Server) Run(ctx context.Context) error {
	s.mu.Lock()
	if s.running {
		s.mu.Unlock()
		return errors.New("authdns: Run called twice")
	}
	if s.shutdown {
		s.mu.Unlock()
		s.markStarted()
		return nil
	}
	s.running = true
	ctx, s.cancel = context.WithCancel(ctx)
	s.mu.Unlock()
	defer close(s.done)

	udp, tcp, err := listen(s.cfg.Listen, s.cfg.sockets())
	if err != nil {
		s.markStarted()
		s.cancel()
		return fmt.Errorf("authdns: %w", err)
	}
	s.mu.Lock()
	s.udp, s.tcp = udp, tcp
	s.mu.Unlock()

	hctx, hcancel := context.WithCancel(context.Background())
	hdone := make(chan struct{})
	go func() {
		defer close(hdone)
		if err := s.checker.Run(hctx); err != nil {
			s.log.Error("health checker", "err", err)
		}
	}()
	fdone := make(chan struct{})
	if s.fb != nil {
		go func() {
			defer close(fdone)
			s.fb.run(hctx)
		}()
	} else {
		close(fdone)
	}
	rdone := make(chan struct{})
	if s.res != nil {
		go func() {
			defer close(rdone)
			s.res.run(hctx, s.now)
		}()
	} else {
		close(rdone)
	}
	for _, c := range udp {
		st := &stats{}
		s.coll.add(st)
		w := newWorker(s, st, rand.Uint64())
		if s.res != nil {
			w.tab = s.res.newTable(nil) // the socket's own: one writer
		}
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			w.serveUDP(c)
		}()
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		s.serveTCP(tcp)
	}()
	s.ready.Store(true)
	s.markStarted()
	s.log.Info("dns server up", "addr", udp[0].LocalAddr().String(), "udp_sockets", len(udp), "zones", len(s.state.Load().zones.zones))

	<-ctx.Done()
	s.ready.Store(false)
	s.closeAll()
	s.wg.Wait()
	hcancel()
	<-hdone
	<-fdone
	<-rdone
	return nil
}

// closeAll closes the sockets, the listener and the TCP connections.
func (s *Server) closeAll() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range s.udp {
		_ = c.Close()
	}
	if s.tcp != nil {
		_ = s.tcp.Close()
	}
	for c := range s.conns {
		_ = c.Close()
	}
}

// Shutdown stops the server and waits until Run has returned or ctx ends.
// It may be called before Run, which then returns at once.
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	s.shutdown = true
	running := s.running
	if s.cancel != nil {
		s.cancel()
	}
	s.mu.Unlock()
	if !running {
		return nil
	}
	select {
	case <-s.done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("authdns: shutdown: %w", ctx.Err())
	}
}

// markStarted closes started once.
func (s *Server) markStarted() { s.startOnce.Do(func() { close(s.started) }) }

// Started is closed once Run has bound its sockets (or failed to).
func (s *Server) Started() <-chan struct{} { return s.started }

// Ready returns nil while the server answers queries.
func (s *Server) Ready() error {
	if !s.ready.Load() {
		return errors.New("authdns: not serving")
	}
	return nil
}

// Addr returns the address the server answers on (UDP and TCP share it),
// or nil before Run has bound it.
func (s *Server) Addr() net.Addr {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.udp) == 0 {
		return nil
	}
	return s.udp[0].LocalAddr()
}

// Reloads returns how many reloads succeeded.
func (s *Server) Reloads() uint64 { return s.reloads.Load() }
