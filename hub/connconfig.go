package hub

import (
	"cmp"
	"time"

	"github.com/corralhq/corral/internal/config"
	"github.com/corralhq/corral/internal/wsserve"
)

// ConnectionConfig bounds the connections of the hub's listeners that are
// idle, half-open or slow to close, before and beside sessions (YAML
// section "connections"). Every connection a device or a backend opens is
// bounded by one of these, whatever it sends or does not send. The zero
// value of a field takes its default. The HTTP fields and CloseTimeout
// configure the WebSocket server (internal/wsserve, shared with the edge,
// whose defaults they take); the gRPC fields the gRPC server.
type ConnectionConfig struct {
	// HTTPReadHeaderTimeout bounds reading a request's header on the HTTP
	// listener (a WebSocket upgrade or a publish), from its first byte.
	// Default: session.handshake_timeout (10s).
	HTTPReadHeaderTimeout time.Duration `yaml:"http_read_header_timeout"`
	// HTTPReadTimeout bounds reading a whole request, body included.
	// Default 30s.
	HTTPReadTimeout time.Duration `yaml:"http_read_timeout"`
	// HTTPWriteTimeout bounds writing a response (a publish answer).
	// Default 30s. Upgraded WebSocket connections leave net/http and are
	// bounded by the session's own timers instead.
	HTTPWriteTimeout time.Duration `yaml:"http_write_timeout"`
	// HTTPIdleTimeout is how long a keep-alive connection may wait for its
	// next request, including one whose first bytes arrived but not its
	// header's first line. Default 60s.
	HTTPIdleTimeout time.Duration `yaml:"http_idle_timeout"`
	// GRPCHandshakeTimeout bounds a new gRPC connection's handshake (TCP
	// accept to the HTTP/2 preface and settings): a silent TCP connection
	// is closed then. Default: session.handshake_timeout (10s).
	GRPCHandshakeTimeout time.Duration `yaml:"grpc_handshake_timeout"`
	// GRPCMaxConnectionIdle closes (GOAWAY, then TCP) a gRPC connection
	// that has had no stream for this long, counted from its handshake
	// for one that never opens a stream. Default 60s.
	GRPCMaxConnectionIdle time.Duration `yaml:"grpc_max_connection_idle"`
	// GRPCKeepaliveTime is how long a gRPC connection may be silent before
	// the hub pings it; GRPCKeepaliveTimeout how long the hub waits for the
	// ping's answer before it closes the connection (a peer that vanished
	// without a FIN). Defaults 30s and 10s.
	GRPCKeepaliveTime    time.Duration `yaml:"grpc_keepalive_time"`
	GRPCKeepaliveTimeout time.Duration `yaml:"grpc_keepalive_timeout"`
	// GRPCMinPingInterval is the enforcement policy: a client that pings
	// more often than this (or at all without a stream) gets GOAWAY
	// "too_many_pings" and its connection closed. Default 10s.
	GRPCMinPingInterval time.Duration `yaml:"grpc_min_ping_interval"`
	// CloseTimeout is how long the hub waits, once the peer has received
	// its WebSocket close frame, for the peer's own close frame before it
	// closes TCP (the closing handshake of RFC 6455 section 7: closing at
	// once resets a peer that is still sending, and the reset can destroy
	// the close frame it has not read yet). Default 1s. While the peer has
	// not yet received everything, the hub waits as long as the peer reads,
	// up to session.write_timeout without progress.
	CloseTimeout time.Duration `yaml:"close_timeout"`
}

// withDefaults fills the zero fields; handshake is the session's handshake
// timeout.
func (c ConnectionConfig) withDefaults(handshake time.Duration) ConnectionConfig {
	c.HTTPReadHeaderTimeout = cmp.Or(c.HTTPReadHeaderTimeout, handshake)
	c.HTTPReadTimeout = cmp.Or(c.HTTPReadTimeout, wsserve.DefaultHTTPReadTimeout)
	c.HTTPWriteTimeout = cmp.Or(c.HTTPWriteTimeout, wsserve.DefaultHTTPWriteTimeout)
	c.HTTPIdleTimeout = cmp.Or(c.HTTPIdleTimeout, wsserve.DefaultHTTPIdleTimeout)
	c.GRPCHandshakeTimeout = cmp.Or(c.GRPCHandshakeTimeout, handshake)
	c.GRPCMaxConnectionIdle = cmp.Or(c.GRPCMaxConnectionIdle, 60*time.Second)
	c.GRPCKeepaliveTime = cmp.Or(c.GRPCKeepaliveTime, 30*time.Second)
	c.GRPCKeepaliveTimeout = cmp.Or(c.GRPCKeepaliveTimeout, 10*time.Second)
	c.GRPCMinPingInterval = cmp.Or(c.GRPCMinPingInterval, 10*time.Second)
	c.CloseTimeout = cmp.Or(c.CloseTimeout, wsserve.DefaultCloseTimeout)
	return c
}

// Validate checks that no bound is negative; the errors name the key.
func (c ConnectionConfig) Validate() error {
	for _, d := range []struct {
		key string
		v   time.Duration
	}{
		{"http_read_header_timeout", c.HTTPReadHeaderTimeout}, {"http_read_timeout", c.HTTPReadTimeout},
		{"http_write_timeout", c.HTTPWriteTimeout}, {"http_idle_timeout", c.HTTPIdleTimeout},
		{"grpc_handshake_timeout", c.GRPCHandshakeTimeout}, {"grpc_max_connection_idle", c.GRPCMaxConnectionIdle},
		{"grpc_keepalive_time", c.GRPCKeepaliveTime}, {"grpc_keepalive_timeout", c.GRPCKeepaliveTimeout},
		{"grpc_min_ping_interval", c.GRPCMinPingInterval}, {"close_timeout", c.CloseTimeout},
	} {
		if d.v < 0 {
			return config.Errorf("connections."+d.key, "hub: must not be negative, got %v", d.v)
		}
	}
	return nil
}
