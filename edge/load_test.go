package edge

import (
	"strings"
	"testing"
	"time"

	"github.com/corralhq/corral/internal/loadreport"
	"github.com/corralhq/corral/internal/natsutil"
)

// TestLoadReports: with load.nats set, the edge publishes its load
// (kind edge, its WebSocket address, sessions, the handshake limit of its
// admission, load.capacity) on the subject at the interval.
func TestLoadReports(t *testing.T) {
	ns, err := natsutil.StartServer(natsutil.Config{Listen: "127.0.0.1:0"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ns.Shutdown()
	nc, err := natsutil.ConnectEmbedded(ns.Server, "test", false)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	sub, err := nc.NC.SubscribeSync("test.load")
	if err != nil {
		t.Fatal(err)
	}
	h := startHub(t, nil)
	te := startEdge(t, func(c *Config) {
		c.Load = LoadConfig{NATS: ns.Server.ClientURL(), Subject: "test.load", Interval: 20 * time.Millisecond, Capacity: 7000}
		c.Admission.Enabled = true
	}, h)
	for range 2 { // two reports: the loop goes on
		m, err := sub.NextMsg(20 * time.Second)
		if err != nil {
			t.Fatalf("no load report: %v", err)
		}
		r, err := loadreport.Decode(m.Data)
		if err != nil {
			t.Fatal(err)
		}
		if r.Kind != "edge" || r.Node != "edge-test" || r.Addr != te.Addr().String() || r.Limit != te.Stats().HandshakeLimit || r.Limit == 0 || r.Interval != 20*time.Millisecond || r.Capacity != 7000 {
			t.Fatalf("report %+v: want kind edge, node edge-test, addr %s, the handshake limit %d, capacity 7000", r, te.Addr(), te.Stats().HandshakeLimit)
		}
	}
	bad := testConfig("127.0.0.1:1")
	bad.Load.Interval = -time.Second
	if err := bad.Validate(); err == nil {
		t.Fatal("a negative load.interval validated")
	}
	bad = testConfig("127.0.0.1:1")
	bad.Load.Capacity = -1
	if err := bad.Validate(); err == nil || !strings.Contains(err.Error(), "load.capacity") {
		t.Fatalf("a negative load.capacity: %v, want an error naming load.capacity", err)
	}
}
