package fleet

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"

	"github.com/corralhq/corral/authdns/answer"
)

// Config describes a local fabric. The zero value is usable: Validate
// fills the defaults.
type Config struct {
	// Hubs is how many hubs run (default 3), hub i on the loopback address
	// HubNet + (i+1), all on one port so that one DNS name with a port
	// reaches every hub.
	Hubs int
	// HubNet is the first three octets of the hubs' addresses, with the
	// dot (default "127.0.1."); it must be inside 127.0.0.0/8.
	HubNet string
	// Edges is how many edges run (default 2; -1 for none), edge j on
	// EdgeNet + (j+1), all on one pair of ports like the hubs. Each
	// resolves the origin name at the fleet's DNS server and carries its
	// devices to the hubs over Relay streams.
	Edges int
	// EdgeNet is the first three octets of the edges' addresses, with the
	// dot (default "127.0.2.").
	EdgeNet string
	// Pick is how an edge picks a hub for a new session: "p2c" (default)
	// or "first-address" (the naive pick, to show the pile-up).
	Pick string
	// NATSMembers is the size of the NATS cluster (default 3); hub i joins
	// member i mod NATSMembers.
	NATSMembers int
	// Zone is the DNS zone served (default "corral.test"); the hubs are
	// the A records of "origin.<Zone>".
	Zone string
	// Policy is the routing policy of the origin record: one of package
	// answer's policies (default "multivalue": every healthy hub).
	Policy string
	// HealthCheck is how the DNS server checks each hub: "tcp" (default: a
	// connection to its gRPC port opens) or "grpc" (the hub's
	// grpc.health.v1 answers SERVING, which follows hub.Ready: a hub that
	// drains or is marked unhealthy leaves the answer while it still
	// accepts connections).
	HealthCheck string
	// DNSListen is the DNS server's address (default "127.0.0.1:0").
	DNSListen string
	// Secret is the HMAC secret session tokens are signed with (default: a
	// random one per fleet, see Fleet.Secret).
	Secret string
	// APIKey is the backends' publish key, for every tenant (default: a
	// random one, see Fleet.APIKey).
	APIKey string
	// HubWSPort and HubGRPCPort are the hubs' common WebSocket and gRPC
	// ports; EdgeWSPort and EdgeGRPCPort the edges'. 0 (the default)
	// picks a port free on every address of the tier.
	HubWSPort, HubGRPCPort, EdgeWSPort, EdgeGRPCPort int

	relayKey string // the edges' relay key, random per fleet
}

// Validate fills the defaults and checks the fields.
func (c *Config) Validate() error {
	if c.Hubs == 0 {
		c.Hubs = 3
	}
	if c.Hubs < 1 || c.Hubs > 254 {
		return fmt.Errorf("fleet: hubs: %d, want 1 to 254", c.Hubs)
	}
	if c.HubNet == "" {
		c.HubNet = "127.0.1."
	}
	if err := checkNet("hub_net", c.HubNet); err != nil {
		return err
	}
	switch {
	case c.Edges == 0:
		c.Edges = 2
	case c.Edges < -1 || c.Edges > 254:
		return fmt.Errorf("fleet: edges: %d, want 1 to 254, or -1 for none", c.Edges)
	}
	if c.EdgeNet == "" {
		c.EdgeNet = "127.0.2."
	}
	if err := checkNet("edge_net", c.EdgeNet); err != nil {
		return err
	}
	if c.EdgeNet == c.HubNet {
		return fmt.Errorf("fleet: edge_net %q: the same network as hub_net", c.EdgeNet)
	}
	switch c.Pick {
	case "":
		c.Pick = "p2c"
	case "p2c", "first-address":
	default:
		return fmt.Errorf("fleet: pick %q: want p2c or first-address", c.Pick)
	}
	if c.NATSMembers == 0 {
		c.NATSMembers = 3
	}
	if c.NATSMembers < 3 || c.NATSMembers > 5 {
		return fmt.Errorf("fleet: nats_members: %d, want 3 to 5 (the history is replicated 3 times)", c.NATSMembers)
	}
	if c.Zone == "" {
		c.Zone = "corral.test"
	}
	if c.Policy == "" {
		c.Policy = "multivalue"
	}
	if _, err := answer.ParsePolicy(c.Policy); err != nil {
		return fmt.Errorf("fleet: policy: %w", err)
	}
	switch c.HealthCheck {
	case "":
		c.HealthCheck = "tcp"
	case "tcp", "grpc":
	default:
		return fmt.Errorf("fleet: health_check %q: want tcp or grpc", c.HealthCheck)
	}
	if c.DNSListen == "" {
		c.DNSListen = "127.0.0.1:0"
	}
	for _, p := range []struct {
		key  string
		port int
	}{{"hub_ws_port", c.HubWSPort}, {"hub_grpc_port", c.HubGRPCPort}, {"edge_ws_port", c.EdgeWSPort}, {"edge_grpc_port", c.EdgeGRPCPort}} {
		if p.port < 0 || p.port > 65535 {
			return fmt.Errorf("fleet: %s: %d, want 0 (any free port) to 65535", p.key, p.port)
		}
	}
	if c.HubWSPort != 0 && c.HubWSPort == c.HubGRPCPort {
		return fmt.Errorf("fleet: hub_ws_port and hub_grpc_port: both %d", c.HubWSPort)
	}
	if c.EdgeWSPort != 0 && c.EdgeWSPort == c.EdgeGRPCPort {
		return fmt.Errorf("fleet: edge_ws_port and edge_grpc_port: both %d", c.EdgeWSPort)
	}
	if c.Secret != "" && len(c.Secret) < 32 {
		return errors.New("fleet: secret: shorter than 32 bytes")
	}
	return nil
}

// checkNet checks that net (the value of key) is three octets and a dot
// inside 127.0.0.0/8.
func checkNet(key, net string) error {
	if !strings.HasSuffix(net, ".") {
		return fmt.Errorf("fleet: %s %q: want three octets and a dot (127.0.1. for example)", key, net)
	}
	if a, err := netip.ParseAddr(net + "1"); err != nil || !netip.MustParsePrefix("127.0.0.0/8").Contains(a) {
		return fmt.Errorf("fleet: %s %q: not a loopback network (127.0.0.0/8)", key, net)
	}
	return nil
}

// edges is how many edges run.
func (c *Config) edges() int { return max(c.Edges, 0) }
