package edge

import (
	"cmp"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"time"

	"github.com/corralhq/corral/backoff"
	"github.com/corralhq/corral/internal/config"
	"github.com/corralhq/corral/internal/tlsconf"
	"github.com/corralhq/corral/shard"
)

// Pick modes of OriginsConfig.Pick.
const (
	// PickP2C sends a new session to the less loaded of two origins drawn
	// at random (power of two choices over sessions plus handshakes in
	// flight; ties at random).
	PickP2C = "p2c"
	// PickFirstAddress sends every new session to the first usable address
	// of the answer, as a client that hands the name to its dialer does. It
	// exists to show the failure p2c prevents, side by side.
	PickFirstAddress = "first-address"
)

// ResolverSystem as OriginsConfig.Resolver resolves through the operating
// system (net.DefaultResolver), which reports no TTL.
const ResolverSystem = "system"

// Defaults of OriginsConfig and OutlierConfig. The outlier defaults are
// Envoy's (config.cluster.v3.OutlierDetection; edge/README.md
// cites them).
const (
	DefaultMinTTL       = time.Second
	DefaultMaxTTL       = 5 * time.Minute
	DefaultSystemTTL    = 30 * time.Second
	DefaultQueryTimeout = 2 * time.Second

	DefaultConsecutiveFailures = 5
	DefaultOutlierInterval     = 10 * time.Second
	DefaultBaseEjectionTime    = 30 * time.Second
	DefaultMaxEjectionTime     = 300 * time.Second
	DefaultMaxEjectionPercent  = 10

	// MaxOriginHand bounds OriginShardConfig.HandSize, so that a shard pick
	// runs on a fixed buffer on the stack.
	MaxOriginHand = 16
)

// MinOriginTTL is the lowest min_ttl and max_ttl accepted. It is low so
// that loopback tests can re-resolve fast; real deployments keep seconds.
const MinOriginTTL = 10 * time.Millisecond

// OriginsConfig says where the origins (hubs) are and how a new session
// picks one. Origins are a DNS name and a port resolved through Resolver,
// or a fixed list (Static). The zero value is invalid (no origins); every
// zero field takes its default, which DefaultOriginsConfig shows.
type OriginsConfig struct {
	// Name is the DNS name of the origins ("hubs.corral.test"); every A and
	// AAAA address of the answer is an origin at Port.
	Name string `yaml:"name"`
	// Port is the origins' port (their gRPC listener).
	Port int `yaml:"port"`
	// Resolver is the DNS server that answers Name, host:port (for
	// example a `corral dns` at "127.0.0.1:5353"; port 53 when omitted),
	// or "system" for the operating system's resolver. Queries go over
	// UDP and are repeated over TCP when the answer is truncated.
	Resolver string `yaml:"resolver"`
	// Static is a fixed list of origin addresses (host:port, IP literals)
	// used instead of Name, Port and Resolver; it is never re-resolved.
	Static []string `yaml:"static"`

	// MinTTL and MaxTTL clamp the TTL of an answer: the name is resolved
	// again after the answer's TTL, but not sooner than MinTTL (default
	// 1 s) nor later than MaxTTL (default 5 m). The system resolver has no
	// TTL: it is asked every 30 s, clamped the same way.
	MinTTL time.Duration `yaml:"min_ttl"`
	MaxTTL time.Duration `yaml:"max_ttl"`
	// QueryTimeout bounds one DNS exchange (default 2 s).
	QueryTimeout time.Duration `yaml:"query_timeout"`
	// Retry is the backoff between failed resolutions (default: full
	// jitter from 500 ms, capped at 30 s). The last good set of origins is
	// kept meanwhile.
	Retry backoff.Config `yaml:"retry"`

	// Pick is "p2c" (default) or "first-address".
	Pick string `yaml:"pick"`
	// Shard pins each tenant to its shuffle-sharded hand of origins.
	Shard OriginShardConfig `yaml:"shard"`
	// Outlier ejects origins that fail (Envoy's consecutive 5xx).
	Outlier OutlierConfig `yaml:"outlier"`
	// HealthCheck adds an active health check of every origin address
	// (package health); off when Kind is empty.
	HealthCheck OriginHealthConfig `yaml:"health_check"`
	// TLS is the TLS of the Relay streams to the origins (the hubs' gRPC
	// listeners with their tls on). The zero value dials plaintext.
	TLS OriginTLSConfig `yaml:"tls"`
}

// OriginTLSConfig is the TLS of the edge's connections to the origins:
// the CAs that the hubs' certificates must chain to, the name they must
// hold, and optionally the edge's own certificate for hubs that require
// one (the hub's tls.client_ca_file: mutual TLS). The files are checked
// every ReloadInterval; a changed, valid set applies to the next
// handshakes (open Relay streams keep theirs), a broken one is logged and
// the old one kept. Reconnections resume their TLS sessions. The zero
// value dials plaintext; every other field needs Enabled.
type OriginTLSConfig struct {
	// Enabled dials the origins over TLS.
	Enabled bool `yaml:"enabled"`
	// CAFile is the PEM CA certificates trusted for the hubs'
	// certificates. Empty: the system's roots.
	CAFile string `yaml:"ca_file"`
	// ServerName is the name the hubs' certificates must hold. Empty: the
	// origins' name, or with a static list each address's IP.
	ServerName string `yaml:"server_name"`
	// CertFile and KeyFile are the edge's client certificate chain and
	// key (PEM), sent to hubs that ask for one. Both or neither.
	CertFile string `yaml:"cert_file"`
	KeyFile  string `yaml:"key_file"`
	// MinVersion is "1.3" (default) or "1.2".
	MinVersion string `yaml:"min_version"`
	// ReloadInterval is how often the files are checked. Default 5s.
	ReloadInterval time.Duration `yaml:"reload_interval"`
}

// tlsconf returns c in internal/tlsconf's terms.
func (c OriginTLSConfig) tlsconf() tlsconf.ClientConfig {
	return tlsconf.ClientConfig{Enabled: c.Enabled, CAFile: c.CAFile, ServerName: c.ServerName,
		CertFile: c.CertFile, KeyFile: c.KeyFile, MinVersion: c.MinVersion, ReloadInterval: c.ReloadInterval}
}

// OriginShardConfig pins every tenant to a hand of HandSize origins,
// chosen by rendezvous hashing (shard.Stable) over the origin addresses, so
// that a re-resolve that adds an address changes only the hands that take
// it. An address that leaves the answer stays in the deck, unusable, for
// Remember: a hand whose origins fail and drop out of DNS does not move
// onto other origins (a poison tenant whose sessions crash its hand would
// otherwise crash a new hand at every re-resolve, and so the whole fleet);
// its tenant fails over inside its hand only. Off when HandSize is 0.
type OriginShardConfig struct {
	// HandSize is the number of origins of a tenant's hand, 0 (off) to 16.
	// A hand larger than the set holds the whole set.
	HandSize int `yaml:"hand_size"`
	// Secret keys the hands: 32 hexadecimal digits (16 bytes). Edges that
	// must agree on hands share it.
	Secret string `yaml:"secret"`
	// Remember is how long an address stays in the deck after it left the
	// answer: long enough for a failed origin to be replaced on its address,
	// short enough that a scaled-in fleet's hands re-form. Default 10m.
	Remember time.Duration `yaml:"remember"`
}

// DefaultShardRemember is OriginShardConfig.Remember's default.
const DefaultShardRemember = 10 * time.Minute

// OutlierConfig is consecutive-failure ejection after Envoy's consecutive
// 5xx detection: ConsecutiveFailures failures in a row (a failed
// handshake, an Unavailable answer, a broken stream) eject an origin for
// BaseEjectionTime times the number of times it was ejected, at most
// MaxEjectionTime; a success resets the count; every Interval an origin
// spends back in service takes one from that number; never more than
// MaxEjectionPercent of the origins are ejected at once, but always at
// least one may be. The cap is for failure statistics only: an origin
// whose Relay transport is down is no candidate whatever it allows
// (originstransport.go).
type OutlierConfig struct {
	// Disabled turns ejection off.
	Disabled bool `yaml:"disabled"`
	// ConsecutiveFailures that eject, default 5 (Envoy's consecutive_5xx).
	ConsecutiveFailures int `yaml:"consecutive_failures"`
	// Interval of the decay, default 10 s (Envoy's interval).
	Interval time.Duration `yaml:"interval"`
	// BaseEjectionTime default 30 s (Envoy's base_ejection_time).
	BaseEjectionTime time.Duration `yaml:"base_ejection_time"`
	// MaxEjectionTime default 300 s (Envoy's max_ejection_time); at least
	// BaseEjectionTime.
	MaxEjectionTime time.Duration `yaml:"max_ejection_time"`
	// MaxEjectionPercent of the origins, 1 to 100, default 10 (Envoy's
	// max_ejection_percent).
	MaxEjectionPercent int `yaml:"max_ejection_percent"`
}

// OriginHealthConfig is the template of the active health check of every
// origin address: Kind "tcp" (a connection opens) or "grpc"
// (grpc.health.v1 answers SERVING), and the probe settings of package
// health (zero values take health's defaults). An origin whose check fails
// gets no new sessions.
type OriginHealthConfig struct {
	Kind             string        `yaml:"kind"`
	Service          string        `yaml:"service"`
	TLS              bool          `yaml:"tls"`
	Interval         time.Duration `yaml:"interval"`
	Timeout          time.Duration `yaml:"timeout"`
	FailureThreshold int           `yaml:"failure_threshold"`
	SuccessThreshold int           `yaml:"success_threshold"`
}

// DefaultOriginsConfig returns the defaults of every field that has one
// (Name, Port, Resolver or Static must still be set).
func DefaultOriginsConfig() OriginsConfig {
	return OriginsConfig{}.withDefaults()
}

func (c OriginsConfig) withDefaults() OriginsConfig {
	c.MinTTL = cmp.Or(c.MinTTL, DefaultMinTTL)
	if c.MaxTTL == 0 {
		c.MaxTTL = max(DefaultMaxTTL, c.MinTTL)
	}
	c.QueryTimeout = cmp.Or(c.QueryTimeout, DefaultQueryTimeout)
	if c.Retry == (backoff.Config{}) {
		c.Retry = backoff.Config{Policy: "full", Base: 500 * time.Millisecond, Cap: 30 * time.Second}
	}
	c.Pick = cmp.Or(c.Pick, PickP2C)
	c.Outlier = c.Outlier.withDefaults()
	c.Shard.Remember = cmp.Or(c.Shard.Remember, DefaultShardRemember)
	return c
}

func (c OutlierConfig) withDefaults() OutlierConfig {
	c.ConsecutiveFailures = cmp.Or(c.ConsecutiveFailures, DefaultConsecutiveFailures)
	c.Interval = cmp.Or(c.Interval, DefaultOutlierInterval)
	c.BaseEjectionTime = cmp.Or(c.BaseEjectionTime, DefaultBaseEjectionTime)
	if c.MaxEjectionTime == 0 {
		c.MaxEjectionTime = max(DefaultMaxEjectionTime, c.BaseEjectionTime)
	}
	c.MaxEjectionPercent = cmp.Or(c.MaxEjectionPercent, DefaultMaxEjectionPercent)
	return c
}

// Validate checks the configuration; each error starts with "edge: " and
// names its key relative to the origins section ("outlier.interval").
func (c OriginsConfig) Validate() error {
	if len(c.Static) > 0 {
		if c.Name != "" || c.Resolver != "" || c.Port != 0 {
			return config.Errorf("static", "edge: static origins exclude name, port and resolver")
		}
		seen := map[netip.AddrPort]bool{}
		for i, s := range c.Static {
			ap, err := netip.ParseAddrPort(s)
			if err != nil || ap.Port() == 0 {
				return config.Errorf(fmt.Sprintf("static[%d]", i), "edge: %q is not an IP address and port", s)
			}
			if seen[ap] {
				return config.Errorf(fmt.Sprintf("static[%d]", i), "edge: %s is listed twice", s)
			}
			seen[ap] = true
		}
	} else {
		if c.Name == "" {
			return config.Errorf("name", "edge: the origins need a name (or a static list)")
		}
		if _, ok := dnsName(c.Name); !ok {
			return config.Errorf("name", "edge: %q is not a DNS name", c.Name)
		}
		if c.Port < 1 || c.Port > 65535 {
			return config.Errorf("port", "edge: must be 1 to 65535, got %d", c.Port)
		}
		if c.Resolver == "" {
			return config.Errorf("resolver", `edge: the origins need a resolver (host:port of a DNS server, or "system")`)
		}
		if c.Resolver != ResolverSystem {
			if _, err := resolverAddr(c.Resolver); err != nil {
				return config.Errorf("resolver", "edge: %v", err)
			}
		}
	}
	for _, d := range []struct {
		key string
		v   time.Duration
	}{{"min_ttl", c.MinTTL}, {"max_ttl", c.MaxTTL}} {
		if d.v != 0 && d.v < MinOriginTTL {
			return config.Errorf(d.key, "edge: must be at least %v, got %v", MinOriginTTL, d.v)
		}
	}
	if c.QueryTimeout < 0 {
		return config.Errorf("query_timeout", "edge: must not be negative, got %v", c.QueryTimeout)
	}
	d := c.withDefaults()
	if d.MaxTTL < d.MinTTL {
		return config.Errorf("max_ttl", "edge: %v is below min_ttl %v", d.MaxTTL, d.MinTTL)
	}
	if err := d.Retry.Validate(); err != nil {
		return config.Errorf("retry", "edge: %v", err)
	}
	if d.Pick != PickP2C && d.Pick != PickFirstAddress {
		return config.Errorf("pick", "edge: %q is not a pick mode (p2c, first-address)", c.Pick)
	}
	if err := c.Shard.validate(); err != nil {
		return config.Field("shard", err)
	}
	if c.Shard.HandSize > 0 && d.Pick == PickFirstAddress {
		return config.Errorf("shard", "edge: shard hands need pick p2c, not first-address")
	}
	if err := c.Outlier.Validate(); err != nil {
		return config.Field("outlier", err)
	}
	if err := c.HealthCheck.validate(); err != nil {
		return config.Field("health_check", err)
	}
	if err := c.TLS.tlsconf().Validate(); err != nil {
		return config.Field("tls", err)
	}
	if c.TLS.Enabled && c.HealthCheck.Kind == "grpc" {
		// health's grpc probe trusts the system's roots, checks the
		// address's IP and sends no client certificate.
		return config.Errorf("health_check.kind", "edge: a grpc check does not use origins.tls (its CA, server name or client certificate): with tls, use kind tcp")
	}
	return nil
}

func (c OriginShardConfig) validate() error {
	if c.HandSize == 0 {
		if c.Secret != "" {
			return config.Errorf("hand_size", "edge: a shard secret needs a hand size")
		}
		return nil
	}
	if c.Remember < 0 {
		return config.Errorf("remember", "edge: must not be negative, got %v", c.Remember)
	}
	if c.HandSize < 0 || c.HandSize > MaxOriginHand {
		return config.Errorf("hand_size", "edge: must be 0 to %d, got %d", MaxOriginHand, c.HandSize)
	}
	if _, err := shard.ParseSecret(c.Secret); err != nil {
		return config.Errorf("secret", "edge: %v", err)
	}
	return nil
}

// Validate checks the outlier settings; zero fields take their defaults.
func (c OutlierConfig) Validate() error {
	if c.ConsecutiveFailures < 0 {
		return config.Errorf("consecutive_failures", "edge: must not be negative, got %d", c.ConsecutiveFailures)
	}
	if c.ConsecutiveFailures > maxCountedFailures {
		return config.Errorf("consecutive_failures", "edge: at most %d, got %d", maxCountedFailures, c.ConsecutiveFailures)
	}
	for _, d := range []struct {
		key string
		v   time.Duration
	}{{"interval", c.Interval}, {"base_ejection_time", c.BaseEjectionTime}, {"max_ejection_time", c.MaxEjectionTime}} {
		if d.v < 0 {
			return config.Errorf(d.key, "edge: must not be negative, got %v", d.v)
		}
	}
	if c.MaxEjectionPercent < 0 || c.MaxEjectionPercent > 100 {
		return config.Errorf("max_ejection_percent", "edge: must be 0 to 100, got %d", c.MaxEjectionPercent)
	}
	d := c.withDefaults()
	if d.MaxEjectionTime < d.BaseEjectionTime {
		return config.Errorf("max_ejection_time", "edge: %v is below base_ejection_time %v", d.MaxEjectionTime, d.BaseEjectionTime)
	}
	return nil
}

func (c OriginHealthConfig) validate() error {
	switch c.Kind {
	case "":
		if c != (OriginHealthConfig{}) {
			return config.Errorf("kind", `edge: health check settings need a kind ("tcp" or "grpc")`)
		}
		return nil
	case "tcp":
		if c.Service != "" || c.TLS {
			return config.Errorf("kind", "edge: service and tls apply to grpc checks only")
		}
	case "grpc":
	default:
		return config.Errorf("kind", `edge: %q is not a check kind ("tcp" or "grpc")`, c.Kind)
	}
	// The health package validates the rest on a sample check; its key
	// paths name the check ("checks[0].interval"), ours the template.
	_, err := originHealthChecks(c, []string{"127.0.0.1:1"})
	var fe *config.FieldError
	if errors.As(err, &fe) {
		return config.Errorf(strings.TrimPrefix(fe.Path, "checks[0]."), "edge: %v", fe.Err)
	}
	return err
}

// dnsName returns name as a fully qualified DNS name.
func dnsName(name string) (string, bool) {
	if name == "" || strings.ContainsAny(name, " \t:/") {
		return "", false
	}
	fq := name
	if !strings.HasSuffix(fq, ".") {
		fq += "."
	}
	if len(fq) > 254 {
		return "", false
	}
	for _, label := range strings.Split(strings.TrimSuffix(fq, "."), ".") {
		if label == "" || len(label) > 63 {
			return "", false
		}
	}
	return fq, true
}

// resolverAddr returns the host:port of a DNS server; the port defaults to 53.
func resolverAddr(s string) (string, error) {
	host, port, err := net.SplitHostPort(s)
	if err != nil {
		if _, perr := netip.ParseAddr(strings.Trim(s, "[]")); perr == nil {
			return net.JoinHostPort(strings.Trim(s, "[]"), "53"), nil
		}
		return "", fmt.Errorf("resolver %q is not host:port", s)
	}
	if host == "" || port == "" {
		return "", fmt.Errorf("resolver %q is not host:port", s)
	}
	return s, nil
}
