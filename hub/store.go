package hub

import (
	"context"
	"fmt"
	"net/url"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/corralhq/corral/backoff"
	"github.com/corralhq/corral/hub/history"
	"github.com/corralhq/corral/internal/lifecycle"
	"github.com/corralhq/corral/internal/natsutil"
)

const (
	// storeAttemptTimeout bounds one attempt at opening the streams.
	storeAttemptTimeout = 5 * time.Second
	// historyProbeInterval is how often a running hub checks that its
	// history answers; historyProbeTimeout bounds one check.
	historyProbeInterval = 2 * time.Second
	historyProbeTimeout  = 2 * time.Second
)

// openStoresRetrying opens the history and ingest streams, and retries
// with jittered backoff until they open or ctx ends: JetStream may not take
// streams yet (a NATS cluster that is still electing its meta leader, or
// whose peers are not all known, several hubs creating the same stream at
// once), and a hub that exits then crash-loops. Meanwhile Ready reports the
// reason, which is also logged at every attempt. It returns nil when ctx
// ends first.
func (h *Hub) openStoresRetrying(ctx context.Context) error {
	b, err := backoff.NewBackoff(backoff.Config{Base: 200 * time.Millisecond, Cap: 5 * time.Second}, nil)
	if err != nil {
		return fmt.Errorf("hub: %w", err)
	}
	for {
		actx, cancel := context.WithTimeout(ctx, storeAttemptTimeout)
		err := h.openStores(actx)
		cancel()
		if err == nil {
			h.historyDown.Store(nil)
			return nil
		}
		if ctx.Err() != nil {
			return nil
		}
		why := err.Error()
		h.historyDown.Store(&why)
		d := b.Next()
		h.log.Warn("history not available, retrying", "attempt", b.Attempt(), "retry_in", d.Round(time.Millisecond).String(), "err", err)
		t := time.NewTimer(d)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C:
		}
	}
}

func (h *Hub) openStores(ctx context.Context) error {
	if h.histCfg.Store == history.StoreMemory && len(h.ingestCfg.Prefixes) == 0 {
		h.store = history.NewMemory(h.histCfg, history.MemoryOptions{Now: h.now})
		return nil
	}
	// JetStream answers once it runs (on a cluster: once it has a meta
	// leader, which needs routes to a quorum): only then does the cluster
	// size the hub reads from NATS mean something.
	if _, err := h.js.AccountInfo(ctx); err != nil {
		return fmt.Errorf("hub: jetstream: %w", err)
	}
	replicas := h.streamReplicas()
	h.replicas.Store(int64(replicas))
	switch h.histCfg.Store {
	case history.StoreMemory:
		h.store = history.NewMemory(h.histCfg, history.MemoryOptions{Now: h.now})
	default:
		cfg := h.histCfg
		cfg.Replicas = replicas
		js := history.NewJetStream(cfg, history.JetStreamOptions{JS: h.js, FileStorage: h.fileStorage})
		if err := js.Open(ctx); err != nil {
			return fmt.Errorf("%w (replicas %d)", err, replicas)
		}
		h.store = js
	}
	if len(h.ingestCfg.Prefixes) > 0 {
		storage := jetstream.MemoryStorage
		if h.fileStorage {
			storage = jetstream.FileStorage
		}
		if _, err := natsutil.EnsureStream(ctx, h.js, jetstream.StreamConfig{
			Name: h.ingestCfg.Stream, Description: "corral hub telemetry ingest",
			Subjects: []string{subjectIngest + ">"}, MaxAge: h.ingestCfg.MaxAge, Storage: storage,
			Replicas: replicas, Duplicates: 2 * time.Minute,
		}); err != nil {
			return fmt.Errorf("hub: ingest stream: %w", err)
		}
	}
	return nil
}

// streamReplicas returns history.replicas when it is set. Otherwise a lone
// NATS server gets 1, and a clustered one a replicated stream: 3, or the
// cluster's size when it is smaller, so that losing one NATS node loses
// no history.
func (h *Hub) streamReplicas() int {
	if h.cfg.History.Replicas != 0 {
		return h.cfg.History.Replicas
	}
	if h.nc.ConnectedClusterName() == "" {
		return 1
	}
	return min(3, h.clusterSize())
}

// clusterSize is the number of NATS servers of the cluster as the hub sees
// them. On a connection to a URL (nats.url, or the caller's connection) it
// is the connection's server pool: the URLs it was given and the client
// URLs the servers advertise. On the embedded server it is the largest of
// the advertised URLs and the members of nats.cluster's routes, itself
// included (the in-process connection's pool holds a placeholder URL).
// Servers that advertise no client URL are not counted: set
// history.replicas then.
func (h *Hub) clusterSize() int {
	if h.opts.NATS != nil || h.cfg.NATS.URL != "" {
		return max(1, len(h.nc.Servers()))
	}
	n := max(1, len(h.nc.DiscoveredServers()))
	if h.cfg.NATS.Cluster.Name != "" {
		members := map[string]bool{h.cfg.NATS.Cluster.Listen: true}
		for _, r := range h.cfg.NATS.Cluster.Routes {
			if u, err := url.Parse(r); err == nil {
				members[u.Host] = true
			}
		}
		n = max(n, len(members))
	}
	return n
}

// probeHistory checks the history every period while the hub runs, so that
// Ready fails while history can be neither read nor written (a NATS node
// holding an unreplicated stream is gone, a replicated one lost its
// quorum), and passes again when it recovers.
func (h *Hub) probeHistory(ctx context.Context, store history.Store, period time.Duration) {
	c, ok := store.(interface{ Check(context.Context) error })
	if !ok {
		return
	}
	lifecycle.Every(ctx, period, func() {
		pctx, cancel := context.WithTimeout(ctx, historyProbeTimeout)
		err := c.Check(pctx)
		cancel()
		if ctx.Err() != nil {
			return
		}
		was := h.historyDown.Load()
		switch {
		case err != nil:
			why := err.Error()
			h.historyDown.Store(&why)
			if was == nil {
				h.log.Warn("history unavailable: not ready", "err", err)
			}
		case was != nil:
			h.historyDown.Store(nil)
			h.log.Info("history available again: ready")
		}
		if err == nil {
			h.scaleHistory(ctx, store)
		}
	})
}

// scaleHistory raises the replicas of the history (and ingest) streams when they were
// not configured and the NATS cluster turns out larger than the hub saw at
// start (a fresh cluster whose last node joined after JetStream answered,
// or a cluster that grew).
func (h *Hub) scaleHistory(ctx context.Context, store history.Store) {
	s, ok := store.(interface {
		Scale(context.Context, int) error
	})
	if !ok || h.cfg.History.Replicas != 0 {
		return
	}
	want := h.streamReplicas()
	if int64(want) <= h.replicas.Load() {
		return
	}
	sctx, cancel := context.WithTimeout(ctx, historyProbeTimeout)
	defer cancel()
	err := s.Scale(sctx, want)
	if err == nil && len(h.ingestCfg.Prefixes) > 0 {
		err = natsutil.ScaleStream(sctx, h.js, h.ingestCfg.Stream, want)
	}
	if err != nil {
		h.log.Warn("history: could not raise the stream replicas", "replicas", want, "err", err)
		return
	}
	h.replicas.Store(int64(want))
	h.log.Info("history stream replicated on more NATS nodes", "replicas", want)
}
