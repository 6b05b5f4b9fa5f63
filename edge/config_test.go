package edge

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/corralhq/corral/internal/config"
	"github.com/corralhq/corral/limit"
)

func TestValidateNamesTheKey(t *testing.T) {
	tests := []struct {
		name string
		mod  func(*Config)
		key  string
	}{
		{"no listener", func(c *Config) { c.Listen, c.GRPCListen = "", "" }, "listen"},
		{"tls without a key", func(c *Config) { c.TLS.CertFile = "c.pem" }, "tls.key_file"},
		{"tls with a bad min_version", func(c *Config) { c.TLS.CertFile, c.TLS.KeyFile, c.TLS.MinVersion = "c.pem", "k.pem", "1.1" }, "tls.min_version"},
		{"origin tls settings without enabled", func(c *Config) { c.Origins.TLS.CAFile = "ca.pem" }, "origins.tls.ca_file"},
		{"an origin client certificate without its key", func(c *Config) { c.Origins.TLS = OriginTLSConfig{Enabled: true, CertFile: "c.pem"} }, "origins.tls.key_file"},
		{"a bad origin min_version", func(c *Config) { c.Origins.TLS = OriginTLSConfig{Enabled: true, MinVersion: "1.1"} }, "origins.tls.min_version"},
		{"bad grpc_listen", func(c *Config) { c.GRPCListen = "nope" }, "grpc_listen"},
		{"no origins", func(c *Config) { c.Origins.Static = nil }, "origins"},
		{"no relay key", func(c *Config) { c.Relay.Key = "" }, "relay.key"},
		{"short relay key", func(c *Config) { c.Relay.Key = "short" }, "relay.key"},
		{"key and key_env", func(c *Config) { c.Relay.KeyEnv = "HOME" }, "relay.key_env"},
		{"too many streams", func(c *Config) { c.Relay.Streams = 65 }, "relay.streams"},
		{"negative ping interval", func(c *Config) { c.Session.PingInterval = -time.Second }, "session.ping_interval"},
		{"tiny outbound queue", func(c *Config) { c.Session.OutboundBytes = 10 }, "session.outbound_bytes"},
		{"negative publish rate", func(c *Config) { c.Session.PublishRate = -1 }, "session.publish_rate"},
		{"huge frames", func(c *Config) { c.Wire.MaxFrameBytes = 1 << 30 }, "wire"},
		{"sub-second max age", func(c *Config) { c.MaxSessionAge = time.Millisecond }, "max_session_age"},
		{"negative max sessions", func(c *Config) { c.MaxSessions = -1 }, "max_sessions"},
		{"negative drain rate", func(c *Config) { c.Drain.Rate = -1 }, "drain.rate"},
		{"bad shedder", func(c *Config) { c.Admission.Enabled = true; c.Admission.Shedder.SeverRate = -1 }, "admission.shedder"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := testConfig("127.0.0.1:7401")
			tc.mod(&c)
			err := c.Validate()
			if err == nil {
				t.Fatal("valid, want an error")
			}
			var fe *config.FieldError
			if !errors.As(err, &fe) || !strings.HasPrefix(fe.Path, tc.key) {
				t.Fatalf("error %q does not name %s", err, tc.key)
			}
			if !strings.Contains(err.Error(), "edge: ") && !strings.Contains(err.Error(), "wire: ") && !strings.Contains(err.Error(), "tlsconf: ") {
				t.Errorf("error %q does not start with the package", err)
			}
		})
	}
	c := testConfig("127.0.0.1:7401")
	if err := c.Validate(); err != nil {
		t.Fatalf("the test config: %v", err)
	}
}

// TestLatencyCeilingDecodes: admission.shedder.latency_ceiling is read by
// a stage's name, and a name that is no stage is an error.
func TestLatencyCeilingDecodes(t *testing.T) {
	c := testConfig("127.0.0.1:7401")
	yml := "admission:\n  enabled: true\n  shedder:\n    latency_ceiling: lifeboat\n"
	if err := config.Decode("edge.yaml", []byte(yml), &c, config.Options{}); err != nil {
		t.Fatal(err)
	}
	if got := c.Admission.Shedder.LatencyCeiling; got != limit.StageLifeboat {
		t.Errorf("latency_ceiling lifeboat read as %v", got)
	}
	c = testConfig("127.0.0.1:7401")
	err := config.Decode("edge.yaml", []byte(strings.Replace(yml, "lifeboat", "sinking", 1)), &c, config.Options{})
	if err == nil || !strings.Contains(err.Error(), `unknown stage "sinking"`) {
		t.Errorf("latency_ceiling sinking: %v, want an unknown stage", err)
	}
}
