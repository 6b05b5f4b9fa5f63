package scenario

import (
	"fmt"
	"net/netip"
	"net/url"
	"slices"
)

// Target is the fleet a load generator drives (kraken): where the devices
// connect. sim models its fabric from origins and dns instead and ignores
// it. The zero value names no target (corral kraken run --target gives
// one).
type Target struct {
	// URLs are the fleet's endpoints: ws://host:port[/path] (wss:// for
	// TLS) for WebSocket devices, grpc://host:port (grpcs:// for TLS) for
	// gRPC devices (population.protocol). A host that is a name stands for every address it
	// resolves to through Resolver; a list of addresses is a list of URLs.
	URLs []string `yaml:"urls"`
	// Resolver is the ip:port of the DNS server that resolves the URLs'
	// names (the fleet's authdns). Empty: the system resolver.
	Resolver string `yaml:"resolver"`
}

// targetSchemes are the schemes of target.urls.
var targetSchemes = []string{"ws", "wss", "grpc", "grpcs"}

// validate reports every bad URL and a bad resolver.
func (t Target) validate(bad func(string, string, ...any)) {
	for i, s := range t.URLs {
		u, err := url.Parse(s)
		if err != nil || !slices.Contains(targetSchemes, u.Scheme) || u.Hostname() == "" || u.Port() == "" || u.RawQuery != "" || u.Fragment != "" || u.User != nil {
			bad(fmt.Sprintf("target.urls[%d]", i), "%q: want ws://host:port[/path] (or wss://), or grpc://host:port (or grpcs://)", s)
		}
	}
	if t.Resolver != "" {
		if ap, err := netip.ParseAddrPort(t.Resolver); err != nil || ap.Port() == 0 {
			bad("target.resolver", "%q: want ip:port of a DNS server", t.Resolver)
		}
	}
}
