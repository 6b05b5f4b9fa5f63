package client

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"slices"
	"strings"

	"github.com/corralhq/corral/backoff"
)

// target is one entry of Config.Addrs, parsed.
type target struct {
	transport string // "ws" or "grpc"
	secure    bool   // wss or grpcs: TLS
	host      string // name or IP literal, without brackets
	port      string
	path      string // WebSocket path, "/v1/ws" when the URL has none
}

// endpoint is one address a target resolved to: what one attempt dials.
type endpoint struct {
	target
	ip netip.Addr
}

// dialAddr is the ip:port to connect to.
func (e endpoint) dialAddr() string { return net.JoinHostPort(e.ip.String(), e.port) }

// String is the endpoint as a URL with the resolved address, as events
// and Client.Addr show it: "ws://10.0.0.2:7400/v1/ws", "grpc://10.0.0.2:7401".
func (e endpoint) String() string {
	scheme := e.transport
	if e.secure {
		scheme += "s"
	}
	if e.transport == "grpc" {
		return scheme + "://" + e.dialAddr()
	}
	return scheme + "://" + e.dialAddr() + e.path
}

// url is the WebSocket URL with the name as given (for the Host header and
// TLS server name).
func (e endpoint) url() string {
	scheme := "ws"
	if e.secure {
		scheme = "wss"
	}
	return scheme + "://" + net.JoinHostPort(e.host, e.port) + e.path
}

// parseAddr parses an entry of Config.Addrs: a ws://, wss://, grpc:// or
// grpcs:// URL, or a bare host:port carried by transport.
func parseAddr(a, transport string) (target, error) {
	scheme, rest, ok := strings.Cut(a, "://")
	if !ok {
		scheme, rest = transport, a
		if scheme == "" {
			scheme = "ws"
		}
	}
	var t target
	switch scheme {
	case "ws", "wss":
		u, err := url.Parse("ws://" + rest)
		if err != nil {
			return target{}, fmt.Errorf("client: address %q: %w", a, err)
		}
		t = target{transport: "ws", secure: scheme == "wss", host: u.Hostname(), port: u.Port(), path: u.RequestURI()}
		if u.Path == "" {
			t.path = "/v1/ws" // the hub's WebSocket endpoint
		}
		if t.port == "" {
			t.port = map[bool]string{false: "80", true: "443"}[t.secure]
		}
	case "grpc", "grpcs":
		host, port, err := net.SplitHostPort(rest)
		if err != nil {
			return target{}, fmt.Errorf("client: address %q: want grpc://host:port: %w", a, err)
		}
		t = target{transport: "grpc", secure: scheme == "grpcs", host: host, port: port}
	default:
		return target{}, fmt.Errorf("client: address %q: scheme must be ws, wss, grpc or grpcs", a)
	}
	if t.host == "" {
		return target{}, fmt.Errorf("client: address %q: no host", a)
	}
	return t, nil
}

// resolve returns every endpoint of the targets: an IP literal is itself,
// a name is every A and AAAA address the resolver returns. A name that
// does not resolve is skipped; the error says why when nothing resolved.
func resolve(ctx context.Context, lookup func(context.Context, string) ([]netip.Addr, error), targets []target) ([]endpoint, error) {
	var eps []endpoint
	var errs []error
	for _, t := range targets {
		if ip, err := netip.ParseAddr(t.host); err == nil {
			eps = append(eps, endpoint{target: t, ip: ip})
			continue
		}
		ips, err := lookup(ctx, t.host)
		if err != nil {
			errs = append(errs, fmt.Errorf("client: resolve %s: %w", t.host, err))
			continue
		}
		if len(ips) == 0 {
			errs = append(errs, fmt.Errorf("client: resolve %s: no address", t.host))
		}
		for _, ip := range ips {
			eps = append(eps, endpoint{target: t, ip: ip.Unmap()})
		}
	}
	if len(eps) == 0 {
		return nil, errors.Join(errs...)
	}
	return eps, nil
}

// lookupIP is the default Config.Resolve: every A and AAAA address of
// host from the system resolver.
func lookupIP(ctx context.Context, host string) ([]netip.Addr, error) {
	return net.DefaultResolver.LookupNetIP(ctx, "ip", host)
}

// order returns the endpoints in the order one round of attempts tries
// them: backoff.Round's (a uniformly random permutation, so that a fleet
// spreads over every address from the first resolution, never piling onto
// the first one, with last, the endpoint of the previous attempt, moved to
// the end: a session that ended or an attempt that failed goes elsewhere
// first); or, with inOrder, the list rotated to start at start.
func order(eps []endpoint, inOrder bool, start int, last string) []endpoint {
	out := make([]endpoint, 0, len(eps))
	if inOrder {
		for i := range eps {
			out = append(out, eps[(start+i)%len(eps)])
		}
		return out
	}
	li := slices.IndexFunc(eps, func(e endpoint) bool { return e.String() == last })
	for _, j := range backoff.Round(len(eps), li, nil) {
		out = append(out, eps[j])
	}
	return out
}
