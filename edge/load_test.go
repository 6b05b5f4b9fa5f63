package edge

import (
	"encoding/json"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/corralhq/corral/client"
	"github.com/corralhq/corral/internal/loadreport"
	"github.com/corralhq/corral/internal/loadreport/reporttest"
	"github.com/corralhq/corral/internal/natsutil"
	"github.com/corralhq/corral/limit"
)

// loadNATS starts a NATS server for the test and subscribes to subject
// on a connection of its own; both end with the test.
func loadNATS(t *testing.T, subject string) (*natsutil.Embedded, *natsutil.Conn, *nats.Subscription) {
	t.Helper()
	ns, err := natsutil.StartServer(natsutil.Config{Listen: "127.0.0.1:0"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ns.Shutdown)
	nc, err := natsutil.ConnectEmbedded(ns.Server, "test", false)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	sub, err := nc.NC.SubscribeSync(subject)
	if err != nil {
		t.Fatal(err)
	}
	return ns, nc, sub
}

// TestLoadReports: with load.nats set, the edge publishes its load
// (kind edge, its WebSocket address, sessions, the handshake limit of its
// admission, load.capacity, the sessions opened since its start) on the
// subject at the interval.
func TestLoadReports(t *testing.T) {
	ns, _, sub := loadNATS(t, "test.load")
	h := startHub(t, nil)
	te := startEdge(t, func(c *Config) {
		c.Load = LoadConfig{NATS: ns.Server.ClientURL(), Subject: "test.load", Interval: 20 * time.Millisecond, Capacity: 7000}
		c.Admission.Enabled = true
	}, h)
	for range 2 { // two reports: the loop goes on
		r := reporttest.NextReport(t, sub)
		if r.Kind != "edge" || r.Node != "edge-test" || r.Addr != te.Addr().String() || r.Limit != te.Stats().HandshakeLimit || r.Limit == 0 || r.Interval != 20*time.Millisecond || r.Capacity != 7000 {
			t.Fatalf("report %+v: want kind edge, node edge-test, addr %s, the handshake limit %d, capacity 7000", r, te.Addr(), te.Stats().HandshakeLimit)
		}
	}
	// The reports count the device sessions opened since the start,
	// closed ones too (what authdns's audience learning reads).
	for range 3 {
		_ = dialClient(t, client.Config{Addrs: []string{te.wsAddr()}}).Close()
	}
	reporttest.AwaitOpened(t, sub, 3, func() uint64 { return te.Stats().Opened })
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

// TestPeersPlaceRate: an edge's refused are served at the fleet's
// handshake capacity times its part of the fleet's backlog (its own
// counting the refusal being placed, a peer's as reported less what the
// peer served since at its reported capacity); with no fresh peer at its
// own; a peer three intervals silent is forgotten; hubs' reports, its own
// and what does not decode are not peers.
func TestPeersPlaceRate(t *testing.T) {
	now := time.Unix(1000, 0)
	p := newPeers("edge-1", func() time.Time { return now })
	send := func(r loadreport.Report) {
		t.Helper()
		b, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		p.receive(b)
	}
	if got := p.placeRate(90, 9); got != 90 {
		t.Fatalf("no peer: %v, want the own 90", got)
	}
	send(loadreport.Report{Node: "hub-1", Kind: "hub", Addr: "h:1", Rate: 500, Backlog: 10, Interval: time.Second})
	send(loadreport.Report{Node: "edge-1", Kind: "edge", Addr: "e:1", Rate: 500, Backlog: 10, Interval: time.Second})
	p.receive([]byte(`{"node":"edge-3","kind":"edge","rate":500}`)) // no addr
	p.receive([]byte(`not json`))
	if got := p.placeRate(90, 9); got != 90 {
		t.Fatalf("only a hub, itself and bad reports: %v, want the own 90", got)
	}
	send(loadreport.Report{Node: "edge-2", Kind: "edge", Addr: "e:2", Rate: 150, Backlog: 30, Interval: time.Second})
	if got := p.placeRate(90, 9); got != 60 {
		t.Fatalf("a peer of 150/s with 3x the backlog: %v, want (90 + 150) x 10 / 40 = 60", got)
	}
	if got := p.placeRate(90, 0); got != 240.0/31 {
		t.Fatalf("an empty backlog: %v, want 240 x 1 / 31, the refusal being placed", got)
	}
	now = now.Add(100 * time.Millisecond)
	if got := p.placeRate(90, 9); got != 240.0*10/25 {
		t.Fatalf("100 ms after the peer's report: %v, want (90 + 150) x 10 / (10 + 30 - 150 x 0.1) = 96", got)
	}
	now = now.Add(2800 * time.Millisecond)
	if got := p.placeRate(90, 29); got != 240 {
		t.Fatalf("a peer 2.9 s silent (interval 1 s), its backlog served: %v, want (90 + 150) x 30 / 30 = 240", got)
	}
	now = now.Add(200 * time.Millisecond)
	if got := p.placeRate(90, 29); got != 90 {
		t.Fatalf("a peer 3.1 s silent: %v, want the own 90", got)
	}
}

// TestSharePlaces: with load.share_places the edge reads its peers'
// reports on its load subject (its place rate follows them) and its own
// carry its handshake capacity; share_places without
// admission or without NATS is refused, naming the key.
func TestSharePlaces(t *testing.T) {
	ns, nc, sub := loadNATS(t, "test.load")
	h := startHub(t, nil)
	te := startEdge(t, func(c *Config) {
		c.Load = LoadConfig{NATS: ns.Server.ClientURL(), Subject: "test.load", Interval: 20 * time.Millisecond, SharePlaces: true}
		c.Admission.Enabled = true
	}, h)
	// The peer's backlog of 1 is served (at its 300/s) by the time the
	// report is read: the edge holds the whole of the fleet's.
	peer, err := json.Marshal(loadreport.Report{Node: "edge-peer", Kind: "edge", Addr: "127.0.0.9:1", Rate: 300, Backlog: 1, Interval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for te.peers.placeRate(100, 0) != 400 {
		if time.Now().After(deadline) {
			t.Fatalf("the peer's report never reached the edge: place rate %v, want (100 + 300) x 1 / 1", te.peers.placeRate(100, 0))
		}
		if err := nc.NC.Publish("test.load", peer); err != nil {
			t.Fatal(err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	for range 3 {
		c := dialClient(t, client.Config{Addrs: []string{te.wsAddr()}})
		nextEvent(t, c, client.EventConnected)
	}
	// The handshake limiter spaces its places at the pool's rate: 100
	// places taken move its hint by 100 over about own + 300 a second
	// (its backlog dwarfs the peer's 1), not over its own.
	hl := te.adm.handshake
	own := hl.Capacity()
	if own <= 0 {
		t.Fatalf("the edge's handshake capacity is %v after 3 sessions", own)
	}
	lo, _ := hl.RetryRange(limit.P2)
	for range 100 {
		hl.RetryWindow(limit.P2)
	}
	hi, _ := hl.RetryRange(limit.P2)
	const j = 0.1 // the spread the places account for: the Limiter's Retry.Spread, the edge's default
	if spaced := 100 / (hi - lo).Seconds() * math.Log1p(j) / j; spaced < own+200 {
		t.Fatalf("100 places moved the hint by %v: spaced at %.0f a second; want the pool's, about %.0f + 300 (own %.0f)", hi-lo, spaced, own, own)
	}
	for {
		r := reporttest.NextReport(t, sub)
		if r.Node == te.nodeID && r.Rate > 0 {
			break
		}
	}

	bad := testConfig("127.0.0.1:1")
	bad.Load.SharePlaces = true
	bad.Load.NATS = ns.Server.ClientURL()
	if err := bad.Validate(); err == nil || !strings.Contains(err.Error(), "load.share_places") {
		t.Fatalf("share_places without admission: %v, want an error naming load.share_places", err)
	}
	bad.Load.NATS = ""
	bad.Admission.Enabled = true
	if _, err := New(bad, Options{}); err == nil || !strings.Contains(err.Error(), "load.share_places") {
		t.Fatalf("share_places without NATS: %v, want an error naming load.share_places", err)
	}
}
