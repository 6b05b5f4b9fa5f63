package edge

import (
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/corralhq/corral/backoff"
	"github.com/corralhq/corral/internal/config"
)

func TestOriginsConfigValidate(t *testing.T) {
	dns := OriginsConfig{Name: "hubs.corral.test", Port: 7000, Resolver: "127.0.0.1:5353"}
	with := func(f func(c *OriginsConfig)) OriginsConfig {
		c := dns
		f(&c)
		return c
	}
	for _, tc := range []struct {
		name string
		cfg  OriginsConfig
		key  string // "" when valid
		msg  string
	}{
		{name: "a name at a resolver", cfg: dns},
		{name: "the system resolver", cfg: with(func(c *OriginsConfig) { c.Resolver = ResolverSystem })},
		{name: "a resolver without port", cfg: with(func(c *OriginsConfig) { c.Resolver = "::1" })},
		{name: "a static list", cfg: OriginsConfig{Static: []string{"127.0.0.1:7000", "[::1]:7000"}}},
		{name: "every option", cfg: with(func(c *OriginsConfig) {
			c.MinTTL, c.MaxTTL, c.QueryTimeout = time.Second, time.Minute, time.Second
			c.Retry = backoff.Config{Policy: "equal"}
			c.Shard = OriginShardConfig{HandSize: 3, Secret: "000102030405060708090a0b0c0d0e0f"}
			c.Outlier = OutlierConfig{ConsecutiveFailures: 3, Interval: time.Second, BaseEjectionTime: time.Second, MaxEjectionTime: time.Minute, MaxEjectionPercent: 50}
			c.HealthCheck = OriginHealthConfig{Kind: "grpc", Interval: time.Second}
		})},
		{name: "tls with a tcp check", cfg: with(func(c *OriginsConfig) {
			c.TLS = OriginTLSConfig{Enabled: true, CAFile: "ca.pem", ServerName: "hub.corral.test", CertFile: "c.pem", KeyFile: "k.pem", MinVersion: "1.2", ReloadInterval: time.Second}
			c.HealthCheck = OriginHealthConfig{Kind: "tcp"}
		})},
		{name: "nothing", cfg: OriginsConfig{}, key: "name", msg: "need a name"},
		{name: "static and a name", cfg: OriginsConfig{Static: []string{"127.0.0.1:7000"}, Name: "x"}, key: "static", msg: "exclude"},
		{name: "a static host name", cfg: OriginsConfig{Static: []string{"hub:7000"}}, key: "static[0]", msg: "not an IP address and port"},
		{name: "a static address without port", cfg: OriginsConfig{Static: []string{"127.0.0.1"}}, key: "static[0]", msg: "not an IP"},
		{name: "a static address twice", cfg: OriginsConfig{Static: []string{"127.0.0.1:1", "127.0.0.1:1"}}, key: "static[1]", msg: "twice"},
		{name: "a bad name", cfg: with(func(c *OriginsConfig) { c.Name = "a..b" }), key: "name", msg: "not a DNS name"},
		{name: "no port", cfg: with(func(c *OriginsConfig) { c.Port = 0 }), key: "port", msg: "1 to 65535"},
		{name: "no resolver", cfg: with(func(c *OriginsConfig) { c.Resolver = "" }), key: "resolver", msg: "need a resolver"},
		{name: "a bad resolver", cfg: with(func(c *OriginsConfig) { c.Resolver = "dns" }), key: "resolver", msg: "not host:port"},
		{name: "min_ttl too low", cfg: with(func(c *OriginsConfig) { c.MinTTL = time.Millisecond }), key: "min_ttl", msg: "at least 10ms"},
		{name: "max_ttl below min_ttl", cfg: with(func(c *OriginsConfig) { c.MinTTL, c.MaxTTL = time.Minute, time.Second }), key: "max_ttl", msg: "below min_ttl"},
		{name: "a negative query timeout", cfg: with(func(c *OriginsConfig) { c.QueryTimeout = -1 }), key: "query_timeout", msg: "negative"},
		{name: "a bad retry policy", cfg: with(func(c *OriginsConfig) { c.Retry.Policy = "sometimes" }), key: "retry", msg: "backoff:"},
		{name: "a bad pick", cfg: with(func(c *OriginsConfig) { c.Pick = "random" }), key: "pick", msg: "not a pick mode"},
		{name: "a hand too large", cfg: with(func(c *OriginsConfig) {
			c.Shard = OriginShardConfig{HandSize: 17, Secret: "000102030405060708090a0b0c0d0e0f"}
		}), key: "shard.hand_size", msg: "0 to 16"},
		{name: "a hand without secret", cfg: with(func(c *OriginsConfig) { c.Shard.HandSize = 2 }), key: "shard.secret", msg: "shard:"},
		{name: "a secret without hand", cfg: with(func(c *OriginsConfig) { c.Shard.Secret = "00" }), key: "shard.hand_size", msg: "needs a hand size"},
		{name: "a negative remember", cfg: with(func(c *OriginsConfig) {
			c.Shard = OriginShardConfig{HandSize: 2, Secret: "000102030405060708090a0b0c0d0e0f", Remember: -time.Second}
		}), key: "shard.remember", msg: "negative"},
		{name: "hands with first-address", cfg: with(func(c *OriginsConfig) {
			c.Pick = PickFirstAddress
			c.Shard = OriginShardConfig{HandSize: 2, Secret: "000102030405060708090a0b0c0d0e0f"}
		}), key: "shard", msg: "need pick p2c"},
		{name: "negative failures", cfg: with(func(c *OriginsConfig) { c.Outlier.ConsecutiveFailures = -1 }), key: "outlier.consecutive_failures", msg: "negative"},
		{name: "a negative interval", cfg: with(func(c *OriginsConfig) { c.Outlier.Interval = -1 }), key: "outlier.interval", msg: "negative"},
		{name: "a percent above 100", cfg: with(func(c *OriginsConfig) { c.Outlier.MaxEjectionPercent = 101 }), key: "outlier.max_ejection_percent", msg: "0 to 100"},
		{name: "max below base ejection time", cfg: with(func(c *OriginsConfig) {
			c.Outlier.BaseEjectionTime, c.Outlier.MaxEjectionTime = time.Minute, time.Second
		}),
			key: "outlier.max_ejection_time", msg: "below base_ejection_time"},
		{name: "a check kind", cfg: with(func(c *OriginsConfig) { c.HealthCheck.Kind = "http" }), key: "health_check.kind", msg: "not a check kind"},
		{name: "check settings without kind", cfg: with(func(c *OriginsConfig) { c.HealthCheck.Interval = time.Second }), key: "health_check.kind", msg: "need a kind"},
		{name: "a tcp check with a service", cfg: with(func(c *OriginsConfig) { c.HealthCheck = OriginHealthConfig{Kind: "tcp", Service: "x"} }), key: "health_check.kind", msg: "grpc checks only"},
		{name: "a grpc check with origins tls", cfg: with(func(c *OriginsConfig) {
			c.TLS = OriginTLSConfig{Enabled: true}
			c.HealthCheck = OriginHealthConfig{Kind: "grpc", TLS: true}
		}), key: "health_check.kind", msg: "use kind tcp"},
		{name: "a check interval too short", cfg: with(func(c *OriginsConfig) { c.HealthCheck = OriginHealthConfig{Kind: "tcp", Interval: time.Millisecond} }), key: "health_check.interval", msg: "below the minimum"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.cfg.Validate()
			if tc.key == "" {
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
				if _, err := NewOrigins(tc.cfg, OriginsOptions{}); err != nil {
					t.Fatalf("NewOrigins: %v", err)
				}
				return
			}
			var fe *config.FieldError
			if err == nil || !errors.As(err, &fe) {
				t.Fatalf("Validate: %v; want a field error at %s", err, tc.key)
			}
			if fe.Path != tc.key || !strings.Contains(err.Error(), tc.msg) || !strings.HasPrefix(fe.Err.Error(), "edge: ") {
				t.Fatalf("Validate: %v (at %q); want key %s and %q", err, fe.Path, tc.key, tc.msg)
			}
			if _, err := NewOrigins(tc.cfg, OriginsOptions{}); err == nil {
				t.Fatal("NewOrigins accepted it")
			}
		})
	}
}

func TestDefaultOriginsConfig(t *testing.T) {
	d := DefaultOriginsConfig()
	if d.MinTTL != time.Second || d.MaxTTL != 5*time.Minute || d.QueryTimeout != 2*time.Second || d.Pick != PickP2C {
		t.Errorf("resolver defaults %+v", d)
	}
	want := OutlierConfig{ConsecutiveFailures: 5, Interval: 10 * time.Second, BaseEjectionTime: 30 * time.Second,
		MaxEjectionTime: 300 * time.Second, MaxEjectionPercent: 10}
	if d.Outlier != want {
		t.Errorf("outlier defaults %+v; want Envoy's %+v", d.Outlier, want)
	}
	if c := (OriginsConfig{MinTTL: time.Hour}).withDefaults(); c.MaxTTL != time.Hour {
		t.Errorf("max_ttl default under a min_ttl of 1h: %v; want 1h", c.MaxTTL)
	}
}

// TestOriginsConfigYAML decodes the README's example section: every key
// exists with the documented spelling, and the values are the defaults.
func TestOriginsConfigYAML(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	text := string(readme)
	start := strings.Index(text, "```yaml\norigins:\n")
	if start < 0 {
		t.Fatal("README.md has no origins: yaml block")
	}
	text = text[start+len("```yaml\n"):]
	text = text[:strings.Index(text, "```")]
	var doc struct {
		Origins OriginsConfig `yaml:"origins"`
	}
	if err := config.Decode("README.md", []byte(text), &doc, config.Options{}); err != nil {
		t.Fatal(err)
	}
	c := doc.Origins
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	if c.Name != "hubs.corral.test" || c.Port != 7000 || c.Resolver != "127.0.0.1:5353" {
		t.Errorf("decoded %+v", c)
	}
	d := DefaultOriginsConfig()
	if c.MinTTL != d.MinTTL || c.MaxTTL != d.MaxTTL || c.QueryTimeout != d.QueryTimeout || c.Retry != d.Retry || c.Pick != d.Pick || c.Outlier != d.Outlier {
		t.Errorf("the README's values are not the defaults:\n got %+v\nwant %+v", c, d)
	}
}
