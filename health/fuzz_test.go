package health

import (
	"strings"
	"testing"
	"time"
)

// FuzzConfig feeds arbitrary check definitions to Validate and New: no
// panic, every error starts with the package name, and a config Validate
// accepts builds a Checker.
func FuzzConfig(f *testing.F) {
	f.Add("web", "http", "http://127.0.0.1:8080/x", "", "", 3, 0, int64(time.Second), 0.1)
	f.Add("db", "tcp", "", "[::1]:5432", "", 10, 1, int64(0), 0.0)
	f.Add("front", "calculated", "", "", "web,db", 0, 2, int64(0), 0.0)
	f.Add("a b", "grpc", "%zz", "h", "front,front", -1, 11, int64(-5), 2.0)
	f.Fuzz(func(t *testing.T, name, kind, url, address, children string, failures, minHealthy int, interval int64, jitter float64) {
		cc := CheckConfig{Name: name, Kind: kind, URL: url, Address: address, FailureThreshold: failures,
			Interval: time.Duration(interval), Jitter: jitter}
		if kind == KindCalculated {
			cc.Children = strings.Split(children, ",")
			cc.MinHealthy = minHealthy
		}
		cfg := Config{Checks: []CheckConfig{
			{Name: "web", Kind: KindHTTP, URL: "http://127.0.0.1/"},
			{Name: "db", Kind: KindTCP, Address: "127.0.0.1:1"},
			cc,
		}}
		err := cfg.Validate()
		if err != nil {
			for _, line := range strings.Split(err.Error(), "\n") {
				if !strings.HasPrefix(line, "health: ") {
					t.Fatalf("error line %q does not start with the package name", line)
				}
			}
			return
		}
		c, err := New(cfg, Options{})
		if err != nil {
			t.Fatalf("New rejected a valid config: %v", err)
		}
		_ = c.Healthy(name)
		_ = c.Status()
	})
}
