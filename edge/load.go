package edge

import (
	"context"
	"time"

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

// publishLoad connects to load.nats and publishes the edge's load
// reports until ctx ends.
func (e *Edge) publishLoad(ctx context.Context, addr string) {
	c := e.cfg.Load
	nc, err := natsutil.Connect(ctx, natsutil.Config{URL: c.NATS}, "corral-edge-"+e.nodeID, e.log)
	if err != nil {
		e.log.Error("load reports: nats", "err", err)
		return
	}
	defer nc.Close()
	if c.Advertise != "" {
		addr = c.Advertise
	}
	loadreport.Publish(ctx, nc.NC, c.Subject, c.Interval, e.log, func() loadreport.Report {
		st := e.Stats()
		r := loadreport.Report{Node: e.nodeID, Kind: "edge", Addr: addr, Sessions: st.Sessions, Capacity: c.Capacity, Limit: st.HandshakeLimit, Stage: int(st.Stage)}
		if e.adm.handshake != nil {
			r.Inflight = e.adm.handshake.InFlight()
		}
		return r
	})
}
