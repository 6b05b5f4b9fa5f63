package loadreport

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
)

// DefaultSubject is the NATS subject of load reports.
const DefaultSubject = "corral.load"

// PlainSubject reports whether subject can carry reports: no blank and
// no wildcard (a wildcard can be subscribed to, not published on).
func PlainSubject(subject string) bool { return !strings.ContainsAny(subject, " \t\r\n*>") }

// DefaultInterval is how often an origin publishes its load.
const DefaultInterval = time.Second

// Report is one origin's load at one instant. The zero value is an idle
// origin with no address.
type Report struct {
	// Node is the node id of the origin; Kind "hub" or "edge".
	Node string `json:"node"`
	Kind string `json:"kind"`
	// Addr is the address the origin advertises (host:port or host).
	Addr string `json:"addr"`
	// Sessions is the sessions open, Capacity the most sessions the
	// origin is sized for (its load.capacity, the operator's figure:
	// neither a hub nor an edge bounds its sessions itself); 0 is
	// unknown.
	Sessions int `json:"sessions"`
	Capacity int `json:"capacity,omitempty"`
	// Inflight and Limit are the work in flight and the adaptive limit
	// of the origin's limiter (an edge's handshakes, a hub's publishes);
	// Limit 0: no limiter.
	Inflight int `json:"inflight"`
	Limit    int `json:"limit"`
	// Rate is the admissions per second the origin's limiter estimates
	// it serves (an edge's handshakes: limit.Limiter.Capacity), Backlog
	// the work ahead of it (limit.Limiter.Backlog: waiting, and places
	// promised to refused work). An edge with load.share_places spaces
	// its refused by its peers' (edge/load.go). 0: unknown or none.
	Rate    float64 `json:"rate,omitempty"`
	Backlog float64 `json:"backlog,omitempty"`
	// Stage is the shedding stage (package limit's Stage, 0 normal to 5
	// lifeboat).
	Stage int `json:"stage"`
	// Opened is the sessions the origin opened since it started, a
	// counter: authdns learns each resolver's audience from its growth
	// (resolvers.audience). 0: none yet, or not reported.
	Opened uint64 `json:"opened,omitempty"`
	// Interval is the publisher's interval, so that a reader knows when
	// to expect the next report.
	Interval time.Duration `json:"interval_ns"`
}

// Decode reads a report and checks it has an address.
func Decode(b []byte) (Report, error) {
	var r Report
	if err := json.Unmarshal(b, &r); err != nil {
		return Report{}, fmt.Errorf("loadreport: %w", err)
	}
	if r.Addr == "" {
		return Report{}, errors.New("loadreport: report without addr")
	}
	return r, nil
}

// Publish publishes report() on subject every interval (DefaultInterval
// when 0) until ctx ends; a failed publish is logged at debug level and
// the next interval tries again (NATS reconnects by itself).
func Publish(ctx context.Context, nc *nats.Conn, subject string, interval time.Duration, log *slog.Logger, report func() Report) {
	if subject == "" {
		subject = DefaultSubject
	}
	if interval <= 0 {
		interval = DefaultInterval
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		r := report()
		r.Interval = interval
		if b, err := json.Marshal(r); err == nil {
			if err := nc.Publish(subject, b); err != nil && log != nil {
				log.Debug("load report not published", "err", err)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
