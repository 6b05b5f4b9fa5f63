package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/corralhq/corral/edge"
	"github.com/corralhq/corral/fleet"
	"github.com/corralhq/corral/hub"
	"github.com/corralhq/corral/internal/admin"
)

// upFlags are the flags of `corral up`.
type upFlags struct {
	hubs, edges                 int
	policy, pick                string
	listen, dns, dnsAdmin       string
	hubWS, hubGRPC              int
	edgeWS, edgeGRPC, adminPort int
	storm                       string
	admission                   bool
	every                       time.Duration
	startTimeout, stopTimeout   time.Duration
}

func newUpCmd(g *globals) *cobra.Command {
	var f upFlags
	cmd := &cobra.Command{
		Use:   "up [--storm SCENARIO.yaml]",
		Short: "Run the whole fabric on this machine (NATS, DNS, hubs, edges) with a live dashboard",
		Long: `corral up starts, in this one process, a 3-member NATS cluster with
JetStream, --hubs hubs on 127.0.1.1, 127.0.1.2, ... sharing history over it,
an authoritative DNS server whose name origin.corral.test answers the
healthy hubs (health-checked every second, under --policy), and --edges
edges on 127.0.2.1, ... that resolve that name and carry devices to the
hubs. It prints the URLs, a session token and a corral sub / corral pub
pair to paste, and serves a dashboard on --listen: live charts over SSE
and the controls (switch the DNS policy, kill or pause a hub, drop a share
of the sessions, start and stop a kraken storm), each also an HTTP API
(README.md, "corral up").

--storm runs a kraken scenario against the edges once everything is ready
and shows it live. Ctrl-C (SIGINT or SIGTERM) stops the storm, drains the
edges and hubs and stops DNS and NATS: every port is free when it exits.`,
		Example: `  corral up
  corral up --storm scenarios/kraken-drop.yaml --policy weighted`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runUp(cmd.Context(), g, f)
		},
	}
	fl := cmd.Flags()
	fl.IntVar(&f.hubs, "hubs", 3, "hubs, 1 to 254")
	fl.IntVar(&f.edges, "edges", 2, "edges, 1 to 254")
	fl.StringVar(&f.policy, "policy", "multivalue", "routing policy of origin.corral.test: "+strings.Join(fleet.Switchable, ", "))
	fl.StringVar(&f.pick, "pick", "p2c", "how an edge picks a hub: p2c or first-address")
	fl.StringVar(&f.listen, "listen", "127.0.0.1:7600", "address of the dashboard and its control API (port 0: any free port)")
	fl.StringVar(&f.dns, "dns", "127.0.0.1:5354", "address of the DNS server (UDP and TCP)")
	fl.StringVar(&f.dnsAdmin, "dns-admin", "127.0.0.1:7609", "address of the DNS server's admin listener (the hubs' and edges' are on their own addresses, at --admin-port)")
	fl.IntVar(&f.hubWS, "hub-ws-port", 7400, "the hubs' WebSocket and HTTP publish port (0: any free port)")
	fl.IntVar(&f.hubGRPC, "hub-grpc-port", 7401, "the hubs' gRPC port (0: any free port)")
	fl.IntVar(&f.edgeWS, "edge-ws-port", 7500, "the edges' WebSocket port (0: any free port)")
	fl.IntVar(&f.edgeGRPC, "edge-grpc-port", 7501, "the edges' gRPC port (0: any free port)")
	fl.IntVar(&f.adminPort, "admin-port", 7409, "port of each part's admin listener (metrics, healthz, readyz), on the part's address (0: any free port)")
	fl.StringVar(&f.storm, "storm", "", "kraken scenario file to run against the edges once the fabric is up")
	fl.BoolVar(&f.admission, "admission", true, "run the hubs' overload control and the edges' adaptive admission (false: every session admitted, no limit or stage to chart, hubs cannot be paused)")
	fl.DurationVar(&f.every, "every", time.Second, "period of the dashboard's updates")
	fl.DurationVar(&f.startTimeout, "start-timeout", 90*time.Second, "bound on the start of every part")
	fl.DurationVar(&f.stopTimeout, "stop-timeout", 30*time.Second, "bound on the drain and stop of every part")
	return cmd
}

// upTenant and upChannels are what the printed token allows.
const (
	upTenant  = "demo"
	upChannel = "news.eu"
)

// runUp runs the fabric until ctx ends.
func runUp(ctx context.Context, g *globals, f upFlags) error {
	if ctx == nil {
		ctx = context.Background()
	}
	if !slices.Contains(fleet.Switchable, f.policy) {
		return fmt.Errorf("up: --policy %q: want one of %s", f.policy, strings.Join(fleet.Switchable, ", "))
	}
	if f.edges < 1 {
		return fmt.Errorf("up: --edges %d: want 1 to 254", f.edges)
	}
	if f.every < 100*time.Millisecond || f.every > time.Second {
		return fmt.Errorf("up: --every %v: want 100ms to 1s", f.every)
	}
	if f.adminPort < 0 || f.adminPort > 65535 {
		return fmt.Errorf("up: --admin-port %d: want 0 to 65535", f.adminPort)
	}
	log, err := g.logger()
	if err != nil {
		return err
	}
	// nbio has one process-wide logger, which would print on stdout.
	useNbioLog(log)
	fl, err := fleet.New(fleet.Config{
		Hubs: f.hubs, Edges: f.edges, Policy: f.policy, Pick: f.pick, DNSListen: f.dns,
		HubWSPort: f.hubWS, HubGRPCPort: f.hubGRPC, EdgeWSPort: f.edgeWS, EdgeGRPCPort: f.edgeGRPC,
	}, fleet.Options{Logger: log,
		// The hubs' overload control (admission and staged shedding) and
		// the edges' adaptive admission, which the dashboard charts.
		Hub: func(_ int, c *hub.Config, _ *hub.Options) { c.Overload.Enabled = f.admission },
		// The edges are one pool in front of the same hubs: each spaces
		// its refused at its share of the pool's handshake capacity.
		Edge: func(_ int, c *edge.Config) { c.Admission.Enabled, c.Load.SharePlaces = f.admission, f.admission },
	})
	if err != nil {
		return fmt.Errorf("up: %w", err)
	}
	sctx, cancel := context.WithTimeout(ctx, f.startTimeout)
	err = fl.Start(sctx)
	cancel()
	if err != nil {
		return fmt.Errorf("up: %w", err)
	}
	u := &up{g: g, log: log, fleet: fl, every: f.every, done: make(chan struct{})}
	defer u.stop(f.stopTimeout)
	if err := u.startAdmins(f); err != nil {
		return err
	}
	if err := u.printReady(); err != nil {
		return err
	}
	if f.storm != "" {
		if err := u.storm.start(u, f.storm); err != nil {
			return err
		}
	}
	<-ctx.Done()
	fmt.Fprintln(g.stdout, "corral up: stopping")
	return nil
}

// up is a running `corral up`: the fleet, the admin listeners and the
// dashboard's state.
type up struct {
	g     *globals
	log   *slog.Logger
	fleet *fleet.Fleet
	every time.Duration

	dash   *admin.Server
	admins []namedAdmin
	storm  storm
	done   chan struct{} // closed when stopping: ends the event streams
}

// namedAdmin is a part's admin listener.
type namedAdmin struct {
	name string
	srv  *admin.Server
}

// startAdmins starts every part's admin listener (on the part's own
// address: its index, metrics, readiness and status page, as the part's
// own command serves them) and the dashboard's.
func (u *up) startAdmins(f upFlags) error {
	port := strconv.Itoa(f.adminPort)
	dnsPart, dnsSrv := u.fleet.DNS()
	opts := func(name string, p fleet.Part, ready func() error) admin.Options {
		return admin.Options{Gatherer: p.Registry, Ready: ready, Logger: u.log, Title: "corral up: " + name}
	}
	dns := admin.New(admin.Config{Addr: f.dnsAdmin}, opts("dns", dnsPart, dnsSrv.Ready))
	dns.Page("/health", "the health checks of the records, reloading itself (?format=json)", dnsSrv.Checker().Handler())
	if err := u.runAdmin("dns", dns); err != nil {
		return err
	}
	for _, h := range u.fleet.Hubs() {
		adm := admin.New(admin.Config{Addr: net.JoinHostPort(h.IP, port)}, opts(h.Name, h.Part, h.Ready))
		adm.Page("GET /status", "this hub's state, reloading itself (?format=json)", hubStatusPage(h.Hub))
		if err := u.runAdmin(h.Name, adm); err != nil {
			return err
		}
	}
	for _, e := range u.fleet.Edges() {
		adm := admin.New(admin.Config{Addr: net.JoinHostPort(e.IP, port)}, opts(e.Name, e.Part, e.Ready))
		adm.Page("GET /status", "this edge's state, reloading itself (?format=json)", edgeStatusPage(e.Edge))
		if err := u.runAdmin(e.Name, adm); err != nil {
			return err
		}
	}
	u.dash = admin.New(admin.Config{Addr: f.listen}, admin.Options{Gatherer: admin.NewRegistry(), Logger: u.log, Title: "corral up"})
	u.routes(u.dash)
	return u.runAdmin("dashboard", u.dash)
}

// runAdmin runs srv until stop and waits until it has bound; the part's
// admin listeners are kept for the printout and the stop, the dashboard's
// is u.dash.
func (u *up) runAdmin(name string, srv *admin.Server) error {
	errc := make(chan error, 1)
	go func() { errc <- srv.Run(context.Background()) }()
	<-srv.Started()
	if srv.Addr() == nil {
		return fmt.Errorf("up: %s admin listener: %w", name, <-errc)
	}
	if srv != u.dash {
		u.admins = append(u.admins, namedAdmin{name, srv})
	}
	return nil
}

// printReady prints the URLs, the token and the client example.
func (u *up) printReady() error {
	fl := u.fleet
	tok, err := fl.Token(upTenant, []string{"news.*"}, 0, 24*time.Hour)
	if err != nil {
		return err
	}
	w := u.g.stdout
	edges := fl.Edges()
	var ws, rpc []string
	for _, e := range edges {
		ws = append(ws, "ws://"+e.Addr().String()+"/v1/ws")
		rpc = append(rpc, "grpc://"+e.GRPCAddr().String())
	}
	_, dns := fl.DNS()
	fmt.Fprintf(w, "corral up: %d hubs, %d edges, a NATS cluster of 3, origin.corral.test answered by %s\n\n", len(fl.Hubs()), len(edges), fl.Policy())
	fmt.Fprintf(w, "  dashboard   http://%s/dashboard\n", u.dash.Addr())
	fmt.Fprintf(w, "  devices     %s (WebSocket, through the edges)\n", strings.Join(ws, " "))
	fmt.Fprintf(w, "              %s (gRPC)\n", strings.Join(rpc, " "))
	dh, dp, _ := net.SplitHostPort(dns.Addr().String())
	fmt.Fprintf(w, "  dns         %s: dig @%s -p %s %s\n", dns.Addr(), dh, dp, fl.OriginName())
	for _, h := range fl.Hubs() {
		fmt.Fprintf(w, "  %-11s ws://%s/v1/ws  grpc://%s  publish http://%s\n", h.Name, h.Addr(), h.GRPCAddr(), h.Addr())
	}
	for _, a := range u.admins {
		fmt.Fprintf(w, "  admin       %-7s http://%s/\n", a.name, a.srv.Addr())
	}
	fmt.Fprintf(w, "\nTry it in another terminal (corral on your PATH, or go run ./cmd/corral in its place):\n\n")
	fmt.Fprintf(w, "  export CORRAL_TOKEN=%s\n", tok)
	fmt.Fprintf(w, "  corral sub %s %s\n", strings.Join(ws, ","), upChannel)
	fmt.Fprintf(w, "  corral pub --tenant %s --api-key %s %s %s hello\n", upTenant, fl.APIKey(), rpc[0], upChannel)
	fmt.Fprintf(w, "\nThe token allows news.* of tenant %s, every priority, for 24 h. Ctrl-C stops everything.\n", upTenant)
	_, err = fmt.Fprintln(w, "corral up: ready")
	return err
}

// stop ends the storm, the event streams and the listeners, then the
// fleet (the edges and hubs drain), within timeout.
func (u *up) stop(timeout time.Duration) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	u.storm.stopAndWait()
	close(u.done)
	var errs []error
	if u.dash != nil {
		errs = append(errs, u.dash.Shutdown(ctx))
	}
	errs = append(errs, u.fleet.Shutdown(ctx))
	for _, a := range u.admins {
		errs = append(errs, a.srv.Shutdown(ctx))
	}
	if err := errors.Join(errs...); err != nil {
		u.log.Warn("up: stop", "err", err)
	}
	fmt.Fprintln(u.g.stdout, "corral up: stopped")
}
