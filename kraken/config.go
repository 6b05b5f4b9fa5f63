package kraken

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/netip"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/corralhq/corral/scenario"
)

// Config is where and how a run drives its devices: the target, the
// credentials and the engine's resources. What the devices do comes from
// the scenario. The zero value is not valid (a run needs Targets and
// Token); DefaultConfig fills the rest.
type Config struct {
	// Targets are the URLs of the fleet: ws://host:port/path (no path:
	// /v1/ws; wss:// over TLS) for WebSocket devices, grpc://host:port
	// (grpcs:// over TLS) for gRPC devices, as population.protocol says.
	// A host that is a name stands for every address it
	// resolves to, resolved again before every attempt (as package client
	// does); each attempt goes to one of them, uniformly at random.
	Targets []string
	// Resolver is the host:port of the DNS server that resolves target
	// names (the fleet's authdns); empty: the system resolver.
	Resolver string
	// Resolve, when set, resolves target names instead of Resolver.
	Resolve func(ctx context.Context, host string) ([]netip.Addr, error)
	// PublishURL is the base URL of the hub publish API (http://host:port;
	// /v1/publish is appended), required when the scenario publishes.
	PublishURL string
	// APIKey is the backends' publish key (Authorization: Bearer).
	APIKey string
	// Token mints the session token of a device of tenant (named "t0",
	// "t1", ...) with priority rank (0 is P0); it must allow the channels
	// c0, c1, ... Called once per tenant and priority before the run.
	Token func(tenant string, rank int) (string, error)
	// MassClose, when set, makes origins close every session they hold
	// with a retry hint (traffic.mass_close): it is called with the count
	// of origins the scenario names. A scenario with a mass close and no
	// MassClose is refused before the run starts.
	MassClose func(ctx context.Context, origins int) error
	// Kill, when set, signals origin processes: the request's count of
	// them (traffic.kill), or the one origin it names (traffic.poison:
	// the origin a poison tenant's session reached). SIGKILL (a crash),
	// or with Freeze SIGSTOP, when it returns thaw, which resumes them
	// (SIGCONT). Processes.Kill does it to processes of this machine. A
	// scenario with a kill or a poison tenant and no Kill is refused.
	Kill func(ctx context.Context, k KillRequest) (thaw func() error, err error)
	// Unhealthy, when set, makes that many origins fail their health
	// checks while they keep their sessions (traffic.unhealthy), and
	// returns restore, which makes them healthy again. A scenario with an
	// unhealthy storm and no Unhealthy is refused.
	Unhealthy func(ctx context.Context, origins int) (restore func() error, err error)
	// Origins, when above 0, is how many origins MassClose, Kill and
	// Unhealthy can act on: a scenario that needs more (its kills and mass
	// closes together, or one unhealthy storm) is refused before it starts.
	Origins int
	// Regions, when set, are the targets of each region of the scenario's
	// origins (origins[].region): every device belongs to one region,
	// dealt by the regions' shares of the primary origins (count x
	// weight), and connects to that region's targets; traffic.move sends a
	// region's devices to another, traffic.disconnects[].region drops the
	// sessions of one. Targets may then be empty.
	Regions map[string][]string
	// Sources is the range of local addresses the devices' connections
	// come from, device i from the i-th address of the range (cyclically),
	// so that the connections are not bound by one address's ephemeral
	// ports. Default 127.64.0.0/10 (4 M loopback sources).
	Sources netip.Prefix
	// Pollers is the number of nbio poller goroutines. Default 1.
	Pollers int
	// Progress receives a progress line every ProgressEvery; nil: none.
	Progress io.Writer
	// Live makes the progress a small table redrawn in place (ANSI
	// escapes) instead of lines: for a terminal. corral kraken run sets it
	// when stderr is one.
	Live bool
	// ProgressEvery is the period of progress lines. Default 1s.
	ProgressEvery time.Duration
	// Settle is how long the run waits at its end for messages still in
	// flight (until every P0 message expected has arrived). Default 3s.
	Settle time.Duration
	// AtEnd, when set, is called once when the run has stopped driving
	// (no new attempt, publishers stopped, messages in flight settled) and
	// before it closes its sessions: the moment to read the servers' own
	// counts of what the run holds.
	AtEnd func()
	// CAFile is a PEM file of the CAs wss:// and grpcs:// targets'
	// certificates must chain to (a private CA, a test's self-signed
	// certificate). Empty: the system roots. New reads it; a split run
	// sends its bytes to the agents.
	CAFile string
	// Logger receives the run's logs; nil discards them.
	Logger *slog.Logger

	// caPEM, when set, is CAFile's content (an agent's, from its
	// assignment).
	caPEM []byte
}

// KillRequest is what Config.Kill is asked to do.
type KillRequest struct {
	// Origins is how many origins to signal: the next ones, in the
	// target's own order (traffic.kill's count). Ignored when Node is set.
	Origins int
	// Node, when set, names the one origin to signal: the node id it gives
	// in its Welcome (through an edge, the part after the last "/"), as a
	// poison tenant's session saw it.
	Node string
	// Freeze asks for SIGSTOP (and a thaw) instead of SIGKILL.
	Freeze bool
}

// DefaultConfig returns a Config with every default set (Targets and
// Token left empty).
func DefaultConfig() Config { return Config{}.withDefaults() }

func (c Config) withDefaults() Config {
	if !c.Sources.IsValid() {
		c.Sources = netip.MustParsePrefix("127.64.0.0/10")
	}
	if c.Pollers <= 0 {
		c.Pollers = 1
	}
	if c.ProgressEvery <= 0 {
		c.ProgressEvery = time.Second
	}
	if c.Settle <= 0 {
		c.Settle = 3 * time.Second
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

// Validate reports every bad field of c.
func (c Config) Validate() error { return c.validate(true) }

// validate is Validate; targets false leaves the targets to the plan (they
// came from the scenario file, whose refusals name their lines).
func (c Config) validate(targets bool) error {
	var errs []error
	if len(c.Targets) == 0 && len(c.Regions) == 0 {
		errs = append(errs, errors.New("kraken: no target: give at least one ws:// or grpc:// URL (--target, or target.urls in the scenario)"))
	}
	for _, t := range c.Targets {
		if _, err := parseTarget(t); err != nil && targets {
			errs = append(errs, err)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(c.Regions)) {
		if len(c.Regions[name]) == 0 {
			errs = append(errs, fmt.Errorf("kraken: region %q has no target", name))
		}
		for _, t := range c.Regions[name] {
			if _, err := parseTarget(t); err != nil {
				errs = append(errs, fmt.Errorf("kraken: region %q: %s", name, strings.TrimPrefix(err.Error(), "kraken: ")))
			}
		}
	}
	if c.Origins < 0 {
		errs = append(errs, fmt.Errorf("kraken: origins %d: must not be negative", c.Origins))
	}
	if c.Token == nil {
		errs = append(errs, errors.New("kraken: no token source: the devices need session tokens"))
	}
	if c.PublishURL != "" {
		if u, err := url.Parse(c.PublishURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			errs = append(errs, fmt.Errorf("kraken: publish URL %q: want http://host:port", c.PublishURL))
		}
	}
	if c.Sources.IsValid() && (!c.Sources.Addr().Is4() || c.Sources.Bits() > 30) {
		errs = append(errs, fmt.Errorf("kraken: sources %v: want an IPv4 range of at least 4 addresses", c.Sources))
	}
	if c.Resolver != "" {
		if _, err := netip.ParseAddrPort(c.Resolver); err != nil {
			errs = append(errs, fmt.Errorf("kraken: resolver %q: want ip:port", c.Resolver))
		}
	}
	return errors.Join(errs...)
}

// withTarget fills the targets and the resolver from the scenario's
// target where c gives none (a --target given overrides the file's URLs, a
// --resolver its resolver); fromFile reports that the targets are the
// file's.
func (c Config) withTarget(sc *scenario.Scenario) (_ Config, fromFile bool) {
	if len(c.Targets) == 0 && len(sc.Target.URLs) > 0 {
		c.Targets, fromFile = slices.Clone(sc.Target.URLs), true
	}
	if c.Resolver == "" && c.Resolve == nil {
		c.Resolver = sc.Target.Resolver
	}
	return c, fromFile
}

// target is one parsed target URL.
type target struct {
	scheme string // ws or grpc
	tls    bool   // wss, grpcs
	host   string // name or address
	port   string
	path   string // ws only
}

// grpc reports whether t is a gRPC target.
func (t target) grpc() bool { return t.scheme == "grpc" }

// protocol is the population.protocol whose devices t takes.
func (t target) protocol() string {
	if t.grpc() {
		return "grpc"
	}
	return "websocket"
}

func parseTarget(s string) (target, error) {
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "ws" && u.Scheme != "wss" && u.Scheme != "grpc" && u.Scheme != "grpcs") || u.Hostname() == "" || u.Port() == "" {
		return target{}, fmt.Errorf("kraken: target %q: want ws://host:port[/path] (wss:// for TLS) or grpc://host:port (grpcs://)", s)
	}
	secure := u.Scheme == "wss" || u.Scheme == "grpcs"
	if u.Scheme == "grpc" || u.Scheme == "grpcs" {
		if u.Path != "" && u.Path != "/" {
			return target{}, fmt.Errorf("kraken: target %q: a gRPC target has no path", s)
		}
		return target{scheme: "grpc", tls: secure, host: u.Hostname(), port: u.Port()}, nil
	}
	p := u.Path
	if p == "" {
		p = "/v1/ws"
	}
	return target{scheme: "ws", tls: secure, host: u.Hostname(), port: u.Port(), path: p}, nil
}
