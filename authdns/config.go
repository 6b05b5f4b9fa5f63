package authdns

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"runtime"
	"strings"
	"time"

	"github.com/corralhq/corral/authdns/answer"
	"github.com/corralhq/corral/health"
	"github.com/corralhq/corral/internal/admin"
	"github.com/corralhq/corral/internal/config"
	"github.com/corralhq/corral/shard"
)

// Defaults of a Config, NSD's where NSD has one.
const (
	DefaultListen     = "127.0.0.1:5353"
	DefaultEDNSBuffer = 1232
	// DefaultTTL is the TTL of records whose zone gives none.
	DefaultTTL = 60 * time.Second
	// MaxTTL is the longest TTL a record may have (RFC 2181 section 8:
	// 2^31 - 1 seconds); SOA times have the same bound.
	MaxTTL = (1<<31 - 1) * time.Second
	// DefaultRRLRate is NSD's rrl-ratelimit: responses per second to one
	// source prefix before limiting starts.
	DefaultRRLRate = 200
	// DefaultRRLSlip is NSD's rrl-slip: every 2nd limited response is sent
	// truncated (empty, TC set) so that real clients retry over TCP; the
	// others are dropped.
	DefaultRRLSlip       = 2
	DefaultRRLIPv4Prefix = 24
	DefaultRRLIPv6Prefix = 64
	// DefaultTCPIdle is how long an idle TCP connection stays open.
	DefaultTCPIdle = 10 * time.Second
	// DefaultMaxTCPConns bounds the open TCP connections.
	DefaultMaxTCPConns = 1024
)

// Config is the configuration of a DNS server, as read from YAML. The zero
// value is not valid (it has no zones); DefaultConfig returns the defaults a
// file overrides. Validate checks it; New builds a Server from it.
type Config struct {
	// Listen is the address of the UDP sockets and the TCP listener
	// ("127.0.0.1:53"); port 0 picks a free port shared by both.
	Listen string `yaml:"listen"`
	// Admin is the admin listener (metrics, health status page, pprof)
	// that `corral dns` runs beside the server; a server embedded in
	// another program opens no admin listener of its own.
	Admin AdminConfig `yaml:"admin"`
	// Sockets is the number of UDP sockets bound to Listen with
	// SO_REUSEPORT, each served by its own goroutine; 0 means one per
	// usable core (GOMAXPROCS).
	Sockets int `yaml:"sockets"`
	// EDNSBuffer is the UDP payload size the server advertises and the
	// largest UDP answer it sends (default 1232, the DNS flag day 2020
	// figure); 512 to 4096.
	EDNSBuffer int `yaml:"edns_buffer"`
	// TCPIdle closes TCP connections idle for this long (default 10 s).
	TCPIdle time.Duration `yaml:"tcp_idle"`
	// MaxTCPConns bounds the open TCP connections (default 1024).
	MaxTCPConns int `yaml:"max_tcp_conns"`
	// AXFRAllow lists the client prefixes allowed to transfer zones (AXFR
	// over TCP); empty refuses every transfer.
	AXFRAllow []string `yaml:"axfr_allow"`
	// AXFRTSIG names keys of TSIGKeys: when set, a transfer from an
	// allowed address must also be signed with one of them (RFC 8945),
	// else it gets NOTAUTH; empty, the address is enough.
	AXFRTSIG []string `yaml:"axfr_tsig"`
	// TSIGKeys are the TSIG keys, their secrets read from the environment
	// or a file, never from the config.
	TSIGKeys []TSIGKeyConfig `yaml:"tsig_keys"`
	// RRL is response rate limiting.
	RRL RRLConfig `yaml:"rrl"`
	// Health holds the named health checks records refer to.
	Health health.Config `yaml:"health"`
	// Zones are the zones served.
	Zones []ZoneConfig `yaml:"zones"`
	// Feedback weights the answers of weighted, weighted-subset and
	// multivalue sets by the load their origins report over NATS
	// (feedback.go); off without feedback.nats.
	Feedback FeedbackConfig `yaml:"feedback"`
	// Resolvers is resolver-aware answers (resolvers.go): resolvers that
	// send a large share of the queries get more records per answer
	// (big_n of a set); off by default.
	Resolvers ResolversConfig `yaml:"resolvers"`

	// sum is the SHA-256 of the file LoadConfig read, so that Watch
	// compares the file with what is served, not with what it first
	// sees; nil for a Config built in code.
	sum []byte
}

// RRLConfig is response rate limiting of UDP answers, per source prefix
// (NSD's scheme), with one budget per bucket: answers by query name and
// type, wildcard answers by the wildcard, negative answers by the zone,
// errors by the prefix alone. TCP is never limited.
type RRLConfig struct {
	// Enabled turns rate limiting on (on in DefaultConfig).
	Enabled bool `yaml:"enabled"`
	// Rate is the responses per second allowed to one prefix (default 200).
	Rate int `yaml:"rate"`
	// Slip sends every Slip-th limited response truncated instead of
	// dropping it (default 2; 1 truncates every one; 0 drops them all).
	Slip int `yaml:"slip"`
	// IPv4Prefix and IPv6Prefix are the prefix lengths clients are grouped
	// by (default 24 and 64).
	IPv4Prefix int `yaml:"ipv4_prefix"`
	IPv6Prefix int `yaml:"ipv6_prefix"`
}

// ZoneConfig is one zone.
type ZoneConfig struct {
	// Origin is the zone's apex ("corral.test").
	Origin string `yaml:"origin"`
	// TTL is the default TTL of the zone's records (default 60s), a
	// duration in whole seconds ("60s", "1h") or plain seconds (60).
	TTL time.Duration `yaml:"ttl"`
	// SOA is the zone's start of authority.
	SOA SOAConfig `yaml:"soa"`
	// NS are the names of the zone's name servers (at least one).
	NS []string `yaml:"ns"`
	// Records are the record sets of the zone.
	Records []RecordConfig `yaml:"records"`
}

// SOAConfig is the SOA record of a zone. Its times are durations in whole
// seconds ("1h", "10m") or plain seconds (3600), like every TTL.
type SOAConfig struct {
	// MName is the primary name server (default: the first NS).
	MName string `yaml:"mname"`
	// RName is the mailbox of the zone's admin, as a name
	// ("hostmaster.corral.test"; default hostmaster.<origin>).
	RName  string `yaml:"rname"`
	Serial uint32 `yaml:"serial"`
	// Refresh, Retry and Expire are the secondaries' timers (default 1h,
	// 10m and 1w).
	Refresh time.Duration `yaml:"refresh"`
	Retry   time.Duration `yaml:"retry"`
	Expire  time.Duration `yaml:"expire"`
	// Minimum is the negative-caching TTL (RFC 2308; default 60s).
	Minimum time.Duration `yaml:"minimum"`
}

// RecordConfig is a record set: the records of one name and type, and how
// an answer is chosen among them.
type RecordConfig struct {
	// Name is the owner, relative to the origin ("www"), "@" for the apex,
	// or absolute with a final dot. A first label "*" makes a wildcard;
	// shuffle sets are always wildcards ("*.tenants").
	Name string `yaml:"name"`
	// Type is A, AAAA, CNAME, TXT, MX, SRV or CAA (the zone's SOA and NS
	// come from its soa and ns keys; delegations are not supported).
	Type string `yaml:"type"`
	// TTL is the TTL of the set's records, a duration in whole seconds
	// ("30s") or plain seconds (30); 0 takes the zone's.
	TTL time.Duration `yaml:"ttl"`
	// Policy is simple (default), weighted, multivalue, failover,
	// weighted-subset, shuffle or cidr.
	Policy string `yaml:"policy"`
	// N is the most records of a multivalue answer (default 8) and the
	// records of a weighted-subset answer (required there).
	N int `yaml:"n"`
	// BigN is the most records of an answer to a big resolver
	// (resolvers block) of a multivalue or weighted-subset set, or of a
	// weighted set with BigWeightedSubset: at least n; 0 (default) means
	// every healthy record.
	BigN int `yaml:"big_n"`
	// BigWeightedSubset answers big resolvers of a weighted set with a
	// weighted subset of big_n records instead of one (weighted only).
	BigWeightedSubset bool `yaml:"big_weighted_subset"`
	// Shuffle deals each tenant its hand of the values (shuffle policy).
	Shuffle *ShuffleConfig `yaml:"shuffle"`
	// Locations maps cidr location names to client prefixes (cidr policy).
	Locations map[string][]string `yaml:"locations"`
	// Values are the records: a bare value ("192.0.2.1", "10 mx.example.")
	// or a mapping with value, weight, check, secondary and location.
	Values []ValueConfig `yaml:"values"`
}

// ShuffleConfig is the dealer of a shuffle set.
type ShuffleConfig struct {
	// Secret is the dealer key, 32 hex digits. Every server that must
	// agree on the hands uses the same secret.
	Secret string `yaml:"secret"`
	// HandSize is k, the values per tenant.
	HandSize int `yaml:"hand_size"`
	// Spill is how many values outside the hand may stand in for
	// unhealthy ones (default 0).
	Spill int `yaml:"spill"`
	// MinHealthy is how many healthy values an answer should hold before
	// spill values are added (default 1).
	MinHealthy int `yaml:"min_healthy"`
}

// ValueConfig is one record of a set.
type ValueConfig struct {
	// Value is the record data in zone-file syntax; names without a final
	// dot are relative to the origin; TXT values are plain text.
	Value string `yaml:"value"`
	// Weight is the weight of weighted and weighted-subset policies.
	Weight uint32 `yaml:"weight"`
	// Check names a health check of the health section; empty means always
	// healthy.
	Check string `yaml:"check"`
	// Secondary marks a failover secondary.
	Secondary bool `yaml:"secondary"`
	// Location is the cidr location of the record ("*" or empty is the
	// default location).
	Location string `yaml:"location"`
}

// UnmarshalYAML accepts a bare scalar as the value.
func (v *ValueConfig) UnmarshalYAML(unmarshal func(any) error) error {
	var s string
	if err := unmarshal(&s); err == nil {
		*v = ValueConfig{Value: s}
		return nil
	}
	type plain ValueConfig
	return unmarshal((*plain)(v))
}

// AdminConfig is the admin listener's part of the configuration.
type AdminConfig struct {
	// Addr is the host:port to listen on. Empty turns the listener off;
	// port 0 picks a free port.
	Addr string `yaml:"addr"`
}

// DefaultConfig returns the defaults: loopback port 5353, one socket per
// core, a 1232-byte EDNS buffer, NSD's response rate limiting.
func DefaultConfig() Config {
	return Config{
		Listen:      DefaultListen,
		EDNSBuffer:  DefaultEDNSBuffer,
		TCPIdle:     DefaultTCPIdle,
		MaxTCPConns: DefaultMaxTCPConns,
		RRL: RRLConfig{
			Enabled: true, Rate: DefaultRRLRate, Slip: DefaultRRLSlip,
			IPv4Prefix: DefaultRRLIPv4Prefix, IPv6Prefix: DefaultRRLIPv6Prefix,
		},
	}
}

// LoadConfig reads the YAML file at path over DefaultConfig, with
// CORRAL_DNS_ environment overrides, and validates it. Errors name the
// file, the line and the key.
func LoadConfig(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	return readConfig(path, data, config.Options{EnvPrefix: "CORRAL_DNS"})
}

// ParseConfig reads YAML text over DefaultConfig and validates it, as
// LoadConfig does with a file (without environment overrides); name labels
// the errors. It is how a program that embeds the server configures it
// from text.
func ParseConfig(name string, data []byte) (*Config, error) {
	return readConfig(name, data, config.Options{})
}

func readConfig(name string, data []byte, opts config.Options) (*Config, error) {
	cfg := DefaultConfig()
	cfg.Feedback.givenByEnv(opts)
	if err := config.Decode(name, data, &cfg, opts); err != nil {
		return nil, err
	}
	cfg.Feedback.given = 0 // its zeros are refused; valid configs compare by value
	cfg.sum = contentSum(data)
	return &cfg, nil
}

// sockets returns the number of UDP sockets to open.
func (c *Config) sockets() int {
	if c.Sockets > 0 {
		return c.Sockets
	}
	return runtime.GOMAXPROCS(0)
}

// Validate reports every problem of c as config field errors whose
// messages start with "authdns: ".
func (c *Config) Validate() error {
	if err := c.validateSettings(); err != nil {
		return err
	}
	// Compiling the zones checks every record.
	_, err := compile(c, c.Feedback, c.Resolvers.learns(), nil)
	return err
}

// validateSettings checks everything but the records, which compile checks;
// New and Reload call it and then compile once.
func (c *Config) validateSettings() error {
	var errs []error
	bad := func(path, format string, args ...any) {
		errs = append(errs, config.Errorf(path, "authdns: "+format, args...))
	}
	if _, _, err := net.SplitHostPort(c.Listen); err != nil {
		bad("listen", "%v", err)
	}
	if err := (admin.Config{Addr: c.Admin.Addr}).Validate(); err != nil {
		bad("admin.addr", "%v", err)
	}
	c.Feedback.validate(bad)
	c.Resolvers.validate(bad)
	if c.Resolvers.Audience && !c.Feedback.enabled() {
		bad("resolvers.audience", "learns from the origins' load reports: needs feedback.nats")
	}
	if c.Sockets < 0 || c.Sockets > 256 {
		bad("sockets", "must be 0 (one per core) to 256, got %d", c.Sockets)
	}
	if c.EDNSBuffer < 512 || c.EDNSBuffer > 4096 {
		bad("edns_buffer", "must be 512 to 4096, got %d", c.EDNSBuffer)
	}
	if c.TCPIdle <= 0 {
		bad("tcp_idle", "must be positive, got %v", c.TCPIdle)
	}
	if c.MaxTCPConns < 1 {
		bad("max_tcp_conns", "must be at least 1, got %d", c.MaxTCPConns)
	}
	for i, p := range c.AXFRAllow {
		if _, err := parsePrefix(p); err != nil {
			bad(fmt.Sprintf("axfr_allow[%d]", i), "%v", err)
		}
	}
	_, _, kerrs := loadTSIGKeys(c)
	errs = append(errs, kerrs...)
	if r := c.RRL; r.Enabled {
		if r.Rate < 1 {
			bad("rrl.rate", "must be at least 1, got %d", r.Rate)
		}
		if r.Slip < 0 {
			bad("rrl.slip", "must not be negative, got %d", r.Slip)
		}
		if r.IPv4Prefix < 1 || r.IPv4Prefix > 32 {
			bad("rrl.ipv4_prefix", "must be 1 to 32, got %d", r.IPv4Prefix)
		}
		if r.IPv6Prefix < 1 || r.IPv6Prefix > 128 {
			bad("rrl.ipv6_prefix", "must be 1 to 128, got %d", r.IPv6Prefix)
		}
	}
	if err := c.Health.Validate(); err != nil {
		errs = append(errs, config.Field("health", err))
	}
	if len(c.Zones) == 0 {
		bad("zones", "at least one zone is needed")
	}
	return errors.Join(errs...)
}

// parsePrefix reads a prefix or a single address (as a full-length prefix).
// Its errors say what is wanted, not which Go function refused the text.
func parsePrefix(s string) (netip.Prefix, error) {
	if strings.Contains(s, "/") {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return p, fmt.Errorf("bad prefix %q (want an address/length, like 10.0.0.0/8 or 2001:db8::/32)", s)
		}
		return p.Masked(), nil
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("bad address %q (want an IPv4 or IPv6 address, or a prefix like 10.0.0.0/8)", s)
	}
	return netip.PrefixFrom(a, a.BitLen()), nil
}

// policyOf parses a record set's policy.
func policyOf(s string) (*answer.Policy, error) { return answer.ParsePolicy(s) }

// dealerOf builds the dealer of a shuffle set over n values.
func dealerOf(sc *ShuffleConfig, n int) (*shard.Dealer, error) {
	secret, err := shard.ParseSecret(sc.Secret)
	if err != nil {
		return nil, err
	}
	return shard.NewDealer(shard.DealerConfig{Secret: secret, Workers: n, HandSize: sc.HandSize, Spill: sc.Spill, MinHealthy: sc.MinHealthy})
}
