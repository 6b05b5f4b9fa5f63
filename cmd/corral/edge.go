package main

import (
	"cmp"
	"context"
	"log/slog"
	"time"

	"github.com/spf13/cobra"

	"github.com/corralhq/corral/edge"
	"github.com/corralhq/corral/internal/admin"
	"github.com/corralhq/corral/internal/lifecycle"
)

// newEdgeCmd builds `corral edge`: the L7 tier in front of the hubs.
func newEdgeCmd(g *globals) *cobra.Command {
	return newServerCmd(g, serverSpec[edge.Config]{
		name:  "edge",
		short: "Terminate device sessions and carry them to the hubs over a few multiplexed streams",
		long: `corral edge terminates device sessions over WebSocket (GET /v1/ws,
subprotocols corral.v1.proto and corral.v1.json) and gRPC
(corral.v1.Corral/Connect), the same protocol a device speaks to a hub, and
carries them to the hubs (origins) over a few Relay streams per hub address.
Every bound of the session protocol is enforced at the edge before anything
goes upstream; pings are answered at the edge.

Origins are a DNS name and port resolved through a configured resolver (for
example a corral dns), re-resolved at the TTL; every address is used, and a
new session goes to the less loaded of two (power of two choices). Admission
adapts to the handshake latency of the origins and sheds by priority, P0
last. On SIGTERM the edge drains: GoAway to every session at drain.rate per
second with jittered retry hints.

With tls (cert_file, key_file) both device listeners serve TLS (wss and
grpcs), the files reloaded when they change; with origins.tls the Relay
streams to the hubs are TLS (ca_file, server_name, and cert_file and
key_file for hubs that require a client certificate).

The admin listener serves an index of its pages at /, the status page at
/status (reloading itself; ?format=json), /metrics, /healthz, /readyz
(503 while draining) and /debug/pprof/.`,
		example:   "examples/edge.yaml",
		envPrefix: "CORRAL_EDGE",
		defaults:  func() *edge.Config { c := edge.DefaultConfig(); return &c },
		addrs:     func(c *edge.Config) (*string, *string) { return &c.Listen, &c.Admin.Addr },
		run:       runEdge,
	})
}

// runEdge serves cfg until ctx ends, then drains.
func runEdge(ctx context.Context, log *slog.Logger, cfg *edge.Config, _ string) error {
	// nbio has one process-wide logger; the binary runs one edge.
	useNbioLog(log)
	srv, adm, err := newEdgeParts(cfg, log)
	if err != nil {
		return err
	}
	grace := cmp.Or(cfg.Drain.Deadline, edge.DefaultDrainDeadline)
	return serveWithAdmin(ctx, log, grace+5*time.Second, adm, lifecycle.Named{Name: "edge", Part: srv})
}

// newEdgeParts builds the edge of cfg and its admin listener (metrics of a
// fresh registry, readiness, the index and the status page); it opens no
// socket.
func newEdgeParts(cfg *edge.Config, log *slog.Logger) (*edge.Edge, *admin.Server, error) {
	reg := admin.NewRegistry()
	srv, err := edge.New(*cfg, edge.Options{Registerer: reg, Logger: log})
	if err != nil {
		return nil, nil, err
	}
	adm := admin.New(admin.Config{Addr: cfg.Admin.Addr}, admin.Options{Gatherer: reg, Ready: srv.Ready, Logger: log, Title: "corral edge " + srv.NodeID()})
	adm.Page("GET /status", "this edge's state, reloading itself (?format=json)", edgeStatusPage(srv))
	return srv, adm, nil
}
