package main

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	nbiologging "github.com/lesismal/nbio/logging"
	"github.com/spf13/cobra"

	"github.com/corralhq/corral/hub"
	"github.com/corralhq/corral/internal/admin"
	"github.com/corralhq/corral/internal/lifecycle"
)

// newHubCmd builds `corral hub`: the origin server of sessions.
func newHubCmd(g *globals) *cobra.Command {
	return newServerCmd(g, serverSpec[hub.Config]{
		name:  "hub",
		short: "Serve resumable sessions over WebSocket and gRPC, scaled out on NATS",
		long: `corral hub holds client sessions over WebSocket (GET /v1/ws, subprotocols
corral.v1.proto and corral.v1.json) and gRPC (corral.v1.Corral/Connect),
and edges' device sessions over corral.v1.Corral/Relay (relay.keys),
delivers channel messages, keeps a replay window so that a reconnecting client
gets exactly what it missed (or a gap), and takes publishes from backends over
gRPC, HTTP (POST /v1/publish with an API key) and plain NATS
(corral.publish.<tenant>.<channel>).

NATS is embedded by default (no port opened); nats.url joins a NATS cluster,
and every hub on it serves the same history (JetStream). On SIGTERM the hub
drains: GoAway to every session at drain.rate per second with jittered retry
hints, then exit when empty or at drain.deadline.

The admin listener serves an index of its pages at /, the status page at
/status (reloading itself; ?format=json), /metrics, /healthz, /readyz and
/debug/pprof/.`,
		example:   "examples/hub.yaml",
		envPrefix: "CORRAL_HUB",
		defaults:  func() *hub.Config { c := hub.DefaultConfig(); return &c },
		addrs:     func(c *hub.Config) (*string, *string) { return &c.Listen, &c.Admin.Addr },
		run:       runHub,
	})
}

// nbioLog forwards the log lines of nbio (the hub's WebSocket engine) to
// the process logger; nbio would print them on stdout, which carries only
// results. nbio has one process-wide logger that its goroutines read
// without a lock, so it is set once (useNbioLog), to this forwarder, and
// the logger it forwards to is swapped atomically: the tests run several
// commands in one process, and setting nbio's logger again while an
// earlier command's engine logged was a data race.
type nbioLog struct{}

var (
	nbioOnce   sync.Once
	nbioTarget atomic.Pointer[slog.Logger]
)

// useNbioLog sends nbio's log lines to log from now on.
func useNbioLog(log *slog.Logger) {
	nbioTarget.Store(log)
	nbioOnce.Do(func() { nbiologging.SetLogger(nbioLog{}) })
}

func (nbioLog) Debug(f string, v ...any) { nbioTarget.Load().Debug("nbio: " + fmt.Sprintf(f, v...)) }
func (nbioLog) Info(f string, v ...any)  { nbioTarget.Load().Debug("nbio: " + fmt.Sprintf(f, v...)) }
func (nbioLog) Warn(f string, v ...any)  { nbioTarget.Load().Warn("nbio: " + fmt.Sprintf(f, v...)) }
func (nbioLog) Error(f string, v ...any) { nbioTarget.Load().Warn("nbio: " + fmt.Sprintf(f, v...)) }

// runHub serves cfg until ctx ends, then drains.
func runHub(ctx context.Context, log *slog.Logger, cfg *hub.Config, _ string) error {
	useNbioLog(log)
	srv, adm, err := newHubParts(cfg, log)
	if err != nil {
		return err
	}
	grace := cmp.Or(cfg.Drain.Deadline, hub.DefaultDrainDeadline)
	return serveWithAdmin(ctx, log, grace+5*time.Second, adm, lifecycle.Named{Name: "hub", Part: srv})
}

// newHubParts builds the hub of cfg and its admin listener (metrics of a
// fresh registry, readiness, the index and the status page); it opens no
// socket.
func newHubParts(cfg *hub.Config, log *slog.Logger) (*hub.Hub, *admin.Server, error) {
	reg := admin.NewRegistry()
	srv, err := hub.New(*cfg, hub.Options{Registerer: reg, Logger: log})
	if err != nil {
		return nil, nil, err
	}
	adm := admin.New(admin.Config{Addr: cfg.Admin.Addr}, admin.Options{Gatherer: reg, Ready: srv.Ready, Logger: log, Title: "corral hub " + srv.NodeID()})
	adm.Page("GET /status", "this hub's state, reloading itself (?format=json)", hubStatusPage(srv))
	adm.Handle("POST /health/", srv.HealthControl()) // the operator's unhealthy switch
	return srv, adm, nil
}
