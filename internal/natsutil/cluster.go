package natsutil

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// Cluster is a set of embedded nats-servers joined by routes on loopback,
// with clustered JetStream. Tests use it to join several hubs; `corral up`
// uses it for a local fleet.
type Cluster struct {
	// Members are the servers, in start order.
	Members []*Embedded
}

// StartCluster starts n embedded servers named name-1 .. name-n in cluster
// name, with route ports on free loopback ports and no client ports (clients
// join in process through Member(i).Server). It waits until every member has
// a route to every other and JetStream has a meta leader, or timeout passes.
func StartCluster(name string, n int, timeout time.Duration, log *slog.Logger) (*Cluster, error) {
	if n < 1 {
		return nil, fmt.Errorf("natsutil: cluster of %d servers", n)
	}
	// Clustered JetStream needs every member to know its routes at start,
	// so the route ports are reserved first (and released just before the
	// servers bind them).
	addrs, err := freePorts(n)
	if err != nil {
		return nil, err
	}
	var routes []string
	for _, a := range addrs {
		routes = append(routes, "nats://"+a)
	}
	c := &Cluster{}
	for i := range n {
		cfg := Config{
			ServerName:     fmt.Sprintf("%s-%d", name, i+1),
			ConnectTimeout: timeout,
			Cluster:        ClusterConfig{Name: name, Listen: addrs[i], Routes: routes},
		}
		e, err := StartServer(cfg, log)
		if err != nil {
			c.Shutdown()
			return nil, err
		}
		c.Members = append(c.Members, e)
	}
	deadline := time.Now().Add(timeout)
	for {
		ok := true
		leader := false
		for _, m := range c.Members {
			if m.Server.NumRoutes() < n-1 {
				ok = false
			}
			if m.Server.JetStreamIsLeader() {
				leader = true
			}
		}
		if ok && (leader || n == 1) && c.placesStreams(n) {
			return c, nil
		}
		if time.Now().After(deadline) {
			c.Shutdown()
			return nil, fmt.Errorf("natsutil: cluster %s not formed within %v", name, timeout)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// placesStreams reports whether clustered JetStream takes a stream
// replicated on every member now (the meta leader can be elected before the
// peers are known to it).
func (c *Cluster) placesStreams(n int) bool {
	nc, err := ConnectEmbedded(c.Members[0].Server, "natsutil-probe", false)
	if err != nil {
		return false
	}
	defer nc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if _, err := EnsureStream(ctx, nc.JS, jetstream.StreamConfig{Name: "NATSUTIL_PROBE", Subjects: []string{"natsutil.probe"}, Storage: jetstream.MemoryStorage, Replicas: n}); err != nil {
		return false
	}
	_ = nc.JS.DeleteStream(ctx, "NATSUTIL_PROBE")
	return true
}

// freePorts returns n free loopback addresses.
func freePorts(n int) ([]string, error) {
	var lns []net.Listener
	defer func() {
		for _, l := range lns {
			_ = l.Close()
		}
	}()
	var out []string
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("natsutil: reserve a route port: %w", err)
		}
		lns = append(lns, l)
		out = append(out, l.Addr().String())
	}
	return out, nil
}

// Shutdown stops every member.
func (c *Cluster) Shutdown() {
	for _, m := range c.Members {
		m.Shutdown()
	}
}
