package health

import (
	"encoding/json"
	"html/template"
	"mime"
	"net/http"
	"strings"
	"time"
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

// Handler returns the status page of c: an HTML table of every check
// (name, kind, target, state, since, last error, last latency), or JSON
// ({"checks": [...]}) when the query has format=json or the request
// accepts application/json before text/html. Servers mount it on the admin
// listener, for instance at /health.
func (c *Checker) Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		list := c.Status()
		if wantsJSON(r) {
			out := struct {
				Checks []StatusJSON `json:"checks"`
			}{Checks: make([]StatusJSON, 0, len(list))}
			for _, s := range list {
				out.Checks = append(out.Checks, s.JSON())
			}
			w.Header().Set("Content-Type", "application/json")
			enc := json.NewEncoder(w)
			enc.SetIndent("", "  ")
			_ = enc.Encode(out)
			return
		}
		healthy := 0
		for _, s := range list {
			if s.Healthy {
				healthy++
			}
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_ = statusPage.Execute(w, struct {
			Checks         []Status
			Healthy, Total int
			Now            time.Time
		}{list, healthy, len(list), c.now()})
	})
}

// wantsJSON reports whether r asks for the JSON form.
func wantsJSON(r *http.Request) bool {
	switch r.URL.Query().Get("format") {
	case "json":
		return true
	case "html":
		return false
	}
	for _, part := range strings.Split(r.Header.Get("Accept"), ",") {
		mt, _, err := mime.ParseMediaType(strings.TrimSpace(part))
		if err != nil {
			continue
		}
		switch mt {
		case "application/json":
			return true
		case "text/html", "*/*":
			return false
		}
	}
	return false
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

var statusPage = template.Must(template.New("status").Funcs(template.FuncMap{
	"time": fmtTime, "latency": fmtLatency,
}).Parse(`<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>health checks</title>
<style>
body{font-family:sans-serif;margin:1.5em}
table{border-collapse:collapse}
td,th{padding:.25em .6em;border-bottom:1px solid #ddd;text-align:left;font-size:90%}
.healthy{color:#070}.unhealthy{color:#b00;font-weight:bold}
</style></head><body>
<h1>health checks</h1>
<p>{{.Healthy}} of {{.Total}} healthy at {{time .Now}}</p>
<table>
<tr><th>name</th><th>kind</th><th>target</th><th>state</th><th>since</th><th>last probe</th><th>last error</th><th>last latency</th><th>probes</th></tr>
{{range .Checks}}<tr><td>{{.Name}}</td><td>{{.Kind}}</td><td>{{.Target}}</td><td class="{{if .Healthy}}healthy{{else}}unhealthy{{end}}">{{if .Healthy}}healthy{{else}}unhealthy{{end}}{{if .Forced}} (forced){{end}}</td><td>{{time .Since}}</td><td>{{time .LastProbe}}</td><td>{{.LastError}}</td><td>{{latency .LastLatency}}</td><td>{{.Probes}}</td></tr>
{{end}}</table>
</body></html>
`))
