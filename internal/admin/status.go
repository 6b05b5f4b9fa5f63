package admin

import (
	"encoding/json"
	"html/template"
	"mime"
	"net/http"
	"strings"
	"time"
)

// Status is what a status page shows at one instant: a title, a summary
// line, facts (name and value) and tables. A server builds one on every
// request; StatusPage renders it.
type Status struct {
	Title   string
	Summary string
	// Bad marks the summary as a problem (shown in red).
	Bad    bool
	Facts  []Fact
	Tables []Table
}

// Fact is one named value of a status page.
type Fact struct {
	Name, Value string
	// Bad marks the value as a problem.
	Bad bool
}

// Table is a titled table of a status page.
type Table struct {
	Title   string
	Columns []string
	Rows    []Row
}

// Row is one row of a Table; Bad marks it as a problem.
type Row struct {
	Cells []string
	Bad   bool
}

// StatusPageConfig is what StatusPage serves.
type StatusPageConfig struct {
	// HTML builds the page's content for a request without the JSON form.
	HTML func() Status
	// JSON returns the value the JSON form encodes; nil serves the Status
	// that HTML builds.
	JSON func() any
	// Refresh is how often the HTML page reloads itself; 0 means 5s,
	// negative never.
	Refresh time.Duration
}

// StatusPage returns the handler of a status page: HTML that reloads
// itself every Refresh, or JSON when the query has format=json or the
// request accepts application/json before text/html. Every status page of
// the servers (the DNS server's health checks, the hub's and the edge's
// state) is this handler.
func StatusPage(cfg StatusPageConfig) http.Handler {
	refresh := cfg.Refresh
	if refresh == 0 {
		refresh = 5 * time.Second
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if WantsJSON(r) {
			var v any
			if cfg.JSON != nil {
				v = cfg.JSON()
			} else {
				v = cfg.HTML()
			}
			w.Header().Set("Content-Type", "application/json")
			enc := json.NewEncoder(w)
			enc.SetIndent("", "  ")
			_ = enc.Encode(v)
			return
		}
		secs := 0
		if refresh > 0 {
			secs = max(1, int(refresh.Round(time.Second)/time.Second))
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Header().Set("Cache-Control", "no-store")
		_ = statusTemplate.Execute(w, struct {
			Status
			Refresh int
		}{cfg.HTML(), secs})
	})
}

// WantsJSON reports whether r asks for the JSON form of a page: the query
// format=json, or application/json accepted before text/html.
func WantsJSON(r *http.Request) bool {
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

// pageStyle is shared by the status pages and the index.
const pageStyle = `body{font-family:sans-serif;margin:1.5em}
table{border-collapse:collapse;margin-bottom:1em}
td,th{padding:.25em .6em;border-bottom:1px solid #ddd;text-align:left;font-size:90%}
.bad{color:#b00;font-weight:bold}.good{color:#070}`

var statusTemplate = template.Must(template.New("status").Parse(`<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>{{.Title}}</title>
{{if .Refresh}}<meta http-equiv="refresh" content="{{.Refresh}}">{{end}}
<style>` + pageStyle + `</style></head><body>
<h1>{{.Title}}</h1>
<p class="{{if .Bad}}bad{{else}}good{{end}}">{{.Summary}}</p>
{{if .Facts}}<table>
{{range .Facts}}<tr><th>{{.Name}}</th><td{{if .Bad}} class="bad"{{end}}>{{.Value}}</td></tr>
{{end}}</table>{{end}}
{{range .Tables}}<h2>{{.Title}}</h2>
<table>
<tr>{{range .Columns}}<th>{{.}}</th>{{end}}</tr>
{{range .Rows}}<tr{{if .Bad}} class="bad"{{end}}>{{range .Cells}}<td>{{.}}</td>{{end}}</tr>
{{end}}</table>
{{end}}<p><a href="/">index</a>{{if .Refresh}} · reloads every {{.Refresh}} s{{end}} · <a href="?format=json">JSON</a></p>
</body></html>
`))
