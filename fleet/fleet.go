package fleet

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/corralhq/corral/authdns"
	"github.com/corralhq/corral/edge"
	"github.com/corralhq/corral/health"
	"github.com/corralhq/corral/hub"
	"github.com/corralhq/corral/hub/auth"
	"github.com/corralhq/corral/hub/history"
	"github.com/corralhq/corral/internal/natsutil"
)

// Options are what a Fleet takes from its embedder besides Config.
type Options struct {
	// Logger receives every part's logs, each with a "part" attribute;
	// nil discards them.
	Logger *slog.Logger
	// Hub, when set, changes each hub's configuration and options before
	// it starts (i is the hub's index); tests use it to tune a bound or
	// hand a hub its own admission policy.
	Hub func(i int, c *hub.Config, o *hub.Options)
	// Edge, when set, changes each edge's configuration before it starts.
	Edge func(i int, c *edge.Config)
}

// Part is one running server of the fleet with its own metrics registry.
type Part struct {
	// Name is the part's name: "dns", "hub-1", ...
	Name string
	// Registry holds the part's metrics.
	Registry *prometheus.Registry

	errc chan error
}

// Hub is a running hub of the fleet.
type Hub struct {
	Part
	*hub.Hub
	// IP is the hub's address.
	IP     string
	gate   *gate
	killed bool
}

// Edge is a running edge of the fleet.
type Edge struct {
	Part
	*edge.Edge
	// IP is the edge's address.
	IP      string
	stopped bool
}

// Fleet is a running local fabric. Create it with New, then Start it;
// Shutdown stops every part. Its methods are safe for concurrent use.
type Fleet struct {
	cfg  Config
	opts Options
	log  *slog.Logger

	mu      sync.Mutex
	nats    *natsutil.Cluster
	conns   []*natsutil.Conn
	dns     *authdns.Server
	dnsPart Part
	hubs    []*Hub
	port    int // the hubs' common gRPC port
	wsPort  int // the hubs' common WebSocket port
	edges   []*Edge
	edgeWS  int    // the edges' common WebSocket port
	edgeRPC int    // the edges' common gRPC port
	policy  string // the origin record's policy now
	started bool
}

// New checks cfg and returns a fleet that has not started (no I/O).
func New(cfg Config, opts Options) (*Fleet, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Secret == "" {
		cfg.Secret = randomString(32)
	}
	if cfg.APIKey == "" {
		cfg.APIKey = randomString(24)
	}
	if cfg.relayKey == "" {
		cfg.relayKey = randomString(24)
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Fleet{cfg: cfg, opts: opts, log: log}, nil
}

// randomString is n random bytes as hex, cut to n characters.
func randomString(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)[:n]
}

// Start starts the NATS cluster, the hubs, the DNS server and the edges,
// in that order, and returns once every part is ready, or the first error (with
// whatever started stopped again). ctx bounds the start.
func (f *Fleet) Start(ctx context.Context) (err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.started {
		return errors.New("fleet: already started")
	}
	f.started = true
	defer func() {
		if err != nil {
			f.stopLocked(context.Background())
		}
	}()
	deadline := 60 * time.Second
	if d, ok := ctx.Deadline(); ok {
		deadline = time.Until(d)
	}
	if f.nats, err = natsutil.StartCluster("corral-fleet", f.cfg.NATSMembers, deadline, f.log.With("part", "nats")); err != nil {
		return fmt.Errorf("fleet: nats: %w", err)
	}
	if f.wsPort, f.port, err = commonPorts(f.hubIPs(), f.cfg.HubWSPort, f.cfg.HubGRPCPort); err != nil {
		return err
	}
	for i := range f.cfg.Hubs {
		if err := f.startHub(i); err != nil {
			return err
		}
	}
	for _, h := range f.hubs {
		if err := waitReady(ctx, h.Name, h.Hub.Ready, h.errc); err != nil {
			return err
		}
	}
	if err := f.startDNS(ctx); err != nil {
		return err
	}
	if f.cfg.edges() == 0 {
		return nil
	}
	if f.edgeWS, f.edgeRPC, err = commonPorts(f.edgeIPs(), f.cfg.EdgeWSPort, f.cfg.EdgeGRPCPort); err != nil {
		return err
	}
	for j := range f.cfg.edges() {
		if err := f.startEdge(j); err != nil {
			return err
		}
	}
	for _, e := range f.edges {
		if err := waitReady(ctx, e.Name, e.Edge.Ready, e.errc); err != nil {
			return err
		}
	}
	return nil
}

// edgeIPs are the edges' addresses.
func (f *Fleet) edgeIPs() []string {
	ips := make([]string, f.cfg.edges())
	for i := range ips {
		ips[i] = f.cfg.EdgeNet + strconv.Itoa(i+1)
	}
	return ips
}

// startEdge starts edge j, resolving the origin name at the fleet's DNS.
func (f *Fleet) startEdge(j int) error {
	name := "edge-" + strconv.Itoa(j+1)
	ip := f.edgeIPs()[j]
	cfg := edge.DefaultConfig()
	cfg.NodeID = name
	cfg.Listen = net.JoinHostPort(ip, strconv.Itoa(f.edgeWS))
	cfg.GRPCListen = net.JoinHostPort(ip, strconv.Itoa(f.edgeRPC))
	cfg.Admin.Addr = ""
	cfg.Origins.Name = f.originName()
	cfg.Origins.Port = f.port
	cfg.Origins.Resolver = f.dns.Addr().String()
	cfg.Origins.Static = nil
	cfg.Origins.Pick = f.cfg.Pick
	cfg.Relay.Key = f.cfg.relayKey
	if f.opts.Edge != nil {
		f.opts.Edge(j, &cfg)
	}
	// The edges publish their load on the fleet's NATS, and read each
	// other's with load.share_places.
	nc, err := natsutil.ConnectEmbedded(f.nats.Members[j%len(f.nats.Members)].Server, name, true)
	if err != nil {
		return fmt.Errorf("fleet: %s: nats: %w", name, err)
	}
	f.conns = append(f.conns, nc)
	reg := prometheus.NewRegistry()
	e, err := edge.New(cfg, edge.Options{Registerer: reg, Logger: f.log.With("part", name), NATS: nc.NC})
	if err != nil {
		return fmt.Errorf("fleet: %s: %w", name, err)
	}
	fe := &Edge{Part: Part{Name: name, Registry: reg, errc: make(chan error, 1)}, Edge: e, IP: ip}
	go func() { fe.errc <- e.Run(context.Background()) }()
	f.edges = append(f.edges, fe)
	return nil
}

// hubIPs are the hubs' addresses.
func (f *Fleet) hubIPs() []string {
	ips := make([]string, f.cfg.Hubs)
	for i := range ips {
		ips[i] = f.cfg.HubNet + strconv.Itoa(i+1)
	}
	return ips
}

// commonPorts returns the two ports the parts on ips share (a DNS answer
// names hosts, not ports): ws and grpc when they are set, else ports free
// on every address of ips.
func commonPorts(ips []string, ws, grpc int) (int, int, error) {
	for tries := 0; (ws == 0 || grpc == 0) && tries < 50; tries++ {
		p, ok := freeOnAll(ips)
		switch {
		case !ok || p == ws || p == grpc:
		case ws == 0:
			ws = p
		default:
			grpc = p
		}
	}
	if ws == 0 || grpc == 0 {
		return 0, 0, fmt.Errorf("fleet: no port free on every address %v", ips)
	}
	return ws, grpc, nil
}

// freeOnAll picks a free port on ips[0] and checks it is free on the
// others. The listeners are closed again before the hubs bind: a port can
// be taken in between, and then the hub's start fails with the address.
func freeOnAll(ips []string) (int, bool) {
	first, err := net.Listen("tcp", net.JoinHostPort(ips[0], "0"))
	if err != nil {
		return 0, false
	}
	defer first.Close()
	port := first.Addr().(*net.TCPAddr).Port
	for _, ip := range ips[1:] {
		l, err := net.Listen("tcp", net.JoinHostPort(ip, strconv.Itoa(port)))
		if err != nil {
			return 0, false
		}
		defer l.Close()
	}
	return port, true
}

func (f *Fleet) startHub(i int) error {
	name := "hub-" + strconv.Itoa(i+1)
	nc, err := natsutil.ConnectEmbedded(f.nats.Members[i%len(f.nats.Members)].Server, name, true)
	if err != nil {
		return fmt.Errorf("fleet: %s: nats: %w", name, err)
	}
	f.conns = append(f.conns, nc)
	ip := f.hubIPs()[i]
	cfg := hub.DefaultConfig()
	cfg.NodeID = name
	cfg.Listen = net.JoinHostPort(ip, strconv.Itoa(f.wsPort))
	cfg.GRPCListen = net.JoinHostPort(ip, strconv.Itoa(f.port))
	cfg.Admin.Addr = ""
	cfg.History.Store = history.StoreJetStream
	cfg.Auth = auth.Config{
		Keys:    []auth.KeyConfig{{ID: "fleet", Algorithm: "HS256", Secret: f.cfg.Secret}},
		APIKeys: []auth.APIKeyConfig{{Name: "fleet", Key: f.cfg.APIKey, Tenants: []string{"*"}}},
	}
	cfg.Relay.Keys = []hub.RelayKeyConfig{{Name: "fleet", Key: f.cfg.relayKey}}
	reg := prometheus.NewRegistry()
	opts := hub.Options{Registerer: reg, Logger: f.log.With("part", name), NATS: nc.NC}
	if f.opts.Hub != nil {
		f.opts.Hub(i, &cfg, &opts)
	}
	g, err := newGate(cfg, &opts, reg)
	if err != nil {
		return fmt.Errorf("fleet: %s: %w", name, err)
	}
	h, err := hub.New(cfg, opts)
	if err != nil {
		return fmt.Errorf("fleet: %s: %w", name, err)
	}
	fh := &Hub{Part: Part{Name: name, Registry: reg, errc: make(chan error, 1)}, Hub: h, IP: ip, gate: g}
	go func() { fh.errc <- h.Run(context.Background()) }()
	f.hubs = append(f.hubs, fh)
	return nil
}

// startDNS serves the zone whose origin record lists every hub, each
// behind a TCP health check of its gRPC port.
func (f *Fleet) startDNS(ctx context.Context) error {
	cfg, err := f.dnsConfig(f.cfg.Policy)
	if err != nil {
		return err
	}
	cfg.Listen = f.cfg.DNSListen
	reg := prometheus.NewRegistry()
	s, err := authdns.New(cfg, authdns.Options{Registerer: reg, Logger: f.log.With("part", "dns")})
	if err != nil {
		return fmt.Errorf("fleet: dns: %w", err)
	}
	f.dns, f.dnsPart, f.policy = s, Part{Name: "dns", Registry: reg, errc: make(chan error, 1)}, f.cfg.Policy
	go func() { f.dnsPart.errc <- s.Run(context.Background()) }()
	return waitReady(ctx, "dns", s.Ready, f.dnsPart.errc)
}

// dnsConfig is the DNS server's configuration with the origin record
// under policy: one A record per hub, each behind a TCP health check of
// the hub's gRPC port (every 1 s); weighted policies give every hub
// weight 1, weighted-subset answers 2 of them. A policy the record cannot
// take is an error.
func (f *Fleet) dnsConfig(policy string) (*authdns.Config, error) {
	cfg := authdns.DefaultConfig()
	cfg.Listen = f.cfg.DNSListen
	cfg.Sockets = 1
	cfg.RRL.Enabled = false // every query comes from the one loopback client
	rec := authdns.RecordConfig{Name: "origin", Type: "A", TTL: 5 * time.Second, Policy: policy}
	if policy == "weighted-subset" {
		rec.N = min(2, f.cfg.Hubs)
	}
	for i, ip := range f.hubIPs() {
		check := "hub-" + strconv.Itoa(i+1)
		cfg.Health.Checks = append(cfg.Health.Checks, health.CheckConfig{
			Name: check, Kind: f.cfg.HealthCheck, Address: net.JoinHostPort(ip, strconv.Itoa(f.port)),
			Interval: time.Second, Timeout: 500 * time.Millisecond,
		})
		v := authdns.ValueConfig{Value: ip, Check: check}
		if policy == "weighted" || policy == "weighted-subset" {
			v.Weight = 1
		}
		rec.Values = append(rec.Values, v)
	}
	zone := f.cfg.Zone
	cfg.Zones = []authdns.ZoneConfig{{
		Origin: zone, TTL: 5 * time.Second,
		SOA:     authdns.SOAConfig{MName: "ns1." + zone, RName: "hostmaster." + zone, Serial: 1, Minimum: 5 * time.Second},
		NS:      []string{"ns1." + zone},
		Records: []authdns.RecordConfig{{Name: "ns1", Type: "A", Values: []authdns.ValueConfig{{Value: "127.0.0.1"}}}, rec},
	}}
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("fleet: dns: policy %s: %w", policy, err)
	}
	return &cfg, nil
}

// waitReady polls ready until it answers nil, the part's Run returns, or
// ctx ends.
func waitReady(ctx context.Context, name string, ready func() error, errc chan error) error {
	t := time.NewTicker(10 * time.Millisecond)
	defer t.Stop()
	for {
		err := ready()
		if err == nil {
			return nil
		}
		select {
		case rerr := <-errc:
			errc <- rerr // for Shutdown
			return fmt.Errorf("fleet: %s stopped while starting: %v", name, rerr)
		case <-ctx.Done():
			return fmt.Errorf("fleet: %s not ready: %v", name, err)
		case <-t.C:
		}
	}
}

// DNS returns the DNS server (nil before Start) and its part.
func (f *Fleet) DNS() (Part, *authdns.Server) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.dnsPart, f.dns
}

// DNSAddr is the DNS server's address ("127.0.0.1:port").
func (f *Fleet) DNSAddr() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.dns == nil {
		return ""
	}
	return f.dns.Addr().String()
}

// Resolver returns a resolver that asks the fleet's DNS server, for
// clients (client.Config.Resolve) and edges that look the origin name up.
func (f *Fleet) Resolver() *net.Resolver {
	addr := f.DNSAddr()
	var d net.Dialer
	return &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
		return d.DialContext(ctx, network, addr)
	}}
}

// WSPort is the hubs' common WebSocket port.
func (f *Fleet) WSPort() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.wsPort
}

// OriginName is the DNS name whose A records are the hubs.
func (f *Fleet) OriginName() string { return f.originName() }

// originName is OriginName; it takes no lock (the zone never
// changes), so it serves while the fleet's mutex is held too.
func (f *Fleet) originName() string { return "origin." + f.cfg.Zone }

// Edges returns the edges in index order.
func (f *Fleet) Edges() []*Edge {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]*Edge(nil), f.edges...)
}

// EdgeURLs are the WebSocket URLs of the edges ("ws://127.0.2.1:port/v1/ws").
func (f *Fleet) EdgeURLs() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var urls []string
	for _, ip := range f.edgeIPs() {
		urls = append(urls, "ws://"+net.JoinHostPort(ip, strconv.Itoa(f.edgeWS))+"/v1/ws")
	}
	return urls
}

// OriginPort is the hubs' common gRPC port: the origin name with it
// reaches every hub's Corral service.
func (f *Fleet) OriginPort() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.port
}

// Hubs returns the hubs, killed ones included, in index order.
func (f *Fleet) Hubs() []*Hub {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]*Hub(nil), f.hubs...)
}

// Secret is the HMAC secret the hubs verify session tokens with.
func (f *Fleet) Secret() string { return f.cfg.Secret }

// APIKey is the backends' publish key, valid for every tenant.
func (f *Fleet) APIKey() string { return f.cfg.APIKey }

// Token mints a session token for tenant, allowed to subscribe to and
// publish on channels (patterns) and to claim priorities up to maxPriority
// (0 is P0), valid for ttl.
func (f *Fleet) Token(tenant string, channels []string, maxPriority int, ttl time.Duration) (string, error) {
	now := time.Now()
	c := auth.Claims{
		Tenant: tenant, Channels: channels, Publish: channels, MaxPriority: &maxPriority,
		RegisteredClaims: jwt.RegisteredClaims{IssuedAt: jwt.NewNumericDate(now), ExpiresAt: jwt.NewNumericDate(now.Add(ttl))},
	}
	t := jwt.NewWithClaims(jwt.SigningMethodHS256, c)
	t.Header["kid"] = "fleet"
	return t.SignedString([]byte(f.cfg.Secret))
}

// KillHub stops hub i as a crash would: its connections are cut without a
// frame and nothing is drained. Its address stays in DNS until the health
// check sees it down.
func (f *Fleet) KillHub(i int) error {
	f.mu.Lock()
	if i < 0 || i >= len(f.hubs) {
		f.mu.Unlock()
		return fmt.Errorf("fleet: no hub %d (the fleet has %d)", i, len(f.hubs))
	}
	h := f.hubs[i]
	if h.killed {
		f.mu.Unlock()
		return nil
	}
	h.killed = true
	f.mu.Unlock()
	h.gate.release()
	h.Kill()
	return nil
}

// Shutdown stops every part: the edges (each drains), the DNS server, then the hubs (each drains
// within its drain deadline, bounded by ctx), then NATS.
func (f *Fleet) Shutdown(ctx context.Context) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.stopLocked(ctx)
}

func (f *Fleet) stopLocked(ctx context.Context) error {
	var errs []error
	var ewg sync.WaitGroup
	eerrc := make(chan error, len(f.edges))
	for _, e := range f.edges {
		if e.stopped {
			continue
		}
		e.stopped = true
		ewg.Add(1)
		go func() {
			defer ewg.Done()
			eerrc <- e.Shutdown(ctx)
		}()
	}
	ewg.Wait()
	close(eerrc)
	for err := range eerrc {
		errs = append(errs, err)
	}
	if f.dns != nil {
		errs = append(errs, f.dns.Shutdown(ctx))
		f.dns = nil
	}
	var wg sync.WaitGroup
	errc := make(chan error, len(f.hubs))
	for _, h := range f.hubs {
		if h.killed {
			continue
		}
		h.killed = true
		h.gate.release()
		wg.Add(1)
		go func() {
			defer wg.Done()
			errc <- h.Shutdown(ctx)
		}()
	}
	wg.Wait()
	close(errc)
	for err := range errc {
		errs = append(errs, err)
	}
	for _, c := range f.conns {
		c.Close()
	}
	f.conns = nil
	if f.nats != nil {
		f.nats.Shutdown()
		f.nats = nil
	}
	return errors.Join(errs...)
}
