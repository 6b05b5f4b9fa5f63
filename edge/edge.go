package edge

import (
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/health"

	"github.com/corralhq/corral/internal/config"
	"github.com/corralhq/corral/internal/lifecycle"
	"github.com/corralhq/corral/internal/tlsconf"
	"github.com/corralhq/corral/internal/wsserve"
	"github.com/corralhq/corral/limit"
	"github.com/corralhq/corral/wire"
)

// Options are the parts of an edge that are not configuration: the
// metrics registry, the logger and the clock.
type Options struct {
	// Registerer receives the edge's metrics; nil keeps them unregistered
	// (Edge.Stats still reads them).
	Registerer prometheus.Registerer
	// Logger receives the edge's logs; nil discards them.
	Logger *slog.Logger
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// NATS, when set, carries the load reports (load) in place of a
	// connection of the edge's own to load.nats, which may then be
	// empty. The edge does not close it.
	NATS *nats.Conn
}

// Edge is the L7 tier between devices and hubs. Create it with New, then
// Run it; Shutdown drains it. It is safe for concurrent use.
//
// Lock order: Edge.mu, relayStream.mu, relayStream.sendMu and session.mu
// are never held together, except session.mu then relayStream.sendMu (a
// session queues its RelayClose while closing) and relayStream.mu then
// relayStream.sendMu (a tag is handed out and its RelayOpen queued at
// once, so that tags go up the stream in order).
type Edge struct {
	cfg      Config
	sess     SessionConfig
	relayCfg RelayConfig
	drainCfg DrainConfig
	opts     Options
	log      *slog.Logger
	now      func() time.Time
	metrics  *metrics
	codecs   [3]*wire.Codec // by wire.Format
	check    *wire.Codec    // CheckClientFrame: the limits are the same in both formats
	nodeID   string
	epoch    string

	origins  *Origins
	cache    *ReplayCache // nil: replay.disabled
	up       *upstream
	adm      admission
	peers    *peers // the other edges' reports; nil without load.share_places
	relayKey string
	tls      *tlsconf.Server  // nil: plaintext
	upTLS    *tlsconf.Client  // the Relay streams' TLS; nil: plaintext
	health   *health.Server   // grpc.health.v1 of the gRPC port, following Ready
	workers  *wsserve.Workers // nbio's message handlers and the sessions' writers, on kept goroutines

	started  chan struct{}
	done     chan struct{}
	draining atomic.Bool
	opened   atomic.Uint64 // device sessions opened since the start (Stats.Opened)
	// severable counts the welcomed sessions not closing, by rank: the
	// open sessions the severing loop gives the Shedder (admission.go).
	severable limit.AtomicCounts
	ready     atomic.Bool
	stopOnce  sync.Once

	mu        sync.Mutex
	sessions  map[*session]struct{}
	grpcLn    net.Listener
	grpcSrv   *grpc.Server
	ws        *wsServer
	cancelRun context.CancelFunc
	seq       uint64
}

// New builds an edge from a valid configuration. It does no I/O and
// starts no goroutine.
func New(cfg Config, opts Options) (*Edge, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	e := &Edge{
		cfg: cfg, sess: cfg.Session.withDefaults(), relayCfg: cfg.Relay.withDefaults(), drainCfg: cfg.Drain.withDefaults(),
		opts: opts, log: opts.Logger, now: opts.Now, relayKey: cfg.Relay.relayKey(),
		started: make(chan struct{}), done: make(chan struct{}), sessions: make(map[*session]struct{}),
		health: newHealthServer(), workers: wsserve.NewWorkers(10 * time.Second),
	}
	if e.log == nil {
		e.log = slog.New(slog.DiscardHandler)
	}
	if e.now == nil {
		e.now = time.Now
	}
	var err error
	for _, f := range []wire.Format{wire.FormatProto, wire.FormatJSON} {
		if e.codecs[f], err = wire.NewCodec(f, cfg.Wire); err != nil {
			return nil, err
		}
	}
	e.check = e.codecs[wire.FormatProto]
	e.nodeID = cfg.NodeID
	if e.nodeID == "" {
		host, _ := os.Hostname()
		e.nodeID = host + "-" + strconv.Itoa(os.Getpid())
	}
	var b [6]byte
	_, _ = crand.Read(b[:])
	e.epoch = hex.EncodeToString(b[:])
	if err := e.adm.init(cfg.Admission, e.sess.HandshakeTimeout); err != nil {
		return nil, err
	}
	if cfg.Load.SharePlaces {
		if cfg.Load.NATS == "" && opts.NATS == nil {
			return nil, config.Errorf("load.share_places", "edge: load.share_places needs load.nats (or Options.NATS): the other edges' reports come over NATS")
		}
		e.peers = newPeers(e.nodeID, e.now)
		h := e.adm.handshake
		h.SetPlaceRate(func(own float64) float64 { return e.peers.placeRate(own, h.Backlog()) })
	}
	if cfg.TLS.tlsconf().Enabled() {
		if e.tls, err = tlsconf.New(cfg.TLS.tlsconf(), tlsconf.Options{Registerer: opts.Registerer, MetricPrefix: "corral_edge_tls", Logger: e.log}); err != nil {
			return nil, fmt.Errorf("edge: tls: %w", err)
		}
	}
	if cfg.Origins.TLS.Enabled {
		if e.upTLS, err = tlsconf.NewClient(cfg.Origins.TLS.tlsconf(), tlsconf.Options{Registerer: opts.Registerer, MetricPrefix: "corral_edge_origin_tls", Logger: e.log}); err != nil {
			return nil, fmt.Errorf("edge: origins.tls: %w", err)
		}
	}
	e.up = newUpstream(e) // before the origins: a static list calls OnChange in NewOrigins
	if e.origins, err = NewOrigins(cfg.Origins, OriginsOptions{Registerer: opts.Registerer, Logger: e.log, Now: opts.Now,
		OnChange: func(list []*Origin) { e.up.retire(list) }}); err != nil {
		return nil, err
	}
	if !cfg.Replay.Disabled {
		if e.cache, err = NewReplayCache(cfg.Replay, ReplayOptions{Now: opts.Now, Registerer: opts.Registerer}); err != nil {
			return nil, err
		}
	}
	if e.metrics, err = newMetrics(e, opts.Registerer); err != nil {
		return nil, err
	}
	return e, nil
}

// Run opens the listeners and serves until ctx ends or Shutdown is
// called. It returns the first listener error.
func (e *Edge) Run(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	e.mu.Lock()
	e.cancelRun = cancel
	e.mu.Unlock()
	err := e.run(ctx)
	e.stopOnce.Do(func() { close(e.done) })
	return err
}

func (e *Edge) run(ctx context.Context) (err error) {
	startedClosed := false
	defer func() {
		if !startedClosed {
			close(e.started)
		}
	}()
	var wg sync.WaitGroup
	defer wg.Wait()
	ctx, stopAll := context.WithCancel(ctx)
	defer stopAll()

	if e.tls != nil {
		if err := e.tls.Load(); err != nil {
			return config.Field("tls", err) // "tls.key_file: tlsconf: ..." with the files
		}
		wg.Go(func() { _ = e.tls.Run(ctx) })
	}
	if e.upTLS != nil {
		if err := e.upTLS.Load(); err != nil {
			return config.Field("origins.tls", err) // "origins.tls.ca_file: tlsconf: ..." with the file
		}
		wg.Go(func() { _ = e.upTLS.Run(ctx) })
	}
	var ws *wsServer
	if e.cfg.Listen != "" {
		if ws, err = e.newWSServer(); err != nil {
			return err
		}
		if err := ws.start(ctx, e.cfg.Listen); err != nil {
			return fmt.Errorf("edge: listen: %w", err)
		}
	}
	var grpcLn net.Listener
	if e.cfg.GRPCListen != "" {
		if grpcLn, err = (&net.ListenConfig{}).Listen(ctx, "tcp", e.cfg.GRPCListen); err != nil {
			ws.stop()
			return fmt.Errorf("edge: grpc listen: %w", err)
		}
	}
	e.mu.Lock()
	e.ws, e.grpcLn = ws, grpcLn
	if grpcLn != nil {
		e.grpcSrv = e.newGRPCServer()
	}
	e.mu.Unlock()
	errc := make(chan error, 2)
	if grpcLn != nil {
		wg.Go(func() {
			if err := e.grpcSrv.Serve(grpcLn); err != nil && !errors.Is(err, grpc.ErrServerStopped) && !errors.Is(err, net.ErrClosed) {
				errc <- fmt.Errorf("edge: grpc: %w", err)
			}
		})
	}
	wg.Go(func() {
		if err := e.origins.Run(ctx); err != nil {
			errc <- err
		}
	})
	wg.Go(func() { e.tickSessions(ctx) })
	if e.cfg.Load.NATS != "" || e.opts.NATS != nil {
		addr := ws.addrString()
		if addr == "" {
			addr = addrString(grpcLn)
		}
		wg.Go(func() { e.publishLoad(ctx, addr) })
	}
	if e.adm.shedder != nil {
		wg.Go(func() { e.severLoop(ctx, 100*time.Millisecond) })
	}
	e.ready.Store(true)
	e.syncHealth()
	wg.Go(func() { lifecycle.Every(ctx, time.Second, e.syncHealth) })
	close(e.started)
	startedClosed = true
	e.log.Info("edge up", "node", e.nodeID, "listen", ws.addrString(), "grpc", addrString(grpcLn), "tls", e.tls != nil)

	select {
	case <-ctx.Done():
	case err = <-errc:
	}
	e.ready.Store(false)
	e.health.Shutdown() // NOT_SERVING for good
	e.closeListeners()
	e.stopSessions()
	if e.grpcSrv != nil {
		stopped := make(chan struct{})
		go func() { e.grpcSrv.GracefulStop(); close(stopped) }()
		select {
		case <-stopped:
		case <-time.After(time.Second):
			e.grpcSrv.Stop()
		}
	}
	ws.stop()
	e.up.close()
	return err
}

func addrString(l net.Listener) string {
	if l == nil {
		return ""
	}
	return l.Addr().String()
}

// tickSessions runs every session's timers (handshake timeout, pings,
// idle devices, max session age) from one ticker.
func (e *Edge) tickSessions(ctx context.Context) {
	tick := min(time.Second, e.sess.HandshakeTimeout/4, e.sess.PingInterval/4)
	lifecycle.Every(ctx, max(tick, 10*time.Millisecond), func() {
		now := e.now()
		for _, s := range e.snapshotSessions() {
			s.tick(now)
		}
	})
}

// Addr returns the WebSocket address, or nil before Run has bound it (or
// with no listen).
func (e *Edge) Addr() net.Addr {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.ws == nil {
		return nil
	}
	return e.ws.addr()
}

// GRPCAddr returns the device gRPC address, or nil when there is none
// (yet).
func (e *Edge) GRPCAddr() net.Addr {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.grpcLn == nil {
		return nil
	}
	return e.grpcLn.Addr()
}

// Started is closed once Run has bound its listeners (or failed).
func (e *Edge) Started() <-chan struct{} { return e.started }

// Ready reports nil when the edge takes sessions, or why not.
func (e *Edge) Ready() error {
	if e.draining.Load() {
		return errors.New("edge: draining")
	}
	if !e.ready.Load() {
		return errors.New("edge: not started")
	}
	return e.origins.Ready()
}

// Stats is an edge's state at one instant, for programs that embed it and
// tests that do not read Prometheus.
type Stats struct {
	// Sessions is the device sessions open (Sessions()).
	Sessions int
	// OriginSessions is the sessions established on each origin address
	// (handshakes in flight not included).
	OriginSessions map[string]int64
	// Replay is the replay cache's counters (zero with replay.disabled).
	Replay ReplayStats
	// Stage is the Shedder's stage (StageNormal without admission).
	Stage limit.Stage
	// HandshakeLimit and MessageLimit are the two Limiters' limits (0
	// without admission).
	HandshakeLimit, MessageLimit int
	// Handshake is the handshake limit's own state (its closed windows,
	// the last window's p99 and the ideal latency it cuts the limit
	// against; zero without admission).
	Handshake limit.LimitStats
	// Opened is the device sessions opened since the edge started (the
	// sum of corral_edge_sessions_opened_total), which its load reports
	// carry.
	Opened uint64
}

// Stats returns the edge's state now.
func (e *Edge) Stats() Stats {
	st := Stats{Sessions: e.Sessions(), OriginSessions: map[string]int64{}, Opened: e.opened.Load()}
	for _, o := range e.origins.List() {
		st.OriginSessions[o.Addr()] = o.Sessions()
	}
	if e.cache != nil {
		st.Replay = e.cache.Stats()
	}
	if e.adm.shedder != nil {
		st.Stage = e.adm.shedder.Stage()
		st.HandshakeLimit, st.MessageLimit = e.adm.handshake.Limit(), e.adm.messages.Limit()
		st.Handshake = e.adm.handshake.Algorithm().Stats()
	}
	return st
}

// Origins returns the edge's origin set (its addresses, load and
// ejections).
func (e *Edge) Origins() *Origins { return e.origins }

// NodeID returns the edge's node id.
func (e *Edge) NodeID() string { return e.nodeID }

// Sessions returns how many device sessions are open.
func (e *Edge) Sessions() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.sessions)
}

func (e *Edge) register(s *session) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.draining.Load() {
		return false
	}
	e.seq++
	s.seq = e.seq
	e.sessions[s] = struct{}{}
	return true
}

func (e *Edge) unregister(s *session) {
	e.mu.Lock()
	delete(e.sessions, s)
	e.mu.Unlock()
}

func (e *Edge) snapshotSessions() []*session {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := make([]*session, 0, len(e.sessions))
	for s := range e.sessions {
		out = append(out, s)
	}
	return out
}

func (e *Edge) closeListeners() {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.ws != nil {
		e.ws.closeListener()
	}
	if e.grpcLn != nil {
		_ = e.grpcLn.Close()
	}
}

// Shutdown drains the edge: it stops accepting sessions, sends every
// session a GoAway with a jittered retry hint and a close, at drain.rate
// per second or faster when that rate cannot reach them all within
// drain.deadline (drain.go), waits until they are gone or the deadline (or
// ctx) passes, then stops Run.
func (e *Edge) Shutdown(ctx context.Context) error {
	if !e.draining.CompareAndSwap(false, true) {
		<-e.done
		return nil
	}
	e.syncHealth() // NOT_SERVING: draining
	e.closeListeners()
	dctx, cancel := context.WithTimeout(ctx, e.drainCfg.Deadline)
	defer cancel()
	e.drain(dctx)
	e.mu.Lock()
	stop := e.cancelRun
	e.mu.Unlock()
	if stop != nil {
		stop()
		select {
		case <-e.done:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// runCtx is the context of the upstream work: it ends when Run ends.
func (e *Edge) runCtx() context.Context { return e.up.ctx }

// limiterPriority converts a rank to limit's priority.
func limiterPriority(rank int) limit.Priority { return limit.Priority(min(max(rank, 0), 2)) }
