package hub

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/corralhq/corral/internal/natsutil"
	"github.com/corralhq/corral/internal/testkit"
	"github.com/corralhq/corral/wire"
)

// TestHubWaitsForJetStream runs a hub on a NATS server without JetStream:
// the hub neither exits nor serves, Ready names the reason, the log says it
// retries; once JetStream is enabled on the server the hub opens its
// history and becomes ready.
func TestHubWaitsForJetStream(t *testing.T) {
	srv, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, NoSigs: true})
	if err != nil {
		t.Fatal(err)
	}
	srv.Start()
	defer srv.Shutdown()
	if !srv.ReadyForConnections(10 * time.Second) {
		t.Fatal("nats-server not ready")
	}
	nc, err := nats.Connect(srv.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	cfg := DefaultConfig()
	cfg.Listen, cfg.GRPCListen, cfg.Admin.Addr = "127.0.0.1:0", "", ""
	var logs testkit.SyncBuffer
	h, err := New(cfg, Options{NATS: nc, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ran := make(chan error, 1)
	go func() { ran <- h.Run(ctx) }()

	testkit.WaitFor(t, 30*time.Second, "Ready to name the history and a retry in the log", func() bool {
		err := h.Ready()
		return err != nil && strings.Contains(err.Error(), "history unavailable") &&
			strings.Contains(logs.String(), "history not available, retrying")
	})
	select {
	case err := <-ran:
		t.Fatalf("the hub exited while JetStream was off: %v", err)
	default:
	}
	if h.Addr() != nil {
		t.Error("the hub listens before its history is open")
	}

	if err := srv.EnableJetStream(&server.JetStreamConfig{StoreDir: t.TempDir()}); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, 60*time.Second, "the hub to be ready once JetStream runs", func() bool { return h.Ready() == nil })
	if _, err := h.Publish(ctx, PublishRequest{Tenant: "acme", Channel: "c", Data: []byte("x")}); err != nil {
		t.Fatalf("publish once ready: %v", err)
	}
	sctx, c := context.WithTimeout(context.Background(), 10*time.Second)
	defer c()
	if err := h.Shutdown(sctx); err != nil {
		t.Fatal(err)
	}
	if err := <-ran; err != nil {
		t.Fatal(err)
	}
}

// TestReadyFollowsHistory runs a hub with an unreplicated history
// (history.replicas: 1) on a three-node NATS cluster and kills the node
// that holds the history stream: the hub is no longer ready (it was ready
// while every publish failed), and publishes fail.
func TestReadyFollowsHistory(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a NATS cluster")
	}
	cl, err := natsutil.StartCluster("corral-ready", 3, 30*time.Second, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Shutdown()
	var urls []string
	for _, m := range cl.Members {
		urls = append(urls, m.Server.ClientURL())
	}
	nc, err := nats.Connect(strings.Join(urls, ","), nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	th := startHub(t, func(c *Config, o *Options) {
		c.History.Replicas = 1
		o.NATS = nc
	})
	ctx := context.Background()
	if _, err := th.Publish(ctx, PublishRequest{Tenant: "acme", Channel: "c", Data: []byte("before")}); err != nil {
		t.Fatal(err)
	}
	js, _ := jetstream.New(nc)
	s, err := js.Stream(ctx, "CORRAL_HISTORY")
	if err != nil {
		t.Fatal(err)
	}
	info := s.CachedInfo()
	if info.Config.Replicas != 1 || info.Cluster == nil || info.Cluster.Leader == "" {
		t.Fatalf("history stream: replicas %d, cluster %+v", info.Config.Replicas, info.Cluster)
	}
	for _, m := range cl.Members {
		if m.Server.Name() == info.Cluster.Leader {
			m.Shutdown()
		}
	}
	testkit.WaitFor(t, 60*time.Second, "Ready to fail with the history gone", func() bool {
		err := th.Ready()
		return err != nil && strings.Contains(err.Error(), "history unavailable")
	})
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	_, err = th.Publish(pctx, PublishRequest{Tenant: "acme", Channel: "c", Data: []byte("after")})
	var cl2 wire.Close
	if !errors.As(err, &cl2) {
		t.Fatalf("publish with the history gone: %v, want a close error", err)
	}
}

// TestRunReturnsWhenListenFails: Run returns the listen error (it waited
// for its own goroutines, which waited for its context, for ever).
func TestRunReturnsWhenListenFails(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	cfg := DefaultConfig()
	cfg.Listen, cfg.GRPCListen, cfg.Admin.Addr = taken.Addr().String(), "", ""
	cfg.History.Store = "memory"
	h, err := New(cfg, Options{NATS: sharedNATS(t).NC})
	if err != nil {
		t.Fatal(err)
	}
	ran := make(chan error, 1)
	go func() { ran <- h.Run(context.Background()) }()
	select {
	case err := <-ran:
		if err == nil || !strings.Contains(err.Error(), "hub: listen") {
			t.Fatalf("Run = %v, want the listen error", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Run did not return after its listener failed")
	}
}

// TestHubWaitsForNATS runs a hub whose external NATS (nats.url) is not up
// yet, as when hubs and NATS start together: the hub waits, not ready,
// and serves once a NATS server with JetStream comes up at the URL.
func TestHubWaitsForNATS(t *testing.T) {
	addrs, err := natsutil.FreeAddrs(1)
	if err != nil {
		t.Fatal(err)
	}
	host, port, _ := net.SplitHostPort(addrs[0])
	cfg := DefaultConfig()
	cfg.Listen, cfg.GRPCListen, cfg.Admin.Addr = "127.0.0.1:0", "", ""
	cfg.NATS.URL = "nats://" + addrs[0]
	cfg.NATS.ConnectTimeout = time.Second
	h, err := New(cfg, Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ran := make(chan error, 1)
	go func() { ran <- h.Run(ctx) }()
	testkit.WaitFor(t, 30*time.Second, "Ready to say the history is unavailable", func() bool {
		select {
		case err := <-ran:
			t.Fatalf("the hub exited while NATS was down: %v", err)
		default:
		}
		err := h.Ready()
		return err != nil && strings.Contains(err.Error(), "history unavailable")
	})

	p, _ := strconv.Atoi(port)
	srv, err := server.NewServer(&server.Options{Host: host, Port: p, JetStream: true, StoreDir: t.TempDir(), NoSigs: true})
	if err != nil {
		t.Fatal(err)
	}
	srv.Start()
	defer srv.Shutdown()
	testkit.WaitFor(t, 60*time.Second, "the hub to be ready once NATS is up", func() bool { return h.Ready() == nil })
	if _, err := h.Publish(ctx, PublishRequest{Tenant: "acme", Channel: "c", Data: []byte("x")}); err != nil {
		t.Fatalf("publish once ready: %v", err)
	}
	sctx, c := context.WithTimeout(context.Background(), 10*time.Second)
	defer c()
	_ = h.Shutdown(sctx)
	<-ran
}
