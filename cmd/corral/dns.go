package main

import (
	"context"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/corralhq/corral/authdns"
	"github.com/corralhq/corral/internal/admin"
	"github.com/corralhq/corral/internal/lifecycle"
)

// newDNSCmd builds `corral dns`: the authoritative DNS server.
func newDNSCmd(g *globals) *cobra.Command {
	return newServerCmd(g, serverSpec[authdns.Config]{
		name:  "dns",
		short: "Serve authoritative DNS with health-aware routing policies",
		long: `corral dns serves the zones of its config over UDP and TCP on one port,
answering with Route 53's routing policies (simple, weighted, multivalue,
failover) and corral's (weighted-subset, shuffle-sharded hands, cidr), and
following the health checks of the config. It reloads the config on SIGHUP
and when the file changes; a config that does not validate is logged with
its file and line, and the previous zones keep serving.

The admin listener serves an index of its pages at /, /metrics, /healthz,
/readyz, /debug/pprof/ and the health check status page at /health.`,
		example:   "examples/dns.yaml",
		envPrefix: "CORRAL_DNS",
		defaults:  func() *authdns.Config { c := authdns.DefaultConfig(); return &c },
		load:      authdns.LoadConfig,
		addrs:     func(c *authdns.Config) (*string, *string) { return &c.Listen, &c.Admin.Addr },
		run:       runDNS,
	})
}

// runDNS serves cfg until ctx ends; path, when set, is watched for reloads.
func runDNS(ctx context.Context, log *slog.Logger, cfg *authdns.Config, path string) error {
	srv, adm, err := newDNSParts(cfg, log)
	if err != nil {
		return err
	}
	if path != "" {
		hup := make(chan os.Signal, 1)
		signal.Notify(hup, syscall.SIGHUP)
		defer signal.Stop(hup)
		wctx, cancel := context.WithCancel(ctx)
		defer cancel()
		listen, admAddr := cfg.Listen, cfg.Admin.Addr
		go srv.Watch(wctx, authdns.WatchOptions{
			Path:    path,
			Signals: hup,
			Load: func(p string) (*authdns.Config, error) {
				c, err := authdns.LoadConfig(p)
				if c != nil {
					c.Listen, c.Admin.Addr = listen, admAddr // flags keep overriding the file
				}
				return c, err
			},
		})
	}
	return serveWithAdmin(ctx, log, 5*time.Second, adm, lifecycle.Named{Name: "dns", Part: srv})
}

// newDNSParts builds the DNS server of cfg and its admin listener (metrics
// of a fresh registry, readiness, the index and the health checks' status
// page); it opens no socket.
func newDNSParts(cfg *authdns.Config, log *slog.Logger) (*authdns.Server, *admin.Server, error) {
	reg := admin.NewRegistry()
	srv, err := authdns.New(cfg, authdns.Options{Registerer: reg, Logger: log})
	if err != nil {
		return nil, nil, err
	}
	adm := admin.New(admin.Config{Addr: cfg.Admin.Addr}, admin.Options{Gatherer: reg, Ready: srv.Ready, Logger: log, Title: "corral dns"})
	adm.Page("/health", "the health checks of the records and the effective weights of load feedback, reloading itself (?format=json)", srv.HealthHandler())
	return srv, adm, nil
}
