package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/corralhq/corral/kraken"
	"github.com/corralhq/corral/scenario"
)

// krakenFlags are the flags of `corral kraken run`.
type krakenFlags struct {
	targets   []string
	resolver  string
	publish   string
	apiKeyEnv string
	secretEnv string
	kid       string
	sources   string
	caFile    string
	drainPIDs []int
	origins   []string
	regions   []string
	out       string
	report    string
	plain     bool
	every     time.Duration

	agents     int
	perAgent   int
	remote     int
	nats       string
	natsListen string
}

func newKrakenCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "kraken",
		Short: "Hold many real connections and storm a fleet with them (kraken run SCENARIO.yaml)",
	}
	cmd.AddCommand(newKrakenRunCmd(g), newKrakenAgentCmd(g))
	return cmd
}

func newKrakenRunCmd(g *globals) *cobra.Command {
	var f krakenFlags
	cmd := &cobra.Command{
		Use:   "run SCENARIO.yaml [--target ws://HOST:PORT/v1/ws] --secret-env VAR",
		Short: "Run a scenario's devices against a real fleet and measure how it takes them back",
		Long: `kraken run drives the devices of a scenario file (the format corral sim
runs) as real WebSocket sessions against the scenario's target (target.urls,
resolved through target.resolver; --target and --resolver override them):
warm-up of the initial devices, arrivals at their rate, publishes through
--publish, drops of a share of the sessions and server-side mass closes
(--drain-pid: SIGTERM to a hub process, whose drain closes its sessions
with a retry hint), kills and freezes of origin processes (--origin pid=N
or pidfile=FILE), origins marked unhealthy (--origin admin=URL: a hub's
POST /health/unhealthy), moves of a region's devices (--region
NAME=URL) and poison tenants (each origin a poison tenant's session
reaches is killed: --origin ...,node=ID names the hub's node_id), until
duration or a stop condition. A key it cannot run yet is refused with its
file and line before anything starts.

Past --devices-per-agent devices (18,000: the file limit here is 20,000),
or with --agents N, the run is split over agent processes: kraken run
starts the local ones itself (corral kraken agent) and waits for --remote
of them to join over NATS from other machines; device i is agent i mod N's
and keeps its number (its tenant, priority, source address, random draws
and launch time are those of a one-process run), and the agents' results
merge exactly. The coordinator and the agents talk over an embedded NATS
server (--nats-listen) or --nats URL. A dead agent fails the run, naming it.

Session tokens are minted for tenants t0, t1, ... with the HMAC secret of
the variable --secret-env names; the publish API key comes from
--api-key-env. Progress goes to stderr (a live table redrawn in place when
stderr is a terminal, plain lines otherwise or with --plain); the JSON
result (documented in kraken/README.md) to stdout, or to --out FILE;
--report FILE.html also writes a self-contained HTML report of it.`,
		Example: `  CORRAL_DEV_SECRET=... CORRAL_API_KEY=... corral kraken run scenarios/kraken-drop.yaml \
    --target ws://127.0.0.1:7400/v1/ws --publish http://127.0.0.1:7400 \
    --secret-env CORRAL_DEV_SECRET --api-key-env CORRAL_API_KEY`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runKraken(cmd.Context(), g, args[0], f)
		},
	}
	fl := cmd.Flags()
	fl.StringArrayVar(&f.targets, "target", nil, "ws:// or wss:// URL of the fleet, grpc:// or grpcs:// for gRPC devices (repeatable; overrides the scenario's target.urls); a host name stands for every address it resolves to")
	fl.StringVar(&f.caFile, "ca-file", "", "PEM file of the CAs wss:// and grpcs:// targets' certificates chain to (default: the system roots)")
	fl.StringVar(&f.resolver, "resolver", "", "ip:port of the DNS server resolving target names (default: the scenario's target.resolver, else the system resolver)")
	fl.StringVar(&f.publish, "publish", "", "http://host:port of a hub's publish API (needed by traffic.publish)")
	fl.StringVar(&f.apiKeyEnv, "api-key-env", "", "environment variable holding the publish API key")
	fl.StringVar(&f.secretEnv, "secret-env", "", "environment variable holding the HMAC secret of session tokens (required)")
	fl.StringVar(&f.kid, "kid", "", "key id put in the token header (must match the key's id when set)")
	fl.StringVar(&f.sources, "sources", "", "local address range of the connections (default 127.64.0.0/10)")
	fl.IntSliceVar(&f.drainPIDs, "drain-pid", nil, "hub process ids a mass close drains with SIGTERM, in order (needed by traffic.mass_close)")
	fl.StringArrayVar(&f.origins, "origin", nil, "an origin the storms act on, in order (repeatable): pid=N or pidfile=FILE (traffic.kill, and traffic.mass_close without --drain-pid), admin=http://HOST:PORT (traffic.unhealthy), node=ID (its node_id: traffic.poison), comma-separated")
	fl.StringArrayVar(&f.regions, "region", nil, "NAME=ws://HOST:PORT/v1/ws: a target of region NAME of the scenario's origins (repeatable; needed by traffic.move and a region's traffic.disconnects)")
	fl.StringVar(&f.out, "out", "", "write the JSON result to this file instead of stdout")
	fl.DurationVar(&f.every, "every", time.Second, "period of the progress lines")
	fl.StringVar(&f.report, "report", "", "also write a self-contained HTML report of the result (charts, storms, latency percentiles) to this file")
	fl.BoolVar(&f.plain, "plain", false, "plain progress lines even on a terminal (default there: a live table redrawn in place)")
	fl.IntVar(&f.agents, "agents", 0, "agent processes to split the run over (default: as many as --devices-per-agent asks; 1 runs in this process)")
	fl.IntVar(&f.perAgent, "devices-per-agent", 18_000, "devices one agent process drives at most, when --agents is not given")
	fl.IntVar(&f.remote, "remote", 0, "agents that join from other machines (corral kraken agent --nats URL); the others start here")
	fl.StringVar(&f.nats, "nats", "", "NATS URL the coordinator and the agents talk over (default: an embedded server)")
	fl.StringVar(&f.natsListen, "nats-listen", "127.0.0.1:0", "client address of the embedded NATS server (where remote agents join)")
	return cmd
}

func newKrakenAgentCmd(g *globals) *cobra.Command {
	var ac kraken.AgentConfig
	var sources string
	cmd := &cobra.Command{
		Use:   "agent --nats nats://HOST:4222 [--run ID]",
		Short: "Join a split kraken run and drive a part of its devices",
		Long: `kraken agent joins a run of corral kraken run over NATS (the run named by
--run, or any run waiting for agents), drives the part of the devices it is
given and sends its result to the coordinator. kraken run starts its local
agents itself; start this on other machines to spread a run past one
machine (kraken run --remote N waits for N of them). The agent stops when
the coordinator orders it, or when the coordinator falls silent.`,
		Example: `  corral kraken agent --nats nats://10.0.0.5:4222 --sources 10.1.0.0/16`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			if ctx == nil {
				ctx = context.Background()
			}
			log, err := g.logger()
			if err != nil {
				return err
			}
			useNbioLog(log)
			ac.Logger = log
			if sources != "" {
				if ac.Sources, err = netip.ParsePrefix(sources); err != nil {
					return fmt.Errorf("kraken: --sources %q: want a CIDR range", sources)
				}
			}
			ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
			defer stop()
			return kraken.RunAgent(ctx, ac)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&ac.NATS, "nats", "", "NATS URL of the run's coordinator (required)")
	fl.StringVar(&ac.Run, "run", "", "id of the run to join (default: any run waiting for agents)")
	fl.StringVar(&ac.Name, "name", "", "the agent's name in the coordinator's messages (default host:pid)")
	fl.StringVar(&sources, "sources", "", "local address range of this agent's connections (default: the coordinator's)")
	fl.DurationVar(&ac.JoinTimeout, "join-timeout", 30*time.Second, "how long to look for a run to join")
	return cmd
}

func runKraken(ctx context.Context, g *globals, path string, f krakenFlags) error {
	if ctx == nil {
		ctx = context.Background()
	}
	sc, err := scenario.Load(path)
	if err != nil {
		return err
	}
	log, err := g.logger()
	if err != nil {
		return err
	}
	// nbio has one process-wide logger; it would print on stdout, which
	// carries the result.
	useNbioLog(log)
	cfg := kraken.Config{
		Targets: f.targets, Resolver: f.resolver, PublishURL: f.publish, CAFile: f.caFile,
		Progress: g.stderr, ProgressEvery: f.every, Logger: log,
	}
	cfg.Live = !f.plain && isTerminal(g.stderr)
	if f.apiKeyEnv != "" {
		cfg.APIKey = os.Getenv(f.apiKeyEnv)
	}
	if f.sources != "" {
		if cfg.Sources, err = netip.ParsePrefix(f.sources); err != nil {
			return fmt.Errorf("kraken: --sources %q: want a CIDR range", f.sources)
		}
	}
	if f.secretEnv == "" {
		return errors.New("kraken: --secret-env is required (the name of the variable holding the token secret)")
	}
	ttl := sc.Duration + time.Hour
	cfg.Token = func(tenant string, rank int) (string, error) {
		return mintToken(&tokenFlags{secretEnv: f.secretEnv, algorithm: "HS256", kid: f.kid, tenant: tenant,
			channels: []string{">"}, priority: "p" + strconv.Itoa(rank), ttl: ttl}, time.Now())
	}
	if len(f.drainPIDs) > 0 {
		cfg.MassClose = drainPIDs(f.drainPIDs)
	}
	if err := originFlags(&cfg, f); err != nil {
		return err
	}
	var res *kraken.Result
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	if f.agents > 1 || f.remote > 0 || f.nats != "" || (f.agents == 0 && kraken.AgentsFor(kraken.Devices(sc), f.perAgent) > 1) {
		res, err = runSplit(ctx, g, sc, cfg, f)
	} else {
		var k *kraken.Kraken
		if k, err = kraken.New(sc, cfg); err == nil {
			res, err = k.Run(ctx)
		}
	}
	if err != nil {
		return err
	}
	b, err := json.MarshalIndent(res, "", "  ")
	if err != nil {
		return err
	}
	b = append(b, '\n')
	if f.report != "" {
		if err := writeReport(f.report, res); err != nil {
			return err
		}
	}
	if f.out != "" {
		return os.WriteFile(f.out, b, 0o644)
	}
	_, err = g.stdout.Write(b)
	return err
}

// runSplit runs the scenario over agent processes: the local ones are
// this binary's kraken agent.
func runSplit(ctx context.Context, g *globals, sc *scenario.Scenario, cfg kraken.Config, f krakenFlags) (*kraken.Result, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("kraken: finding this binary to start agents: %w", err)
	}
	// The agents' logs go to stderr beside the progress lines.
	stderr := &syncWriter{w: g.stderr}
	cfg.Progress, cfg.Live = stderr, false // the agents' logs come between
	split := kraken.Split{
		Agents: f.agents, DevicesPerAgent: f.perAgent, Remote: f.remote, NATS: f.nats, NATSListen: f.natsListen,
		Command: func(url, run string) *exec.Cmd {
			cmd := exec.Command(exe, "kraken", "agent", "--nats", url, "--run", run, "--log-level", g.logLevel, "--log-format", g.logFormat)
			cmd.Stderr = stderr
			return cmd
		},
	}
	c, err := kraken.NewCoordinator(sc, cfg, split)
	if err != nil {
		return nil, err
	}
	return c.Run(ctx)
}

// syncWriter serialises writes from the coordinator and its agents.
type syncWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}

// drainPIDs returns a mass close that sends SIGTERM to the next processes
// of pids: a hub drains on SIGTERM (GoAway with its retry hint to every
// session, then a close).
func drainPIDs(pids []int) func(context.Context, int) error {
	var mu sync.Mutex
	next := 0
	return func(_ context.Context, n int) error {
		mu.Lock()
		defer mu.Unlock()
		if next+n > len(pids) {
			return fmt.Errorf("kraken: a mass close of %d origins, but only %d --drain-pid left", n, len(pids)-next)
		}
		var errs []error
		for _, pid := range pids[next : next+n] {
			p, err := os.FindProcess(pid)
			if err == nil {
				err = p.Signal(syscall.SIGTERM)
			}
			if err != nil {
				errs = append(errs, fmt.Errorf("kraken: SIGTERM to %d: %w", pid, err))
			}
		}
		next += n
		return errors.Join(errs...)
	}
}

// originFlags sets the storm primitives of --origin and the targets per
// region of --region. A primitive is set only when every origin has what
// it needs (a process for the signals, an admin address for unhealthy),
// so that a scenario needing it is refused with its line otherwise.
func originFlags(cfg *kraken.Config, f krakenFlags) error {
	for _, r := range f.regions {
		name, u, ok := strings.Cut(r, "=")
		if !ok || name == "" || u == "" {
			return fmt.Errorf("kraken: --region %q: want NAME=ws://HOST:PORT/v1/ws", r)
		}
		if cfg.Regions == nil {
			cfg.Regions = map[string][]string{}
		}
		cfg.Regions[name] = append(cfg.Regions[name], u)
	}
	if len(f.origins) == 0 {
		return nil
	}
	var origins []kraken.Origin
	for _, s := range f.origins {
		o, err := kraken.ParseOrigin(s)
		if err != nil {
			return err
		}
		origins = append(origins, o)
	}
	p := kraken.NewProcesses(origins)
	cfg.Origins = p.Len()
	if p.CanSignal() {
		cfg.Kill = p.Kill
		if cfg.MassClose == nil {
			cfg.MassClose = p.Drain
		}
	}
	if p.CanMarkUnhealthy() {
		cfg.Unhealthy = p.Unhealthy
	}
	return nil
}

// isTerminal reports whether w is a terminal (a character device).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// writeReport writes the HTML report of res to path.
func writeReport(path string, res *kraken.Result) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("kraken: report: %w", err)
	}
	if err := kraken.WriteReport(f, res); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("kraken: report: %w", err)
	}
	return nil
}
