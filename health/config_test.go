package health

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/corralhq/corral/internal/config"
)

func TestConfigValidate(t *testing.T) {
	web := CheckConfig{Name: "web", Kind: KindHTTP, URL: "http://127.0.0.1:8080/healthz"}
	db := CheckConfig{Name: "db", Kind: KindTCP, Address: "127.0.0.1:5432"}
	with := func(base CheckConfig, f func(*CheckConfig)) CheckConfig {
		f(&base)
		return base
	}
	tests := []struct {
		name   string
		checks []CheckConfig
		path   string // the key path the error must name; "" means valid
		msg    string
	}{
		{name: "empty config", checks: nil},
		{name: "every kind", checks: []CheckConfig{web, db,
			{Name: "hub", Kind: KindGRPC, Address: "hub:9090", Service: "corral.Hub", TLS: true},
			{Name: "front", Kind: KindCalculated, Children: []string{"web", "db"}, MinHealthy: 1},
		}},
		{name: "missing name", checks: []CheckConfig{with(web, func(c *CheckConfig) { c.Name = "" })}, path: "checks[0].name", msg: "needs a name"},
		{name: "bad name", checks: []CheckConfig{with(web, func(c *CheckConfig) { c.Name = "a b" })}, path: "checks[0].name", msg: `holds " "`},
		{name: "duplicate name", checks: []CheckConfig{web, db, with(db, func(c *CheckConfig) { c.Name = "web" })}, path: "checks[2].name", msg: `duplicate check name "web" (also checks[0])`},
		{name: "missing kind", checks: []CheckConfig{{Name: "x"}}, path: "checks[0].kind", msg: "needs a kind"},
		{name: "unknown kind", checks: []CheckConfig{{Name: "x", Kind: "icmp"}}, path: "checks[0].kind", msg: `unknown kind "icmp"`},
		{name: "http without url", checks: []CheckConfig{{Name: "x", Kind: KindHTTP}}, path: "checks[0].url", msg: "needs a url"},
		{name: "bad url", checks: []CheckConfig{with(web, func(c *CheckConfig) { c.URL = "http://[::1" })}, path: "checks[0].url", msg: "bad url"},
		{name: "url scheme", checks: []CheckConfig{with(web, func(c *CheckConfig) { c.URL = "ftp://h/x" })}, path: "checks[0].url", msg: "scheme must be http or https"},
		{name: "url without host", checks: []CheckConfig{with(web, func(c *CheckConfig) { c.URL = "http:///x" })}, path: "checks[0].url", msg: "no host"},
		{name: "https url", checks: []CheckConfig{with(web, func(c *CheckConfig) { c.URL = "https://[::1]:443/"; c.InsecureSkipVerify = true })}},
		{name: "address on http", checks: []CheckConfig{with(web, func(c *CheckConfig) { c.Address = "h:1" })}, path: "checks[0].address", msg: "does not apply to a http check"},
		{name: "tcp without address", checks: []CheckConfig{{Name: "x", Kind: KindTCP}}, path: "checks[0].address", msg: "needs an address"},
		{name: "tcp address without port", checks: []CheckConfig{with(db, func(c *CheckConfig) { c.Address = "db" })}, path: "checks[0].address", msg: "not host:port"},
		{name: "match on tcp", checks: []CheckConfig{with(db, func(c *CheckConfig) { c.Match = "ok" })}, path: "checks[0].match", msg: "does not apply"},
		{name: "tls on tcp", checks: []CheckConfig{with(db, func(c *CheckConfig) { c.TLS = true })}, path: "checks[0].tls", msg: "does not apply"},
		{name: "children on tcp", checks: []CheckConfig{db, with(db, func(c *CheckConfig) { c.Name = "y"; c.Children = []string{"db"} })}, path: "checks[1].children", msg: "does not apply"},
		{name: "skip verify on plaintext grpc", checks: []CheckConfig{{Name: "g", Kind: KindGRPC, Address: "h:1", InsecureSkipVerify: true}}, path: "checks[0].insecure_skip_verify", msg: "without tls: true"},
		{name: "interval below minimum", checks: []CheckConfig{with(db, func(c *CheckConfig) { c.Interval = time.Millisecond })}, path: "checks[0].interval", msg: "below the minimum of 10ms"},
		{name: "negative timeout", checks: []CheckConfig{with(db, func(c *CheckConfig) { c.Timeout = -time.Second })}, path: "checks[0].timeout", msg: "negative"},
		{name: "timeout above interval", checks: []CheckConfig{with(db, func(c *CheckConfig) { c.Interval = 10 * time.Second; c.Timeout = 11 * time.Second })}, path: "checks[0].timeout", msg: "exceeds the interval"},
		{name: "threshold 0 is the default", checks: []CheckConfig{with(db, func(c *CheckConfig) { c.FailureThreshold = 0 })}},
		{name: "threshold 10", checks: []CheckConfig{with(db, func(c *CheckConfig) { c.FailureThreshold = 10; c.SuccessThreshold = 1 })}},
		{name: "threshold 11", checks: []CheckConfig{with(db, func(c *CheckConfig) { c.FailureThreshold = 11 })}, path: "checks[0].failure_threshold", msg: "between 1 and 10, got 11"},
		{name: "negative threshold", checks: []CheckConfig{with(db, func(c *CheckConfig) { c.FailureThreshold = -1 })}, path: "checks[0].failure_threshold", msg: "got -1"},
		{name: "success threshold 11", checks: []CheckConfig{with(db, func(c *CheckConfig) { c.SuccessThreshold = 11 })}, path: "checks[0].success_threshold", msg: "got 11"},
		{name: "jitter too large", checks: []CheckConfig{with(db, func(c *CheckConfig) { c.Jitter = 0.6 })}, path: "checks[0].jitter", msg: "between 0 and 0.5"},
		{name: "bad initial", checks: []CheckConfig{with(db, func(c *CheckConfig) { c.Initial = "up" })}, path: "checks[0].initial", msg: `unknown initial state "up"`},
		{name: "calculated without children", checks: []CheckConfig{{Name: "c", Kind: KindCalculated}}, path: "checks[0].children", msg: "needs children"},
		{name: "unknown child", checks: []CheckConfig{db, {Name: "c", Kind: KindCalculated, Children: []string{"db", "nope"}}}, path: "checks[1].children[1]", msg: `unknown check "nope"`},
		{name: "child twice", checks: []CheckConfig{db, {Name: "c", Kind: KindCalculated, Children: []string{"db", "db"}}}, path: "checks[1].children[1]", msg: "listed twice"},
		{name: "self child", checks: []CheckConfig{{Name: "c", Kind: KindCalculated, Children: []string{"c"}}}, path: "checks[0].children[0]", msg: "names itself"},
		{name: "min_healthy above children", checks: []CheckConfig{db, {Name: "c", Kind: KindCalculated, Children: []string{"db"}, MinHealthy: 2}}, path: "checks[1].min_healthy", msg: "got 2"},
		{name: "interval on calculated", checks: []CheckConfig{db, {Name: "c", Kind: KindCalculated, Children: []string{"db"}, Interval: time.Second}}, path: "checks[1].interval", msg: "does not apply to a calculated check"},
		{name: "cycle", checks: []CheckConfig{db,
			{Name: "a", Kind: KindCalculated, Children: []string{"db", "b"}},
			{Name: "b", Kind: KindCalculated, Children: []string{"c"}},
			{Name: "c", Kind: KindCalculated, Children: []string{"a"}},
		}, path: "checks[1].children", msg: "cycle: a -> b -> c -> a"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := Config{Checks: tc.checks}.Validate()
			if tc.path == "" {
				if err != nil {
					t.Fatalf("valid config rejected: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("accepted, want an error at %s", tc.path)
			}
			if !strings.HasPrefix(err.Error(), "health: ") {
				t.Errorf("%q does not start with the package name", err)
			}
			var fe *config.FieldError
			if !errors.As(err, &fe) || fe.Path != tc.path {
				t.Errorf("error %q: path %v, want %s", err, fe, tc.path)
			}
			if !strings.Contains(err.Error(), tc.msg) {
				t.Errorf("error %q lacks %q", err, tc.msg)
			}
		})
	}
}

func TestConfigReportsEveryError(t *testing.T) {
	err := Config{Checks: []CheckConfig{
		{Name: "a", Kind: KindTCP, FailureThreshold: 12},
		{Name: "a", Kind: KindHTTP, URL: "gopher://x"},
	}}.Validate()
	if err == nil {
		t.Fatal("accepted")
	}
	for _, want := range []string{"checks[0].address", "checks[0].failure_threshold", "checks[1].name", "checks[1].url"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%q lacks %s", err, want)
		}
	}
}

// TestConfigLoadNamesTheLine decodes a file through internal/config, as the
// servers do, and checks that a bad value is reported at its line.
func TestConfigLoadNamesTheLine(t *testing.T) {
	type server struct {
		Health Config `yaml:"health"`
	}
	var s server
	yml := "health:\n  checks:\n    - name: web\n      kind: http\n      url: http://127.0.0.1/\n      interval: 10s\n    - name: db\n      kind: tcp\n      address: db:5432\n      failure_threshold: 0\n      success_threshold: 20\n"
	err := config.Decode("dns.yaml", []byte(yml), &s, config.Options{})
	if err != nil {
		t.Fatalf("decoding into a struct without Validate: %v", err)
	}
	if s.Health.Checks[0].Interval != 10*time.Second {
		t.Errorf("interval = %v", s.Health.Checks[0].Interval)
	}
	var v validating
	err = config.Decode("dns.yaml", []byte(yml), &v, config.Options{})
	if err == nil || !strings.Contains(err.Error(), "dns.yaml:11:") || !strings.Contains(err.Error(), "health.checks[1].success_threshold") {
		t.Fatalf("err = %v, want line 11 and the key path", err)
	}
	if !(Config{Checks: s.Health.Checks}).Has("db") || (Config{}).Has("db") {
		t.Error("Has")
	}
	if got := s.Health.Names(); len(got) != 2 || got[1] != "db" {
		t.Errorf("Names = %v", got)
	}
}

// validating is a server configuration that validates its health part.
type validating struct {
	Health Config `yaml:"health"`
}

func (v *validating) Validate() error { return config.Field("health", v.Health.Validate()) }
