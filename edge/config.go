package edge

import (
	"cmp"
	"net"
	"os"
	"time"

	"github.com/corralhq/corral/internal/admin"
	"github.com/corralhq/corral/internal/config"
	"github.com/corralhq/corral/internal/tlsconf"
	"github.com/corralhq/corral/limit"
	"github.com/corralhq/corral/wire"
)

// Config is the whole configuration of an edge (the YAML file of
// `corral edge`). Start from DefaultConfig; the zero value of a field means
// its default.
type Config struct {
	// Listen is the device WebSocket address (GET /v1/ws, the subprotocols
	// of wire), wss with tls. Port 0 picks a free port. Empty serves no
	// WebSocket.
	Listen string `yaml:"listen"`
	// GRPCListen is the device gRPC address (Corral.Connect). Empty serves
	// no gRPC.
	GRPCListen string `yaml:"grpc_listen"`
	// NodeID names this edge in logs and in Welcome's node_id, which reads
	// "<edge node id>/<hub node id>". Default: host name and process id.
	NodeID string `yaml:"node_id"`
	// TLS terminates TLS on both device listeners (wss and grpcs) when
	// cert_file and key_file are set; the zero value serves plaintext (for
	// loopback tests).
	TLS TLSConfig `yaml:"tls"`
	// Admin is the admin listener (metrics, healthz, readyz, pprof) that
	// `corral edge` runs beside the edge; an edge embedded in another
	// program opens no admin listener of its own.
	Admin AdminConfig `yaml:"admin"`
	// Origins says where the hubs are and how a session picks one
	// (origins.go, outlier.go).
	Origins OriginsConfig `yaml:"origins"`
	// Relay is how the edge reaches the hubs: the relay key and the number
	// of Relay streams per hub address.
	Relay RelayConfig `yaml:"relay"`
	// Wire bounds frames (size, channel length, token length), as on the
	// hub; the edge applies it before anything goes upstream.
	Wire wire.Config `yaml:"wire"`
	// Session bounds what one device session may do, as on the hub.
	Session SessionConfig `yaml:"session"`
	// Admission turns on the adaptive limits and the staged Shedder.
	Admission AdmissionConfig `yaml:"admission"`
	// Replay is the cache of recent messages that answers resumes
	// (replay.go).
	Replay ReplayConfig `yaml:"replay"`
	// MaxSessionAge ends a session this long after it began (+-10 %
	// jitter), with a GoAway and a jittered retry hint, so that sessions
	// spread again over edges and origins that came up since. 0: no limit.
	MaxSessionAge time.Duration `yaml:"max_session_age"`
	// MaxSessions is the most device sessions the edge holds at once: a
	// connection beyond it is refused before its Hello and any upstream
	// work (a WebSocket upgrade 503 with Retry-After, a gRPC stream
	// Unavailable with grpc-retry-pushback-ms, drawn from
	// drain.retry_after plus up to 100 %), so that the edge's memory has
	// a bound that a pod's memory limit can be sized for, as HAProxy's
	// maxconn gives it (deploy/README.md, "Memory"). Upgrades in flight
	// when the cap is reached may pass it by as many. 0: no cap.
	MaxSessions int `yaml:"max_sessions"`
	// Drain paces the GoAway frames of a graceful shutdown.
	Drain DrainConfig `yaml:"drain"`
	// Load publishes the edge's load on NATS for authdns's load feedback
	// (load.go), and reads the other edges' with load.share_places; off
	// without load.nats or Options.NATS.
	Load LoadConfig `yaml:"load"`
}

// AdminConfig is the admin listener's part of the configuration.
type AdminConfig struct {
	// Addr is the host:port to listen on. Empty turns the listener off;
	// port 0 picks a free port.
	Addr string `yaml:"addr"`
}

// TLSConfig is TLS termination on the device listeners: the certificate
// and key files, reloaded when they change (new handshakes get the new
// pair, open connections keep theirs), TLS 1.3 by default, session tickets
// sealed with keys rotated every TicketKeyRotation. The zero value serves
// plaintext.
type TLSConfig struct {
	// CertFile is the PEM certificate chain, leaf first.
	CertFile string `yaml:"cert_file"`
	// KeyFile is the PEM private key of the leaf.
	KeyFile string `yaml:"key_file"`
	// ClientCAFile, when set, requires a client certificate of one of
	// these PEM CAs (mutual TLS).
	ClientCAFile string `yaml:"client_ca_file"`
	// MinVersion is "1.3" (default) or "1.2".
	MinVersion string `yaml:"min_version"`
	// ReloadInterval is how often the files are checked. Default 5s.
	ReloadInterval time.Duration `yaml:"reload_interval"`
	// TicketKeyRotation is how often a new ticket key is made. Default 12h.
	TicketKeyRotation time.Duration `yaml:"ticket_key_rotation"`
	// TicketKeys is how many keys open tickets. Default 4.
	TicketKeys int `yaml:"ticket_keys"`
}

// tlsconf returns c in internal/tlsconf's terms.
func (c TLSConfig) tlsconf() tlsconf.Config {
	return tlsconf.Config{CertFile: c.CertFile, KeyFile: c.KeyFile, ClientCAFile: c.ClientCAFile, MinVersion: c.MinVersion,
		ReloadInterval: c.ReloadInterval, TicketKeyRotation: c.TicketKeyRotation, TicketKeys: c.TicketKeys}
}

// RelayConfig is how the edge authenticates to the hubs and how many
// Relay streams it opens to each.
type RelayConfig struct {
	// Key is the relay key, one of the hub's relay.keys, sent as
	// "authorization: Bearer <key>" on each Relay stream. Prefer KeyEnv.
	Key string `yaml:"key"`
	// KeyEnv names an environment variable holding the key.
	KeyEnv string `yaml:"key_env"`
	// Streams is how many Relay streams the edge opens to each hub
	// address, on one HTTP/2 connection. Default 2.
	Streams int `yaml:"streams"`
	// SendQueueBytes bounds the frames waiting to go up one Relay stream;
	// a device whose frame does not fit waits (its reader stops). Default
	// 4 MiB.
	SendQueueBytes int `yaml:"send_queue_bytes"`
}

// SessionConfig bounds one device session. Zero fields take the defaults,
// the hub's.
type SessionConfig struct {
	// HandshakeTimeout is how long a new connection may take to send
	// Hello. Default 10s.
	HandshakeTimeout time.Duration `yaml:"handshake_timeout"`
	// PingInterval is how often the edge pings a device (the hub does not
	// ping relayed sessions); a device silent for two intervals is closed.
	// Default 25s.
	PingInterval time.Duration `yaml:"ping_interval"`
	// MaxSubscriptions is the most channels per session. Default 128.
	MaxSubscriptions int `yaml:"max_subscriptions"`
	// OutboundBytes bounds the frames waiting to be written to a device; a
	// device whose queue overflows is closed with 4000 (slow consumer).
	// Default 256 KiB; 4096 to 1 GiB.
	OutboundBytes int `yaml:"outbound_bytes"`
	// PublishRate is the most Publish frames per second per session, with
	// PublishBurst; beyond it a Publish gets an Error 4002. Default 50 and
	// 100.
	PublishRate  float64 `yaml:"publish_rate"`
	PublishBurst int     `yaml:"publish_burst"`
	// FrameRate is the most frames of any kind per second per session,
	// with FrameBurst; beyond it the session is closed with 4002. Default
	// 200 and 400.
	FrameRate  float64 `yaml:"frame_rate"`
	FrameBurst int     `yaml:"frame_burst"`
	// WriteTimeout bounds one write to a device. Default 10s.
	WriteTimeout time.Duration `yaml:"write_timeout"`
}

// AdmissionConfig configures the edge's overload control. The zero value
// turns it off.
type AdmissionConfig struct {
	// Enabled turns on the handshake Limiter, the message Limiter and the
	// staged Shedder.
	Enabled bool `yaml:"enabled"`
	// Handshake limits the handshakes in flight (device Hello to the
	// origin's Welcome); its samples are their latencies, its algorithm
	// AIMD (see SlowHandshake). A Hello that finds no slot waits for one
	// in its waiting room (queue.max_wait, default 2 s here or half the
	// handshake timeout if shorter; negative: no waiting), highest
	// priority first; a Hello whose wait expires, or that finds the room
	// full (queue.max, default 10,000), is closed with 1013 and a hint
	// sized by the backlog ahead of it.
	Handshake limit.LimiterConfig `yaml:"handshake"`
	// Messages limits the device publishes in flight to the origins (sent
	// up, not yet answered). A Publish that finds no slot gets an Error
	// 1013 with a retry hint.
	Messages limit.LimiterConfig `yaml:"messages"`
	// Shedder configures the stages; its resource signal is the Go heap
	// and the open descriptors.
	Shedder limit.ShedderConfig `yaml:"shedder"`
	// LatencyStages feeds the handshake latencies to the Shedder too, so
	// that latency above shedder.target raises the stage (up to
	// shedder.latency_ceiling, sever-p1 here). Off by default: the
	// handshake latency of an edge is its origins' (and the network's),
	// a latency shedder in series with an origin's refuses what the origin
	// takes (measured: docs/benchmarks.md, the edge storm), an absolute
	// target sheds P2 for good behind a distant origin, and in a storm a
	// refusal at Hello comes after the connection it would save (the
	// hub's overload.latency_stages is off by default for that reason). The handshake Limiter, whose gradient is relative to
	// the path's own ideal latency, breathes with the origins instead.
	LatencyStages bool `yaml:"latency_stages"`
	// SlowHandshake is the handshake latency (p99 of a window) above
	// which the handshake limit counts the window as congested and cuts
	// itself (AIMD: x 0.9 per congested window or window with refusals
	// by the origin, + 1 per saturated calm one after a slow start).
	// Default 500ms.
	SlowHandshake time.Duration `yaml:"slow_handshake"`
}

// DrainConfig paces a graceful shutdown and the ends of sessions at
// max_session_age.
type DrainConfig struct {
	// Rate is how many sessions per second get GoAway, at least; raised
	// when the sessions cannot all get theirs within Deadline. Default
	// 1000.
	Rate int `yaml:"rate"`
	// RetryAfter is the base retry hint of the GoAway frames; each session
	// gets it plus up to 100 % jitter. Default 1s.
	RetryAfter time.Duration `yaml:"retry_after"`
	// Deadline bounds the drain. Default 30s.
	Deadline time.Duration `yaml:"deadline"`
}

// DefaultConfig returns a configuration that runs on loopback in front of
// the hub of examples/hub.yaml.
func DefaultConfig() Config {
	return Config{Listen: "127.0.0.1:7500", GRPCListen: "127.0.0.1:7501", Admin: AdminConfig{Addr: "127.0.0.1:7509"}}
}

// DefaultDrainDeadline is the drain deadline when drain.deadline is 0.
const DefaultDrainDeadline = 30 * time.Second

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

func (c RelayConfig) withDefaults() RelayConfig {
	c.Streams = cmp.Or(c.Streams, 2)
	c.SendQueueBytes = cmp.Or(c.SendQueueBytes, 4<<20)
	return c
}

func (c DrainConfig) withDefaults() DrainConfig {
	c.Rate = cmp.Or(c.Rate, 1000)
	c.RetryAfter = cmp.Or(c.RetryAfter, time.Second)
	c.Deadline = cmp.Or(c.Deadline, DefaultDrainDeadline)
	return c
}

// relayKey returns the relay key: Key, or the variable KeyEnv names.
func (c RelayConfig) relayKey() string {
	if c.KeyEnv != "" {
		return os.Getenv(c.KeyEnv)
	}
	return c.Key
}

// Validate checks the configuration; the errors name the key.
func (c *Config) Validate() error {
	if err := c.Load.validate(); err != nil {
		return err
	}
	if c.Load.SharePlaces && !c.Admission.Enabled {
		return config.Errorf("load.share_places", "edge: load.share_places spaces the handshake limiter's refused: it needs admission.enabled")
	}
	if c.Listen == "" && c.GRPCListen == "" {
		return config.Errorf("listen", "edge: listen and grpc_listen are both empty: no device can connect")
	}
	if c.Listen != "" {
		if _, _, err := net.SplitHostPort(c.Listen); err != nil {
			return config.Errorf("listen", "edge: %v", err)
		}
	}
	if c.GRPCListen != "" {
		if _, _, err := net.SplitHostPort(c.GRPCListen); err != nil {
			return config.Errorf("grpc_listen", "edge: %v", err)
		}
	}
	if err := c.TLS.tlsconf().Validate(); err != nil {
		return config.Field("tls", err)
	}
	if err := (admin.Config{Addr: c.Admin.Addr}).Validate(); err != nil {
		return config.Field("admin.addr", err)
	}
	if err := c.Origins.Validate(); err != nil {
		return config.Field("origins", err)
	}
	if err := c.Relay.validate(); err != nil {
		return err
	}
	if err := c.Wire.Validate(); err != nil {
		return config.Field("wire", err)
	}
	if err := c.Session.validate(); err != nil {
		return err
	}
	if c.Admission.Enabled {
		if c.Admission.SlowHandshake < 0 {
			return config.Errorf("admission.slow_handshake", "edge: must not be negative, got %v", c.Admission.SlowHandshake)
		}
		if err := c.Admission.Shedder.Validate(); err != nil {
			return config.Errorf("admission.shedder", "edge: %v", err)
		}
		if err := c.Admission.Handshake.Validate(); err != nil {
			return config.Errorf("admission.handshake", "edge: %v", err)
		}
		if err := c.Admission.Messages.Validate(); err != nil {
			return config.Errorf("admission.messages", "edge: %v", err)
		}
	}
	if err := c.Replay.Validate(); err != nil {
		return config.Field("replay", err)
	}
	if c.MaxSessionAge < 0 {
		return config.Errorf("max_session_age", "edge: must not be negative, got %v", c.MaxSessionAge)
	}
	if c.MaxSessionAge > 0 && c.MaxSessionAge < time.Second {
		return config.Errorf("max_session_age", "edge: at least 1s (or 0 for no limit), got %v", c.MaxSessionAge)
	}
	if c.MaxSessions < 0 {
		return config.Errorf("max_sessions", "edge: must not be negative (0 for no cap), got %d", c.MaxSessions)
	}
	for _, d := range []struct {
		key string
		bad bool
	}{{"rate", c.Drain.Rate < 0}, {"retry_after", c.Drain.RetryAfter < 0}, {"deadline", c.Drain.Deadline < 0}} {
		if d.bad {
			return config.Errorf("drain."+d.key, "edge: must not be negative")
		}
	}
	return nil
}

func (c RelayConfig) validate() error {
	if c.Key != "" && c.KeyEnv != "" {
		return config.Errorf("relay.key_env", "edge: set key or key_env, not both")
	}
	if c.KeyEnv != "" && os.Getenv(c.KeyEnv) == "" {
		return config.Errorf("relay.key_env", "edge: the variable %s is empty or unset", c.KeyEnv)
	}
	if c.relayKey() == "" {
		return config.Errorf("relay.key", "edge: a relay key (one of the hub's relay.keys) is required")
	}
	if len(c.relayKey()) < 16 {
		return config.Errorf("relay.key", "edge: a relay key has at least 16 bytes, as the hub requires")
	}
	if c.Streams < 0 || c.Streams > 64 {
		return config.Errorf("relay.streams", "edge: must be 0 (default 2) to 64, got %d", c.Streams)
	}
	if c.SendQueueBytes != 0 && (c.SendQueueBytes < 64<<10 || c.SendQueueBytes > 1<<30) {
		return config.Errorf("relay.send_queue_bytes", "edge: must be 64 KiB to 1 GiB, got %d", c.SendQueueBytes)
	}
	return nil
}

func (s SessionConfig) validate() error {
	for _, d := range []struct {
		key string
		v   time.Duration
	}{{"handshake_timeout", s.HandshakeTimeout}, {"ping_interval", s.PingInterval}, {"write_timeout", s.WriteTimeout}} {
		if d.v < 0 {
			return config.Errorf("session."+d.key, "edge: must not be negative, got %v", d.v)
		}
	}
	for _, n := range []struct {
		key string
		v   float64
	}{{"max_subscriptions", float64(s.MaxSubscriptions)}, {"outbound_bytes", float64(s.OutboundBytes)},
		{"publish_rate", s.PublishRate}, {"publish_burst", float64(s.PublishBurst)},
		{"frame_rate", s.FrameRate}, {"frame_burst", float64(s.FrameBurst)}} {
		if n.v < 0 {
			return config.Errorf("session."+n.key, "edge: must not be negative, got %v", n.v)
		}
	}
	if s.OutboundBytes != 0 && (s.OutboundBytes < 4096 || s.OutboundBytes > 1<<30) {
		return config.Errorf("session.outbound_bytes", "edge: must be 4096 to 1 GiB, got %d", s.OutboundBytes)
	}
	return nil
}
