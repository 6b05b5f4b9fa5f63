package health

import (
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/corralhq/corral/internal/admin"
)

// StatusJSON is one check on the JSON status page.
type StatusJSON struct {
	Name    string `json:"name"`
	Kind    string `json:"kind"`
	Target  string `json:"target"`
	Healthy bool   `json:"healthy"`
	Forced  bool   `json:"forced,omitempty"`
	// Since and LastProbe are RFC 3339 times; LastProbe is empty before the
	// first probe.
	Since     string `json:"since"`
	LastProbe string `json:"last_probe,omitempty"`
	LastError string `json:"last_error,omitempty"`
	// LastLatencyMS is the last probe's latency in milliseconds.
	LastLatencyMS float64 `json:"last_latency_ms"`
	Failures      int     `json:"failures"`
	Successes     int     `json:"successes"`
	Probes        uint64  `json:"probes"`
}

// JSON returns s in the form of the JSON status page.
func (s Status) JSON() StatusJSON {
	j := StatusJSON{
		Name: s.Name, Kind: s.Kind, Target: s.Target, Healthy: s.Healthy, Forced: s.Forced,
		Since: s.Since.UTC().Format(time.RFC3339Nano), LastError: s.LastError,
		LastLatencyMS: float64(s.LastLatency) / float64(time.Millisecond),
		Failures:      s.Failures, Successes: s.Successes, Probes: s.Probes,
	}
	if !s.LastProbe.IsZero() {
		j.LastProbe = s.LastProbe.UTC().Format(time.RFC3339Nano)
	}
	return j
}

// Handler returns the status page of c (admin.StatusPage, reloading
// itself every 5 s): an HTML table of every check (name, kind, target,
// state, since, last error, last latency), or JSON ({"checks": [...]})
// when the query has format=json or the request accepts application/json
// before text/html. Servers mount it on the admin listener, for instance
// at /health.
func (c *Checker) Handler() http.Handler {
	return admin.StatusPage(admin.StatusPageConfig{
		JSON: func() any {
			list := c.Status()
			out := struct {
				Checks []StatusJSON `json:"checks"`
			}{Checks: make([]StatusJSON, 0, len(list))}
			for _, s := range list {
				out.Checks = append(out.Checks, s.JSON())
			}
			return out
		},
		HTML: func() admin.Status {
			list := c.Status()
			healthy := 0
			t := admin.Table{Title: "checks", Columns: []string{"name", "kind", "target", "state", "since", "last probe", "last error", "last latency", "probes"}}
			for _, s := range list {
				state := "unhealthy"
				if s.Healthy {
					healthy++
					state = "healthy"
				}
				if s.Forced {
					state += " (forced)"
				}
				t.Rows = append(t.Rows, admin.Row{Bad: !s.Healthy, Cells: []string{
					s.Name, s.Kind, s.Target, state, fmtTime(s.Since), fmtTime(s.LastProbe), s.LastError, fmtLatency(s.LastLatency), strconv.FormatUint(s.Probes, 10)}})
			}
			return admin.Status{
				Title:   "health checks",
				Summary: fmt.Sprintf("%d of %d healthy at %s", healthy, len(list), fmtTime(c.now())),
				Bad:     healthy < len(list),
				Tables:  []admin.Table{t},
			}
		},
	})
}

func fmtTime(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format("2006-01-02 15:04:05.000Z")
}

func fmtLatency(d time.Duration) string {
	if d == 0 {
		return "-"
	}
	return d.Round(time.Microsecond).String()
}
