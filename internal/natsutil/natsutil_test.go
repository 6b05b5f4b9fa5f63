package natsutil

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

func TestEmbeddedOpensNoPortAndRunsJetStream(t *testing.T) {
	ctx := context.Background()
	c, err := Connect(ctx, Config{}, "test", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if c.Server() == nil {
		t.Fatal("no embedded server")
	}
	if a := c.Server().Addr(); a != nil {
		t.Errorf("embedded server listens on %v without being asked", a)
	}
	if c.Persistent() {
		t.Error("memory-only embedded server reports persistent")
	}
	s, err := EnsureStream(ctx, c.JS, jetstream.StreamConfig{Name: "T", Subjects: []string{"t.>"}, Storage: jetstream.MemoryStorage})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.JS.Publish(ctx, "t.a", []byte("one"), jetstream.WithExpectLastSequencePerSubject(0)); err != nil {
		t.Fatal(err)
	}
	_, err = c.JS.Publish(ctx, "t.a", []byte("two"), jetstream.WithExpectLastSequencePerSubject(0))
	if !IsWrongLastSequence(err) {
		t.Fatalf("second publish expecting an empty subject: err = %v, want wrong last sequence", err)
	}
	m, err := s.GetLastMsgForSubject(ctx, "t.a")
	if err != nil || string(m.Data) != "one" {
		t.Fatalf("last = %v, %v", m, err)
	}
}

func TestListenOpensClientPort(t *testing.T) {
	c, err := Connect(context.Background(), Config{Listen: "127.0.0.1:0"}, "test", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	nc, err := nats.Connect(c.Server().ClientURL())
	if err != nil {
		t.Fatalf("external client cannot join %s: %v", c.Server().ClientURL(), err)
	}
	nc.Close()
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
		want string
	}{
		{"url with embedded options", Config{URL: "nats://x:4222", StoreDir: "/tmp/x"}, "url"},
		{"bad listen", Config{Listen: "nope"}, "listen"},
		{"negative timeout", Config{ConnectTimeout: -time.Second}, "connect_timeout"},
		{"cluster without listen", Config{Cluster: ClusterConfig{Name: "c"}}, "cluster"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.cfg.Validate()
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "natsutil: ") {
				t.Fatalf("err = %v, want a natsutil error naming %q", err, tc.want)
			}
		})
	}
	if err := (Config{}).Validate(); err != nil {
		t.Errorf("zero config: %v", err)
	}
}

func TestClusterRoutesMessagesBetweenMembers(t *testing.T) {
	cl, err := StartCluster("t", 3, 30*time.Second, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Shutdown()
	a, err := ConnectEmbedded(cl.Members[0].Server, "a", false)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	c, err := ConnectEmbedded(cl.Members[2].Server, "c", false)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	sub, err := c.NC.SubscribeSync("x")
	if err != nil {
		t.Fatal(err)
	}
	if err := c.NC.Flush(); err != nil {
		t.Fatal(err)
	}
	// Interest propagates over routes asynchronously: publish until it
	// arrives.
	for i := 0; ; i++ {
		if err := a.NC.Publish("x", []byte("hi")); err != nil {
			t.Fatal(err)
		}
		m, err := sub.NextMsg(100 * time.Millisecond)
		if err == nil {
			if string(m.Data) != "hi" {
				t.Fatalf("got %q", m.Data)
			}
			break
		}
		if !errors.Is(err, nats.ErrTimeout) || i > 200 {
			t.Fatalf("no message across the cluster: %v", err)
		}
	}
	// Clustered JetStream answers on every member. Each try gets its own
	// few seconds: a request sent while the meta leader is (re)elected can
	// go unanswered, and one try with the whole budget failed CI on a
	// loaded machine (2026-12-01, 20 s). The overall bound guards a hang.
	end := time.Now().Add(2 * time.Minute)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_, err = EnsureStream(ctx, c.JS, jetstream.StreamConfig{Name: "C", Subjects: []string{"c.>"}, Storage: jetstream.MemoryStorage})
		cancel()
		if err == nil || time.Now().After(end) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("stream on the cluster: %v", err)
	}
}

func TestScaleStreamRaisesReplicas(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a NATS cluster")
	}
	cl, err := StartCluster("scale", 3, 30*time.Second, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Shutdown()
	c, err := ConnectEmbedded(cl.Members[0].Server, "t", false)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute) // a hang guard (see above)
	defer cancel()
	if _, err := EnsureStream(ctx, c.JS, jetstream.StreamConfig{Name: "S", Subjects: []string{"s.>"}, Storage: jetstream.MemoryStorage, Replicas: 1}); err != nil {
		t.Fatal(err)
	}
	for _, n := range []int{3, 1} { // up to 3, then a lower n leaves it at 3
		if err := ScaleStream(ctx, c.JS, "S", n); err != nil {
			t.Fatal(err)
		}
		s, err := c.JS.Stream(ctx, "S")
		if err != nil {
			t.Fatal(err)
		}
		if r := s.CachedInfo().Config.Replicas; r != 3 {
			t.Fatalf("after ScaleStream(%d): %d replicas, want 3", n, r)
		}
	}
}

// TestStartServerFailsAtOnceOnATakenRoutePort starts a clustered server on
// a route port another socket holds: the start fails with nats-server's
// listen error, marked for StartCluster to retry on new ports, instead of
// waiting out the timeout as a server never ready.
func TestStartServerFailsAtOnceOnATakenRoutePort(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	addr := ln.Addr().String()
	e, err := StartServer(Config{ServerName: "taken", ConnectTimeout: time.Minute,
		Cluster: ClusterConfig{Name: "taken", Listen: addr, Routes: []string{"nats://" + addr}}}, nil)
	if err == nil {
		e.Shutdown()
		t.Fatal("started on a taken route port")
	}
	if !errors.Is(err, errServerFailed) || !strings.Contains(err.Error(), "router port") {
		t.Fatalf("start: %v, want the route listener's error", err)
	}
}
