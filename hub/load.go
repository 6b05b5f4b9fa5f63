package hub

import (
	"context"
	"net"
	"time"

	"github.com/corralhq/corral/internal/config"
	"github.com/corralhq/corral/internal/loadreport"
)

// LoadConfig publishes the hub's load (sessions, the publish limiter's
// in-flight work and limit, the shedding stage) on NATS every Interval,
// for authdns's load feedback. The zero value publishes nothing.
type LoadConfig struct {
	// Enabled turns the reports on.
	Enabled bool `yaml:"enabled"`
	// Subject is the NATS subject (default "corral.load").
	Subject string `yaml:"subject"`
	// Interval is how often (default 1s).
	Interval time.Duration `yaml:"interval"`
	// Advertise is the address the report carries, which authdns matches
	// to its record values; default the WebSocket listener's address.
	Advertise string `yaml:"advertise"`
	// Capacity is the most sessions the hub is sized for, which the
	// reports carry so that authdns counts the share in use (a full hub
	// gets less weight however idle its set-ups). The hub has no bound
	// on sessions of its own and refuses none beyond it: this is the
	// operator's figure. 0, the default, reports the capacity unknown.
	Capacity int `yaml:"capacity"`
}

func (c LoadConfig) validate() error {
	if c.Interval < 0 {
		return config.Errorf("load.interval", "hub: load interval %v is negative", c.Interval)
	}
	if c.Capacity < 0 {
		return config.Errorf("load.capacity", "hub: load capacity %d is negative", c.Capacity)
	}
	if !loadreport.PlainSubject(c.Subject) {
		return config.Errorf("load.subject", "hub: load subject %q is not a plain NATS subject", c.Subject)
	}
	return nil
}

// publishLoad publishes the hub's load reports until ctx ends.
func (h *Hub) publishLoad(ctx context.Context, ln net.Listener) {
	c := h.cfg.Load
	addr := c.Advertise
	if addr == "" {
		addr = ln.Addr().String()
	}
	loadreport.Publish(ctx, h.nc, c.Subject, c.Interval, h.log, func() loadreport.Report {
		st := h.Stats()
		r := loadreport.Report{Node: h.nodeID, Kind: "hub", Addr: addr, Sessions: st.Sessions, Capacity: c.Capacity, Limit: st.PublishLimit, Stage: int(st.Stage), Opened: st.Opened}
		if h.limiter != nil {
			r.Inflight = h.limiter.InFlight()
		}
		return r
	})
}
