package edge

import (
	"cmp"
	"context"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/corralhq/corral/internal/config"
	"github.com/corralhq/corral/internal/loadreport"
	"github.com/corralhq/corral/internal/natsutil"
)

// LoadConfig publishes the edge's load (device sessions, handshakes in
// flight and the handshake limit, the shedding stage) on NATS every
// Interval, for authdns's load feedback. The zero value (no NATS)
// publishes nothing; the edge needs NATS for nothing else.
type LoadConfig struct {
	// NATS is the NATS URL (comma-separated for a cluster); empty turns
	// the reports off. A NATS that is down is retried in the background.
	NATS string `yaml:"nats"`
	// Subject is the NATS subject (default "corral.load").
	Subject string `yaml:"subject"`
	// Interval is how often (default 1s).
	Interval time.Duration `yaml:"interval"`
	// Advertise is the address the report carries, which authdns matches
	// to its record values; default the WebSocket listener's address
	// (the gRPC listener's without one).
	Advertise string `yaml:"advertise"`
	// Capacity is the most device sessions the edge is sized for, which the
	// reports carry so that authdns counts the share in use (a full edge
	// gets less weight however idle its set-ups). The edge has no bound
	// on sessions of its own and refuses none beyond it: this is the
	// operator's figure. 0, the default, reports the capacity unknown.
	Capacity int `yaml:"capacity"`
	// SharePlaces spaces the handshake limiter's refused Hellos at the
	// edge's share of the fleet's handshake capacity instead of its own
	// (limit.Limiter.SetPlaceRate): the fleet is this edge and every
	// other edge whose reports arrive on Subject, the share is the
	// edge's part of the fleet's backlog (each report carries its
	// edge's handshake capacity and backlog). Turn it on for
	// edges whose devices come back to any of them (one DNS answer in
	// front of shared origins); edges of another pool publish on a
	// subject of their own. Needs admission.enabled and NATS.
	SharePlaces bool `yaml:"share_places"`
}

func (c LoadConfig) validate() error {
	if c.Interval < 0 {
		return config.Errorf("load.interval", "edge: load interval %v is negative", c.Interval)
	}
	if c.Capacity < 0 {
		return config.Errorf("load.capacity", "edge: load capacity %d is negative", c.Capacity)
	}
	if !loadreport.PlainSubject(c.Subject) {
		return config.Errorf("load.subject", "edge: load subject %q is not a plain NATS subject", c.Subject)
	}
	return nil
}

// publishLoad publishes the edge's load reports on the connection of
// Options.NATS, or one to load.nats, until ctx ends; with
// load.share_places it also reads the other edges' reports (peers).
func (e *Edge) publishLoad(ctx context.Context, addr string) {
	c := e.cfg.Load
	nc := e.opts.NATS
	if nc == nil {
		conn, err := natsutil.Connect(ctx, natsutil.Config{URL: c.NATS}, "corral-edge-"+e.nodeID, e.log)
		if err != nil {
			e.log.Error("load reports: nats", "err", err)
			return
		}
		defer conn.Close()
		nc = conn.NC
	}
	if c.Advertise != "" {
		addr = c.Advertise
	}
	subject := cmp.Or(c.Subject, loadreport.DefaultSubject)
	if e.peers != nil {
		sub, err := nc.Subscribe(subject, func(m *nats.Msg) { e.peers.receive(m.Data) })
		if err != nil {
			e.log.Error("load reports: subscribe", "subject", subject, "err", err)
		} else {
			defer func() { _ = sub.Unsubscribe() }()
		}
	}
	interval := cmp.Or(c.Interval, loadreport.DefaultInterval)
	loadreport.Publish(ctx, nc, subject, interval, e.log, func() loadreport.Report {
		st := e.Stats()
		r := loadreport.Report{Node: e.nodeID, Kind: "edge", Addr: addr, Sessions: st.Sessions, Capacity: c.Capacity, Limit: st.HandshakeLimit, Stage: int(st.Stage), Opened: st.Opened}
		if h := e.adm.handshake; h != nil {
			r.Inflight = h.InFlight()
			r.Rate, r.Backlog = h.Capacity(), h.Backlog()
		}
		return r
	})
}

// peers is what an edge with load.share_places knows of the other edges
// on its load subject: each one's handshake capacity and backlog, from
// its last report, until three of its intervals pass without one. A
// peer's backlog is read as it is now, not as it was reported: the
// reported one less what the peer served since at the capacity it
// reported (its waiting room is served at that rate; its promised places
// at its own place rate, which the report does not carry). A report is
// up to an interval old, and a backlog read stale is too large as it
// falls: in kraken's 10x storm each of two edges, whose rooms expired
// into places together, took its part of the fleet's backlog as 0.62 and
// 0.29 of it, the fleet's refused were placed at 0.91 of its capacity,
// and it ran at that pace until they were back. Read too small, a part
// errs the other way: places due early, and early returns wait in the
// room.
type peers struct {
	self string
	now  func() time.Time
	mu   sync.Mutex
	m    map[string]peerLoad
}

type peerLoad struct {
	rate, backlog float64
	at, until     time.Time
}

func newPeers(self string, now func() time.Time) *peers {
	return &peers{self: self, now: now, m: make(map[string]peerLoad)}
}

// receive takes one load report; a hub's, the edge's own and a report
// that does not decode are ignored.
func (p *peers) receive(b []byte) {
	r, err := loadreport.Decode(b)
	if err != nil || r.Kind != "edge" || r.Node == p.self {
		return
	}
	ttl := 3 * cmp.Or(r.Interval, loadreport.DefaultInterval)
	now := p.now()
	p.mu.Lock()
	p.m[r.Node] = peerLoad{rate: max(r.Rate, 0), backlog: max(r.Backlog, 0), at: now, until: now.Add(ttl)}
	p.mu.Unlock()
}

// placeRate is the rate this edge's refused are served at: the fleet's
// handshake capacity (own, this edge's, and the fresh peers') times the
// edge's part of the fleet's backlog (the peers' as they are now),
// backlog its own (the refusal being placed counted in it: a refusing
// edge has a part). Spaced so, every edge's places run out together,
// when the fleet has served them all; each at its own rate, the fleet
// took the slowest edge's pace once the fastest edge's places ran out.
// With no fresh peer it is own.
func (p *peers) placeRate(own, backlog float64) float64 {
	now := p.now()
	backlog = max(backlog, 0) + 1
	sum, all, n := own, backlog, 1
	p.mu.Lock()
	for k, r := range p.m {
		if now.After(r.until) {
			delete(p.m, k)
			continue
		}
		sum += r.rate
		all += max(r.backlog-r.rate*now.Sub(r.at).Seconds(), 0)
		n++
	}
	p.mu.Unlock()
	if n == 1 {
		return own
	}
	return sum * backlog / all
}
