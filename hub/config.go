package hub

import (
	"cmp"
	"fmt"
	"net"
	"os"
	"strings"
	"time"

	"github.com/corralhq/corral/hub/auth"
	"github.com/corralhq/corral/hub/history"
	"github.com/corralhq/corral/internal/admin"
	"github.com/corralhq/corral/internal/config"
	"github.com/corralhq/corral/internal/natsutil"
	"github.com/corralhq/corral/limit"
	"github.com/corralhq/corral/wire"
)

// Config is the whole configuration of a hub (the YAML file of
// `corral hub`). Start from DefaultConfig; the zero value of a field means
// its default.
type Config struct {
	// Listen is the HTTP address: WebSocket sessions on /v1/ws and the
	// publish API on POST /v1/publish. Port 0 picks a free port.
	Listen string `yaml:"listen"`
	// GRPCListen is the gRPC address (sessions through Corral.Connect,
	// backends through Corral.Publish). Empty serves no gRPC.
	GRPCListen string `yaml:"grpc_listen"`
	// NodeID names this hub in Welcome frames, logs and NATS connection
	// names. Default: host name and process id.
	NodeID string `yaml:"node_id"`
	// Admin is the admin listener (metrics, healthz, readyz, pprof) that
	// `corral hub` runs beside the hub; a hub embedded in another program
	// opens no admin listener of its own.
	Admin AdminConfig `yaml:"admin"`
	// NATS is how the hub reaches NATS: embedded by default. It is not
	// used when Options.NATS hands the hub a connection.
	NATS NATSConfig `yaml:"nats"`
	// History bounds the replay window.
	History history.Config `yaml:"history"`
	// Auth lists the token keys and API keys.
	Auth auth.Config `yaml:"auth"`
	// Wire bounds frames (size, channel length, token length).
	Wire wire.Config `yaml:"wire"`
	// Session bounds what one session may do.
	Session SessionConfig `yaml:"session"`
	// Ingest routes client publishes on some channels to a JetStream
	// stream for backends instead of to subscribers.
	Ingest IngestConfig `yaml:"ingest"`
	// Drain paces the GoAway frames of a graceful shutdown.
	Drain DrainConfig `yaml:"drain"`
	// Overload turns on admission and staged shedding (package limit).
	Overload OverloadConfig `yaml:"overload"`
	// Load publishes the hub's load over its NATS connection for
	// authdns's load feedback (load.go). Off by default.
	Load LoadConfig `yaml:"load"`
	// Connections bounds idle, half-open and closing connections on every
	// listener (connconfig.go).
	Connections ConnectionConfig `yaml:"connections"`
	// Relay lets edges carry device sessions to this hub over
	// Corral.Relay (relay.go). The zero value refuses every Relay stream.
	Relay RelayConfig `yaml:"relay"`
	// TLS, when its cert_file and key_file are set, serves both listeners
	// over TLS (wss and grpcs, tls.go). The zero value serves plaintext.
	TLS TLSConfig `yaml:"tls"`
}

// RelayConfig lists the keys an edge may open Corral.Relay streams with.
// The zero value lists none: the hub refuses Relay (PermissionDenied).
type RelayConfig struct {
	// Keys authenticate edges: a Relay stream carries one of them in its
	// "authorization" metadata ("Bearer <key>").
	Keys []RelayKeyConfig `yaml:"keys"`
}

// RelayKeyConfig is one relay key.
type RelayKeyConfig struct {
	// Name labels the key in logs.
	Name string `yaml:"name"`
	// Key is the secret, at least 16 bytes. Prefer KeyEnv.
	Key string `yaml:"key"`
	// KeyEnv names an environment variable holding the key.
	KeyEnv string `yaml:"key_env"`
}

// secret returns the key of k, read from the environment for KeyEnv.
func (k RelayKeyConfig) secret() (string, error) {
	s := k.Key
	if k.KeyEnv != "" {
		if s != "" {
			return "", config.Errorf("key_env", "hub: set key or key_env, not both")
		}
		s = os.Getenv(k.KeyEnv)
		if s == "" {
			return "", config.Errorf("key_env", "hub: environment variable %s is empty", k.KeyEnv)
		}
	}
	if len(s) < 16 {
		return "", config.Errorf("key", "hub: relay key must be at least 16 bytes")
	}
	return s, nil
}

// Validate checks every key (it reads the environment variables named).
func (c RelayConfig) Validate() error {
	for i, k := range c.Keys {
		if _, err := k.secret(); err != nil {
			return config.Field(fmt.Sprintf("keys[%d]", i), err)
		}
	}
	return nil
}

// AdminConfig is the admin listener's part of the configuration.
type AdminConfig struct {
	// Addr is the host:port to listen on. Empty turns the listener off;
	// port 0 picks a free port.
	Addr string `yaml:"addr"`
}

// NATSConfig says how the hub reaches NATS. The zero value runs an
// embedded nats-server with JetStream in memory and opens no port.
type NATSConfig struct {
	// URL of an external NATS server or cluster (comma-separated URLs are
	// tried in turn), for example "nats://10.0.0.5:4222". Empty runs an
	// embedded server in process.
	URL string `yaml:"url"`
	// Listen is the client address of the embedded server, for other
	// processes to join (for example "127.0.0.1:4222"). Empty opens no port.
	Listen string `yaml:"listen"`
	// StoreDir is where the embedded server keeps JetStream files. Empty
	// keeps JetStream in memory only: history does not survive a restart.
	StoreDir string `yaml:"store_dir"`
	// ServerName names the embedded server; empty lets nats-server pick one.
	ServerName string `yaml:"server_name"`
	// ConnectTimeout bounds starting the embedded server and connecting.
	// Default 10s.
	ConnectTimeout time.Duration `yaml:"connect_timeout"`
	// Cluster joins the embedded server to other nats-servers by routes.
	Cluster NATSClusterConfig `yaml:"cluster"`
}

// NATSClusterConfig joins the embedded server to a NATS cluster. The zero
// value runs a lone server.
type NATSClusterConfig struct {
	// Name of the cluster; every member uses the same name.
	Name string `yaml:"name"`
	// Listen is the route address of this server ("127.0.0.1:6222").
	Listen string `yaml:"listen"`
	// Routes are the route URLs of the members ("nats://127.0.0.1:6223").
	Routes []string `yaml:"routes"`
}

// natsutil returns c in natsutil's terms.
func (c NATSConfig) natsutil() natsutil.Config {
	return natsutil.Config{
		URL: c.URL, Listen: c.Listen, StoreDir: c.StoreDir, ServerName: c.ServerName, ConnectTimeout: c.ConnectTimeout,
		Cluster: natsutil.ClusterConfig{Name: c.Cluster.Name, Listen: c.Cluster.Listen, Routes: c.Cluster.Routes},
	}
}

// OverloadConfig configures the hub's overload control. The zero value
// turns it off.
type OverloadConfig struct {
	// Enabled turns on the staged Shedder for sessions (admission of new
	// sessions by priority, paced severing of open ones) and the adaptive
	// Limiter for in-flight publishes.
	Enabled bool `yaml:"enabled"`
	// Shedder configures the stages; its resource signal is the Go heap
	// and the open file descriptors.
	Shedder limit.ShedderConfig `yaml:"shedder"`
	// LatencyStages feeds the handshake latencies (connection to Welcome)
	// to the Shedder too, so that latency above shedder.target raises the
	// stage. Off by default: in a reconnect storm that latency is the
	// herd's own queue, and a session refused at its Hello has already
	// cost the connection, the upgrade and the token check that refusing
	// it would save, so each refusal turns one set-up into several
	// (measured: 30,000 sessions dropped on 3 hubs were 99 % back in
	// 53.7 s with it, the stages up to the lifeboat and refusing P0, and
	// in 5.3 s without; docs/benchmarks.md, "kraken: 100,000 sessions").
	// Without it the stages move on resources only, and a herd is served
	// as it queues.
	LatencyStages bool `yaml:"latency_stages"`
	// Publish configures the Limiter of in-flight publishes (default
	// algorithm: gradient). A publish that finds no slot gets 1013 with a
	// retry hint.
	Publish limit.LimiterConfig `yaml:"publish"`
}

// SessionConfig bounds one session. Zero fields take the defaults.
type SessionConfig struct {
	// HandshakeTimeout is how long a new connection may take to send Hello.
	// Default 10s.
	HandshakeTimeout time.Duration `yaml:"handshake_timeout"`
	// PingInterval is how often the hub pings; a session silent for two
	// intervals is closed. Default 25s.
	PingInterval time.Duration `yaml:"ping_interval"`
	// MaxSubscriptions is the most channels per session. Default 128.
	MaxSubscriptions int `yaml:"max_subscriptions"`
	// OutboundBytes bounds the queue of frames waiting to be written to a
	// session. When full, queued P2 then P1 messages are dropped (the client
	// gets a Gap); a P0 message that cannot be queued closes the session
	// with 4000. Default 256 KiB; at most 1 GiB.
	OutboundBytes int `yaml:"outbound_bytes"`
	// PublishRate is the most Publish frames per second per session, with
	// PublishBurst. Default 50 and 100.
	PublishRate  float64 `yaml:"publish_rate"`
	PublishBurst int     `yaml:"publish_burst"`
	// FrameRate is the most frames of any kind per second per session, with
	// FrameBurst; beyond it the session is closed with 4002. Default 200
	// and 400.
	FrameRate  float64 `yaml:"frame_rate"`
	FrameBurst int     `yaml:"frame_burst"`
	// WriteTimeout bounds one write to a session. Default 10s.
	WriteTimeout time.Duration `yaml:"write_timeout"`
}

// IngestConfig routes client publishes on ingest channels into a JetStream
// stream that backends consume.
type IngestConfig struct {
	// Prefixes are channel prefixes (for example "telemetry.") whose
	// publishes are ingest, not fan-out. Empty: no ingest channels.
	Prefixes []string `yaml:"prefixes"`
	// Stream is the JetStream stream name. Default "CORRAL_INGEST"; its
	// subjects are "corral.ingest.<tenant>.<channel>".
	Stream string `yaml:"stream"`
	// MaxAge is how long ingested messages are kept. Default 24h.
	MaxAge time.Duration `yaml:"max_age"`
}

// DrainConfig paces a graceful shutdown.
type DrainConfig struct {
	// Rate is how many sessions per second get GoAway, at least. When the
	// sessions cannot all get theirs at this rate within Deadline, the pace
	// is raised (and logged) so that the last one goes out at 90 % of the
	// deadline. Default 1000.
	Rate int `yaml:"rate"`
	// RetryAfter is the base retry hint of the GoAway frames; each session
	// gets it plus up to 100% jitter. Default 1s.
	RetryAfter time.Duration `yaml:"retry_after"`
	// Deadline bounds the drain: every session has been sent its GoAway
	// and close frame by then (never cut without them). Default 30s.
	Deadline time.Duration `yaml:"deadline"`
}

// DefaultConfig returns a configuration that runs on loopback with an
// embedded NATS server and no keys.
func DefaultConfig() Config {
	return Config{Listen: "127.0.0.1:8080", GRPCListen: "127.0.0.1:8081", Admin: AdminConfig{Addr: "127.0.0.1:9080"}}
}

func (c SessionConfig) withDefaults() SessionConfig {
	c.HandshakeTimeout = cmp.Or(c.HandshakeTimeout, 10*time.Second)
	c.PingInterval = cmp.Or(c.PingInterval, 25*time.Second)
	c.WriteTimeout = cmp.Or(c.WriteTimeout, 10*time.Second)
	c.MaxSubscriptions = cmp.Or(c.MaxSubscriptions, 128)
	c.OutboundBytes = cmp.Or(c.OutboundBytes, 256<<10)
	c.PublishRate = cmp.Or(c.PublishRate, 50)
	c.PublishBurst = cmp.Or(c.PublishBurst, 100)
	c.FrameRate = cmp.Or(c.FrameRate, 200)
	c.FrameBurst = cmp.Or(c.FrameBurst, 400)
	return c
}

func (c IngestConfig) withDefaults() IngestConfig {
	c.Stream = cmp.Or(c.Stream, "CORRAL_INGEST")
	c.MaxAge = cmp.Or(c.MaxAge, 24*time.Hour)
	return c
}

// DefaultDrainDeadline is the drain deadline when drain.deadline is 0.
const DefaultDrainDeadline = 30 * time.Second

func (c DrainConfig) withDefaults() DrainConfig {
	c.Rate = cmp.Or(c.Rate, 1000)
	c.RetryAfter = cmp.Or(c.RetryAfter, time.Second)
	c.Deadline = cmp.Or(c.Deadline, DefaultDrainDeadline)
	return c
}

// Validate checks the configuration; the errors name the key.
func (c *Config) Validate() error {
	if c.Listen == "" {
		return config.Errorf("listen", "hub: must not be empty")
	}
	if _, _, err := net.SplitHostPort(c.Listen); err != nil {
		return config.Errorf("listen", "hub: %v", err)
	}
	if c.GRPCListen != "" {
		if _, _, err := net.SplitHostPort(c.GRPCListen); err != nil {
			return config.Errorf("grpc_listen", "hub: %v", err)
		}
	}
	if err := (admin.Config{Addr: c.Admin.Addr}).Validate(); err != nil {
		return config.Field("admin.addr", err)
	}
	if err := c.NATS.natsutil().Validate(); err != nil {
		return config.Field("nats", err)
	}
	if err := c.History.Validate(); err != nil {
		return config.Field("history", err)
	}
	if err := c.Auth.Validate(); err != nil {
		return config.Field("auth", err)
	}
	if err := c.Wire.Validate(); err != nil {
		return config.Field("wire", err)
	}
	if err := c.Connections.Validate(); err != nil {
		return err
	}
	if err := c.Relay.Validate(); err != nil {
		return config.Field("relay", err)
	}
	if err := c.TLS.tlsconf().Validate(); err != nil {
		return config.Field("tls", err)
	}
	s := c.Session
	for _, d := range []struct {
		key string
		v   time.Duration
	}{{"handshake_timeout", s.HandshakeTimeout}, {"ping_interval", s.PingInterval}, {"write_timeout", s.WriteTimeout}} {
		if d.v < 0 {
			return config.Errorf("session."+d.key, "hub: must not be negative, got %v", d.v)
		}
	}
	for _, n := range []struct {
		key string
		v   float64
	}{{"max_subscriptions", float64(s.MaxSubscriptions)}, {"outbound_bytes", float64(s.OutboundBytes)},
		{"publish_rate", s.PublishRate}, {"publish_burst", float64(s.PublishBurst)},
		{"frame_rate", s.FrameRate}, {"frame_burst", float64(s.FrameBurst)}} {
		if n.v < 0 {
			return config.Errorf("session."+n.key, "hub: must not be negative, got %v", n.v)
		}
	}
	if s.OutboundBytes != 0 && (s.OutboundBytes < 4096 || s.OutboundBytes > 1<<30) {
		return config.Errorf("session.outbound_bytes", "hub: must be 4096 to 1 GiB, got %d", s.OutboundBytes)
	}
	for i, p := range c.Ingest.Prefixes {
		if p == "" || strings.ContainsAny(p, " *>") {
			return config.Errorf(fmt.Sprintf("ingest.prefixes[%d]", i), "hub: %q is not a channel prefix", p)
		}
	}
	if c.Ingest.MaxAge < 0 {
		return config.Errorf("ingest.max_age", "hub: must not be negative, got %v", c.Ingest.MaxAge)
	}
	if c.Drain.Rate < 0 || c.Drain.RetryAfter < 0 || c.Drain.Deadline < 0 {
		return config.Errorf("drain", "hub: rate, retry_after and deadline must not be negative")
	}
	if err := c.Load.validate(); err != nil {
		return err
	}
	if c.Overload.Enabled {
		if err := c.Overload.Shedder.Validate(); err != nil {
			return config.Errorf("overload.shedder", "hub: %v", err)
		}
		if err := c.Overload.Publish.Validate(); err != nil {
			return config.Errorf("overload.publish", "hub: %v", err)
		}
	}
	return nil
}
