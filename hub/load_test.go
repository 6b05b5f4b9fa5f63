package hub

import (
	"strings"
	"testing"
	"time"

	"github.com/corralhq/corral/client"
	"github.com/corralhq/corral/internal/loadreport"
	"github.com/corralhq/corral/internal/loadreport/reporttest"
)

// TestLoadReports: with load.enabled the hub publishes its load (kind
// hub, its WebSocket address, sessions, the publish limit, the stage,
// the sessions opened since its start) on its NATS connection at the
// interval, with load.capacity; a bad load config is refused.
func TestLoadReports(t *testing.T) {
	th := startHub(t, func(c *Config, _ *Options) {
		c.NodeID = "hub-load"
		c.Load = LoadConfig{Enabled: true, Interval: 20 * time.Millisecond, Capacity: 5000}
		c.Overload.Enabled = true
	})
	sub, err := th.nc.SubscribeSync(loadreport.DefaultSubject)
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		r := reporttest.NextReport(t, sub)
		if r.Kind != "hub" || r.Node != "hub-load" || r.Addr != th.Addr().String() || r.Limit == 0 || r.Limit != th.Stats().PublishLimit || r.Interval != 20*time.Millisecond || r.Capacity != 5000 {
			t.Fatalf("report %+v: want kind hub, node hub-load, addr %s, publish limit %d, capacity 5000", r, th.Addr(), th.Stats().PublishLimit)
		}
	}
	// The reports count the sessions opened since the start, closed ones
	// too (what authdns's audience learning reads).
	for range 3 {
		_ = dialClient(t, client.Config{Addrs: []string{th.wsAddr()}}).Close()
	}
	reporttest.AwaitOpened(t, sub, 3, func() uint64 { return th.Stats().Opened })
	cfg := DefaultConfig()
	cfg.Load.Subject = "corral.*"
	if err := cfg.Validate(); err == nil {
		t.Fatal("a wildcard load.subject validated")
	}
	cfg = DefaultConfig()
	cfg.Load.Capacity = -1
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "load.capacity") {
		t.Fatalf("a negative load.capacity: %v, want an error naming load.capacity", err)
	}
}
