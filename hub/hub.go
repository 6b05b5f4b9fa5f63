package hub

import (
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/maphash"
	"log/slog"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	"google.golang.org/protobuf/proto"

	"github.com/corralhq/corral/hub/auth"
	"github.com/corralhq/corral/hub/history"
	"github.com/corralhq/corral/internal/config"
	"github.com/corralhq/corral/internal/lifecycle"
	"github.com/corralhq/corral/internal/natsutil"
	"github.com/corralhq/corral/internal/tlsconf"
	"github.com/corralhq/corral/internal/wsserve"
	"github.com/corralhq/corral/limit"
	"github.com/corralhq/corral/wire"
	"github.com/corralhq/corral/wire/corralv1"
)

// Options are the parts of a hub that are not configuration: the metrics
// registry, the logger, an already open NATS connection and the clock.
type Options struct {
	// Registerer receives the hub's metrics; nil keeps them unregistered.
	Registerer prometheus.Registerer
	// Logger receives the hub's logs; nil discards them.
	Logger *slog.Logger
	// NATS, when set, is the hub's NATS connection instead of one made per
	// Config.NATS; the hub does not close it. The server behind it needs
	// JetStream (for the history store "jetstream" and for ingest), and the
	// hub's streams then use file storage, as on an external NATS.
	NATS *nats.Conn
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Overload, when set, decides admission and shedding (see overload.go).
	Overload Overload
}

// Hub is the origin server: it holds sessions over WebSocket and gRPC,
// keeps channel history, fans messages out over NATS and takes publishes
// from backends. Create it with New, then Run it; Shutdown drains it. It is
// safe for concurrent use.
//
// Lock order: Hub.mu, then chanShard.mu, then hubChannel.mu, then
// session.mu (Hub.mu is never held while calling into a session).
type Hub struct {
	cfg        Config
	sess       SessionConfig
	histCfg    history.Config
	ingestCfg  IngestConfig
	drainCfg   DrainConfig
	conns      ConnectionConfig
	opts       Options
	log        *slog.Logger
	now        func() time.Time
	metrics    *metrics
	verifier   *auth.Verifier
	codecCheck *wire.Codec
	codecs     [3]*wire.Codec // by wire.Format
	nodeID     string
	nodeEpoch  string
	seed       maphash.Seed
	shards     [numShards]*chanShard
	overload   Overload
	countFDs   bool            // overload wants the open descriptors (overload.go)
	limiter    *limit.Limiter  // in-flight publishes; nil: none
	latency    latencyMetrics  // overload.go
	health     *health.Server  // grpc.health.v1 of the gRPC port, following Ready
	tls        *tlsconf.Server // nil: plaintext

	nc          *nats.Conn          // set by run before ready
	js          jetstream.JetStream // on nc
	fileStorage bool                // streams on files: NATS keeps them
	store       history.Store
	runCtx      context.Context // Run's context, for work started by nbio callbacks

	started  chan struct{}
	done     chan struct{} // closed when Shutdown has finished draining
	draining atomic.Bool
	ready    atomic.Bool
	// unhealthy is set by the operator's control (SetUnhealthy).
	unhealthy atomic.Bool
	// historyDown holds why the history cannot be read or written (the
	// last failed open or probe), nil while it can.
	historyDown atomic.Pointer[string]
	replicas    atomic.Int64  // of the history streams, as the hub opened or scaled them
	opened      atomic.Uint64 // sessions opened since the start (Stats.Opened)
	// severable counts the welcomed sessions not closing, by rank: the
	// open sessions the severing loop gives the policy (overload.go).
	severable limit.AtomicCounts
	stopOnce  sync.Once

	mu        sync.Mutex
	sessions  map[*session]struct{}
	httpLn    net.Listener
	grpcLn    net.Listener
	wsSrv     *wsserve.Server // WebSocket upgrades and the HTTP API on httpLn
	grpcSrv   *grpc.Server
	cancelRun context.CancelFunc
	sessSeq   uint64

	dmu    sync.Mutex
	dedupe map[string]dedupeEntry

	grants grants

	relay relays // Corral.Relay: keys and open streams (relay.go)

	workers *wsserve.Workers // message handlers, writers and handshakes
}

type dedupeEntry struct {
	res *corralv1.Published
	at  time.Time
}

// New builds a hub from a valid configuration. It does no I/O and starts no
// goroutine.
func New(cfg Config, opts Options) (*Hub, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	v, err := auth.New(cfg.Auth)
	if err != nil {
		return nil, err
	}
	h := &Hub{
		cfg: cfg, sess: cfg.Session.withDefaults(), histCfg: cfg.History.WithDefaults(),
		ingestCfg: cfg.Ingest.withDefaults(), drainCfg: cfg.Drain.withDefaults(),
		opts: opts, log: opts.Logger, now: opts.Now, verifier: v,
		seed: maphash.MakeSeed(), started: make(chan struct{}), done: make(chan struct{}),
		workers:  wsserve.NewWorkers(10 * time.Second),
		sessions: make(map[*session]struct{}), dedupe: make(map[string]dedupeEntry),
		overload: opts.Overload, health: newHealthServer(),
	}
	h.conns = cfg.Connections.withDefaults(h.sess.HandshakeTimeout)
	if err := h.relay.init(cfg.Relay); err != nil {
		return nil, err
	}
	if h.log == nil {
		h.log = slog.New(slog.DiscardHandler)
	}
	if h.now == nil {
		h.now = time.Now
	}
	h.metrics = newMetrics(opts.Registerer)
	// A policy of the embedder's gets the descriptors; the Shedder only
	// under its ceiling (observeResources).
	h.countFDs = h.overload != nil || (cfg.Overload.Enabled && cfg.Overload.Shedder.Resources.MaxFDs > 0)
	if cfg.Overload.Enabled {
		if h.overload == nil {
			sh, err := limit.NewShedder(cfg.Overload.Shedder)
			if err != nil {
				return nil, fmt.Errorf("hub: overload.shedder: %w", err)
			}
			h.overload = sh
		}
		if h.limiter, err = limit.NewLimiter(cfg.Overload.Publish); err != nil {
			return nil, fmt.Errorf("hub: overload.publish: %w", err)
		}
	}
	if err := h.registerOverloadMetrics(opts.Registerer); err != nil {
		return nil, err
	}
	if tc := cfg.TLS.tlsconf(); tc.Enabled() {
		if h.tls, err = tlsconf.New(tc, tlsconf.Options{Registerer: opts.Registerer, MetricPrefix: "corral_hub_tls", Logger: h.log}); err != nil {
			return nil, err
		}
	}
	for _, f := range []wire.Format{wire.FormatProto, wire.FormatJSON} {
		if h.codecs[f], err = wire.NewCodec(f, cfg.Wire); err != nil {
			return nil, err
		}
	}
	h.codecCheck = h.codecs[wire.FormatProto]
	h.nodeID = cfg.NodeID
	if h.nodeID == "" {
		host, _ := os.Hostname()
		h.nodeID = host + "-" + strconv.Itoa(os.Getpid())
	}
	var b [6]byte
	_, _ = crand.Read(b[:])
	h.nodeEpoch = hex.EncodeToString(b[:])
	for i := range h.shards {
		h.shards[i] = &chanShard{h: h, chans: make(map[string]*hubChannel), in: make(chan *nats.Msg, shardBuffer)}
	}
	return h, nil
}

// Run connects to NATS, opens the history (waiting, with Ready failing, as
// long as JetStream does not take the streams), then the listeners, and
// serves until ctx ends or Shutdown is called. It returns the first
// listener error.
func (h *Hub) Run(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	h.mu.Lock()
	h.cancelRun = cancel
	h.mu.Unlock()
	err := h.run(ctx)
	h.stopOnce.Do(func() { close(h.done) })
	return err
}

func (h *Hub) run(ctx context.Context) (err error) {
	startedClosed := false
	defer func() {
		if !startedClosed {
			close(h.started)
		}
	}()
	if h.opts.NATS != nil {
		if h.js, err = jetstream.New(h.opts.NATS); err != nil {
			return fmt.Errorf("hub: jetstream: %w", err)
		}
		h.nc, h.fileStorage = h.opts.NATS, true
	} else {
		c, err := natsutil.Connect(ctx, h.cfg.NATS.natsutil(), "corral-hub-"+h.nodeID, h.log)
		if err != nil {
			return err
		}
		defer c.Close()
		h.nc, h.js, h.fileStorage = c.NC, c.JS, c.Persistent()
	}
	if err := h.openStoresRetrying(ctx); err != nil {
		return err
	}
	if ctx.Err() != nil {
		return nil // stopped while waiting for JetStream
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	// Deferred after the Wait, so it runs first: a listener error returns
	// with the goroutines started so far stopped, not waited for forever.
	ctx, stopAll := context.WithCancel(ctx)
	defer stopAll()
	for _, sh := range h.shards {
		wg.Go(func() { h.runShard(ctx, sh) })
	}
	psub, err := h.nc.QueueSubscribe(subjectPublish+">", "corral-hub", func(m *nats.Msg) { h.natsPublish(ctx, m) })
	if err != nil {
		return fmt.Errorf("hub: publish API subscription: %w", err)
	}
	defer func() { _ = psub.Unsubscribe() }()

	if h.tls != nil {
		if err := h.tls.Load(); err != nil {
			return config.Field("tls", err)
		}
		wg.Go(func() { _ = h.tls.Run(ctx) }) // reloads and ticket key rotations
	}
	// No TCP keep-alive on the WebSocket and HTTP listener: sessions are
	// kept by the hub's pings and HTTP connections by the server's
	// timeouts, and the probes' four setsockopt calls were 2 % of the CPU
	// of a session set-up (issue 10, item 13).
	httpLn, err := (&net.ListenConfig{KeepAlive: -1}).Listen(ctx, "tcp", h.cfg.Listen)
	if err != nil {
		return fmt.Errorf("hub: listen: %w", err)
	}
	var grpcLn net.Listener
	if h.cfg.GRPCListen != "" {
		if grpcLn, err = net.Listen("tcp", h.cfg.GRPCListen); err != nil {
			_ = httpLn.Close()
			return fmt.Errorf("hub: grpc listen: %w", err)
		}
	}
	h.runCtx = ctx
	wsSrv, err := wsserve.New(h.wsConfig(), wsHandler{h}, h.httpMux())
	if err == nil {
		err = wsSrv.Start()
	}
	if err != nil {
		_ = httpLn.Close()
		if grpcLn != nil {
			_ = grpcLn.Close()
		}
		return fmt.Errorf("hub: http: %w", err)
	}
	defer wsSrv.Stop()
	h.mu.Lock()
	h.httpLn, h.grpcLn = httpLn, grpcLn
	h.wsSrv = wsSrv
	if grpcLn != nil {
		h.grpcSrv = h.newGRPCServer()
	}
	h.mu.Unlock()
	errc := make(chan error, 2)
	wg.Go(func() {
		if err := wsSrv.Serve(httpLn); err != nil {
			errc <- fmt.Errorf("hub: http: %w", err)
		}
	})
	if grpcLn != nil {
		wg.Go(func() {
			if err := h.grpcSrv.Serve(grpcLn); err != nil && !errors.Is(err, grpc.ErrServerStopped) && !errors.Is(err, net.ErrClosed) {
				errc <- fmt.Errorf("hub: grpc: %w", err)
			}
		})
	}
	wg.Go(func() { h.sweep(ctx) })
	store := h.store // the store as opened (tests swap h.store later)
	wg.Go(func() { h.probeHistory(ctx, store, historyProbeInterval) })
	wg.Go(func() { h.severLoop(ctx, 100*time.Millisecond) })
	wg.Go(func() { h.tickSessions(ctx) })
	if h.cfg.Load.Enabled {
		wg.Go(func() { h.publishLoad(ctx, httpLn) })
	}
	h.ready.Store(true)
	h.syncHealth()
	wg.Go(func() { lifecycle.Every(ctx, time.Second, h.syncHealth) })
	close(h.started)
	startedClosed = true
	h.log.Info("hub up", "node", h.nodeID, "listen", httpLn.Addr().String(), "grpc", addrString(grpcLn), "tls", h.tls != nil, "history", h.histCfg.Store)

	select {
	case <-ctx.Done():
	case err = <-errc:
	}
	h.ready.Store(false)
	h.health.Shutdown() // NOT_SERVING for good
	h.closeListeners()
	h.relay.closeWhenEmpty(h)
	h.stopSessions()
	cancelCtx, c := context.WithTimeout(context.Background(), time.Second)
	defer c()
	_ = wsSrv.Shutdown(cancelCtx)
	if h.grpcSrv != nil {
		// Let the handlers return their close status, then cut.
		stopped := make(chan struct{})
		go func() { h.grpcSrv.GracefulStop(); close(stopped) }()
		select {
		case <-stopped:
		case <-cancelCtx.Done():
			h.grpcSrv.Stop()
		}
	}
	return err
}

func addrString(l net.Listener) string {
	if l == nil {
		return ""
	}
	return l.Addr().String()
}

// sweep forgets aged-out history and publish dedupe entries.
func (h *Hub) sweep(ctx context.Context) {
	lifecycle.Every(ctx, max(h.histCfg.Window/4, time.Second), func() {
		now := h.now()
		h.store.Sweep(now)
		h.dmu.Lock()
		for k, e := range h.dedupe {
			if now.Sub(e.at) > h.histCfg.Window {
				delete(h.dedupe, k)
			}
		}
		h.dmu.Unlock()
	})
}

// tickSessions runs every session's timers (handshake timeout, pings) from
// one ticker, a few times per shortest timeout.
func (h *Hub) tickSessions(ctx context.Context) {
	tick := min(time.Second, h.sess.HandshakeTimeout/4, h.sess.PingInterval/4)
	lifecycle.Every(ctx, max(tick, 10*time.Millisecond), func() {
		now := h.now()
		for _, s := range h.snapshotSessions() {
			s.tick(now)
		}
	})
}

// Addr returns the HTTP (WebSocket and publish) address, or nil before Run
// has bound it.
func (h *Hub) Addr() net.Addr {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.httpLn == nil {
		return nil
	}
	return h.httpLn.Addr()
}

// GRPCAddr returns the gRPC address, or nil when there is none (yet).
func (h *Hub) GRPCAddr() net.Addr {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.grpcLn == nil {
		return nil
	}
	return h.grpcLn.Addr()
}

// Started is closed once Run has bound its listeners (or failed, or was
// stopped while it waited for JetStream).
func (h *Hub) Started() <-chan struct{} { return h.started }

// Ready reports nil when the hub takes sessions, or why not.
func (h *Hub) Ready() error {
	if h.draining.Load() {
		return errors.New("hub: draining")
	}
	if h.unhealthy.Load() {
		return errors.New("hub: marked unhealthy by the operator")
	}
	if why := h.historyDown.Load(); why != nil {
		return errors.New("hub: history unavailable: " + *why)
	}
	if !h.ready.Load() {
		return errors.New("hub: not started")
	}
	if !h.nc.IsConnected() {
		return errors.New("hub: NATS disconnected")
	}
	return nil
}

// NodeID returns the hub's node id.
func (h *Hub) NodeID() string { return h.nodeID }

// Sessions returns how many sessions are open.
func (h *Hub) Sessions() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.sessions)
}

func (h *Hub) nextSessionSeq() uint64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.sessSeq++
	return h.sessSeq
}

// grants interns the grants of sessions: many sessions hold tokens that
// grant the same tenant, patterns and priority.
type grants struct {
	mu sync.Mutex
	m  map[string]*grant
}

// intern returns the grant equal to v that sessions share. Its key is
// built in a buffer on the stack and looked up without a string (the
// key's concatenation and joins were 2 to 4 allocations of every Hello);
// only a new grant's key becomes one.
func (g *grants) intern(v grant) *grant {
	var buf [256]byte
	k := append(buf[:0], v.tenant...)
	k = append(k, 0)
	k = appendJoined(k, v.channels)
	k = append(k, 0)
	k = appendJoined(k, v.publish)
	k = append(k, 0)
	k = strconv.AppendInt(k, int64(v.maxRank), 10)
	g.mu.Lock()
	defer g.mu.Unlock()
	if p, ok := g.m[string(k)]; ok {
		return p
	}
	if g.m == nil || len(g.m) >= maxGrants {
		g.m = make(map[string]*grant) // bounded: start over rather than grow without end
	}
	p := new(grant) // not &v: v would then be on the heap on every call
	*p = v
	g.m[string(k)] = p
	return p
}

// appendJoined appends list, its elements separated by 0x01.
func appendJoined(b []byte, list []string) []byte {
	for i, s := range list {
		if i > 0 {
			b = append(b, 1)
		}
		b = append(b, s...)
	}
	return b
}

// maxGrants bounds the interned grants.
const maxGrants = 4096

func (h *Hub) register(s *session) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.draining.Load() {
		return false
	}
	h.sessions[s] = struct{}{}
	return true
}

func (h *Hub) unregister(s *session) {
	h.mu.Lock()
	delete(h.sessions, s)
	h.mu.Unlock()
}

func (h *Hub) snapshotSessions() []*session {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make([]*session, 0, len(h.sessions))
	for s := range h.sessions {
		out = append(out, s)
	}
	return out
}

func (h *Hub) closeListeners() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.httpLn != nil {
		_ = h.httpLn.Close()
	}
	if h.grpcLn != nil {
		_ = h.grpcLn.Close()
	}
}

// Shutdown drains the hub: it stops accepting sessions, sends every
// session (relayed ones included: GoAway, then RelayClose; each Relay
// stream ends once its sessions are gone) a GoAway with a jittered retry
// hint and a close frame, at
// drain.rate per second or faster when that rate cannot reach them all
// within drain.deadline (drain.go), waits until they are gone or the
// deadline (or ctx) passes, then stops Run. No session is cut without its
// GoAway, whatever the deadline.
func (h *Hub) Shutdown(ctx context.Context) error {
	if !h.draining.CompareAndSwap(false, true) {
		<-h.done
		return nil
	}
	h.syncHealth() // NOT_SERVING: draining
	h.closeListeners()
	h.relay.closeWhenEmpty(h) // a Relay stream ends once its sessions are drained
	dctx, cancel := context.WithTimeout(ctx, h.drainCfg.Deadline)
	defer cancel()
	h.drain(dctx)
	h.mu.Lock()
	stop := h.cancelRun
	h.mu.Unlock()
	if stop != nil {
		stop()
		select {
		case <-h.done:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// abort stops the hub as a crash would: connections are cut without a
// frame, nothing is drained. Tests use it to kill a hub of a fleet.
func (h *Hub) abort() {
	h.draining.Store(true)
	h.closeListeners()
	h.mu.Lock()
	g := h.grpcSrv
	stop := h.cancelRun
	h.mu.Unlock()
	if g != nil {
		g.Stop()
	}
	for _, s := range h.snapshotSessions() {
		if a, ok := s.tr.(aborter); ok {
			a.abort(wire.Close{Code: wire.CloseGoingAway, Text: "hub crashed"})
		}
	}
	if stop != nil {
		stop()
	}
	<-h.done
}

// isIngest reports whether channel is an ingest channel.
func (h *Hub) isIngest(channel string) bool {
	for _, p := range h.ingestCfg.Prefixes {
		if strings.HasPrefix(channel, p) {
			return true
		}
	}
	return false
}

// PublishRequest is one message for Hub.Publish.
type PublishRequest struct {
	// Tenant owns the channel.
	Tenant string
	// Channel is the channel name, without the tenant.
	Channel string
	// Priority is the message's priority; the zero value means P2.
	Priority wire.Priority
	// Data is the payload.
	Data []byte
	// ClientMessageID, when set, makes a retried publish a duplicate within
	// the history window.
	ClientMessageID string
}

// Publish stores a message on the tenant's channel and fans it out to every
// hub with subscribers, or, for an ingest channel, appends it to the ingest
// stream. A request with a ClientMessageID already seen within the history
// window is a duplicate: on this hub (a map), and on every hub of the fleet
// with the JetStream history (JetStream's message-id dedupe). This is the
// entry point of a program that embeds the hub; the publish APIs (HTTP,
// gRPC, NATS) and sessions go through the same path. Errors are wire.Close
// values.
func (h *Hub) Publish(ctx context.Context, req PublishRequest) (*corralv1.Published, error) {
	return h.publishVia(ctx, req, "go")
}

// publishVia is Publish with the name of the API that carried the request,
// for the metrics.
func (h *Hub) publishVia(ctx context.Context, req PublishRequest, api string) (*corralv1.Published, error) {
	tenant, channel, data, clientID := req.Tenant, req.Channel, req.Data, req.ClientMessageID
	rank := wire.Rank(req.Priority)
	if err := h.checkPublish(req); err != nil {
		return nil, err
	}
	if h.limiter != nil {
		tok, ok := h.limiter.TryAcquirePriority(limit.Priority(rank))
		if !ok {
			r := limit.Retry{After: time.Second}
			if h.overload != nil {
				r = h.overload.RetryWindowAt(limit.Priority(rank), h.now())
			}
			h.metrics.shedInc("reject_publish", rank)
			return nil, refusal(wire.CloseTryAgainLater, r, "too many publishes in flight")
		}
		res, err := h.publish(ctx, tenant, channel, rank, data, clientID, api)
		if err != nil {
			tok.Drop()
		} else {
			tok.Success()
		}
		return res, err
	}
	return h.publish(ctx, tenant, channel, rank, data, clientID, api)
}

// checkPublish is the one validation of every publish path (an embedding
// program, session, gRPC, HTTP, NATS): they all come through publishVia,
// which calls it before the limiter and the store, so a client's mistake
// is a 4004 (or 1009) naming the field, never a store error or a limiter
// drop. The rules beyond the tenant are wire's (Codec.CheckPublish), the
// same that CheckClientFrame applies to a session's Publish frame.
func (h *Hub) checkPublish(req PublishRequest) error {
	if !auth.ValidTenant(req.Tenant) {
		return wire.Close{Code: wire.CloseBadRequest, Text: "tenant: " + strconv.Quote(truncate(req.Tenant, 70)) + " is not 1 to 64 letters, digits, '_' or '-'"}
	}
	p := corralv1.Publish{Channel: req.Channel, Priority: req.Priority, Data: req.Data, ClientMessageId: req.ClientMessageID}
	return h.codecCheck.CheckPublish(&p)
}

// truncate shortens s to at most n bytes, for error texts that quote input.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

func (h *Hub) publish(ctx context.Context, tenant, channel string, rank int, data []byte, clientID, api string) (*corralv1.Published, error) {
	defer h.observePublish(rank, h.now())
	key := tenant + "." + channel
	dk := ""
	if clientID != "" {
		dk = key + "\x00" + clientID
		h.dmu.Lock()
		e, ok := h.dedupe[dk]
		h.dmu.Unlock()
		if ok {
			dup := proto.CloneOf(e.res)
			dup.Duplicate = true
			return dup, nil
		}
	}
	var res *corralv1.Published
	if h.isIngest(channel) {
		m := nats.NewMsg(subjectIngest + key)
		m.Data = data
		m.Header.Set(history.HeaderPriority, strconv.Itoa(rank))
		var opts []jetstream.PublishOpt
		if clientID != "" {
			opts = append(opts, jetstream.WithMsgID(key+"/"+clientID))
		}
		ack, err := h.js.PublishMsg(ctx, m, opts...)
		if err != nil {
			h.log.Warn("ingest failed", "channel", key, "err", err)
			return nil, wire.Close{Code: wire.CloseInternal, RetryAfter: time.Second, Text: "ingest unavailable"}
		}
		res = &corralv1.Published{Channel: channel, Epoch: "ingest", Offset: ack.Sequence, Duplicate: ack.Duplicate}
		h.metrics.published.WithLabelValues("ingest").Inc()
	} else {
		m, err := h.store.Append(ctx, key, history.Message{Priority: uint8(rank), Data: data, ClientID: clientID})
		if err != nil {
			h.metrics.historyErrors.Inc()
			h.log.Warn("publish failed", "channel", key, "err", err)
			return nil, wire.Close{Code: wire.CloseInternal, RetryAfter: time.Second, Text: "history unavailable"}
		}
		res = &corralv1.Published{Channel: channel, Epoch: m.Epoch, Offset: m.Offset, Duplicate: m.Duplicate}
		if !m.Duplicate { // a duplicate (from another hub's publish) was announced by that hub
			if err := h.nc.PublishMsg(fanoutMsg(key, m)); err != nil {
				// Stored but not announced: subscribers get it by backfill on
				// the next message, or on resume.
				h.log.Warn("fan-out failed", "channel", key, "err", err)
			}
			h.metrics.published.WithLabelValues(api).Inc()
		}
	}
	if dk != "" {
		h.dmu.Lock()
		h.dedupe[dk] = dedupeEntry{res: res, at: h.now()}
		h.dmu.Unlock()
	}
	return res, nil
}
