package natsutil

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
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
	// A route port can still be taken between its choice and its bind (by
	// a test of another package choosing from the same range): the member
	// then fails at once, and the cluster starts over on new ports.
	var (
		c   *Cluster
		err error
	)
	for range clusterStartTries {
		if c, err = startMembers(name, n, timeout, log); !errors.Is(err, errServerFailed) {
			break
		}
	}
	if err != nil {
		return nil, err
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

// clusterStartTries bounds how many times StartCluster picks new route
// ports after a member could not bind its own.
const clusterStartTries = 5

// startMembers starts the n servers of cluster name on route ports free
// now.
func startMembers(name string, n int, timeout time.Duration, log *slog.Logger) (*Cluster, error) {
	// Clustered JetStream needs every member to know its routes at start,
	// so the route ports are reserved first (and released just before the
	// servers bind them).
	addrs, err := FreeAddrs(n)
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
	return c, nil
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

// FreeAddrs returns n loopback addresses whose ports are free now, for
// route ports that every member of a cluster must know before the members
// start. The ports are below the kernel's ephemeral range, which port 0 and
// every outgoing connection draw from, so that on a busy machine no other
// socket takes one between now and the moment its server binds it.
func FreeAddrs(n int) ([]string, error) {
	low := ephemeralLow()
	var lns []net.Listener
	defer func() {
		for _, l := range lns {
			_ = l.Close()
		}
	}()
	var out []string
	for tries := 0; len(out) < n; tries++ {
		if tries > 100*n {
			return nil, fmt.Errorf("natsutil: no free loopback port below %d", low)
		}
		port := 10000 + rand.IntN(low-10000)
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		if err != nil {
			continue
		}
		lns = append(lns, l)
		out = append(out, l.Addr().String())
	}
	return out, nil
}

// ephemeralLow returns the first port of the kernel's ephemeral range
// (Linux: /proc/sys/net/ipv4/ip_local_port_range), 32768 when unknown.
func ephemeralLow() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err == nil {
		if f := strings.Fields(string(b)); len(f) == 2 {
			if p, err := strconv.Atoi(f[0]); err == nil && p > 11000 {
				return p
			}
		}
	}
	return 32768
}

// Shutdown stops every member.
func (c *Cluster) Shutdown() {
	for _, m := range c.Members {
		m.Shutdown()
	}
}
