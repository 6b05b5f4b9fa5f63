package chart

import (
	"bytes"
	"embed"
	"fmt"
	"html/template"
	"io"
	"io/fs"
	"net/http"
	"strings"
)

//go:embed assets/uPlot.iife.min.js assets/uPlot.min.css assets/chart.js assets/chart.css assets/LICENSE.uPlot
var assets embed.FS

// Assets returns the files a live page loads: uPlot.iife.min.js,
// uPlot.min.css, chart.js (corral's helper, needs uPlot first), chart.css
// and LICENSE.uPlot.
func Assets() fs.FS {
	sub, err := fs.Sub(assets, "assets")
	if err != nil { // cannot happen: the folder is embedded
		panic(err)
	}
	return sub
}

// Handler serves Assets; mount it under a prefix with http.StripPrefix and
// pass the same prefix to Links.
func Handler() http.Handler {
	return http.FileServerFS(Assets())
}

// Links returns the elements that load the assets served by Handler under
// prefix ("/static/chart/"), for a page's <head>.
func Links(prefix string) template.HTML {
	if !strings.HasSuffix(prefix, "/") {
		prefix += "/"
	}
	p := template.HTMLEscapeString(prefix)
	return template.HTML(`<link rel="stylesheet" href="` + p + `uPlot.min.css">` +
		`<link rel="stylesheet" href="` + p + `chart.css">` +
		`<script src="` + p + `uPlot.iife.min.js"></script>` +
		`<script src="` + p + `chart.js"></script>`)
}

// Inline returns the assets as <style> and <script> elements, for the
// <head> of a self-contained page (a report that opens without a network).
// uPlot's MIT licence travels with it in a comment.
func Inline() template.HTML {
	var b strings.Builder
	read := func(name string) string {
		data, err := assets.ReadFile("assets/" + name)
		if err != nil { // cannot happen: the files are embedded
			panic(err)
		}
		return string(data)
	}
	b.WriteString("<style>\n")
	b.WriteString(read("uPlot.min.css"))
	b.WriteString("\n")
	b.WriteString(read("chart.css"))
	b.WriteString("</style>\n<!-- uPlot (MIT licence):\n")
	b.WriteString(strings.ReplaceAll(read("LICENSE.uPlot"), "--", "- -"))
	b.WriteString("-->\n<script>\n")
	b.WriteString(read("uPlot.iife.min.js"))
	b.WriteString("\n</script>\n<script>\n")
	b.WriteString(read("chart.js"))
	b.WriteString("</script>\n")
	return template.HTML(b.String())
}

// Render returns c as a <figure class="corral-chart"> holding its data,
// drawn by chart.js (from Inline or Links) when the page loads. The
// caption says how to zoom.
func Render(c Chart) (template.HTML, error) {
	doc, err := Encode(c)
	if err != nil {
		return "", err
	}
	var b bytes.Buffer
	b.WriteString(`<figure class="corral-chart"><script type="application/json">`)
	// The JSON is inside a <script>: "<" is escaped so that no "</script>"
	// in a name ends it early.
	b.WriteString(strings.ReplaceAll(string(doc), "<", `\u003c`))
	b.WriteString(`</script><figcaption>Drag across the chart to zoom in, double-click to see all; hover for values.</figcaption></figure>`)
	return template.HTML(b.String()), nil
}

// Page is a self-contained HTML page of charts.
type Page struct {
	// Title is the page's title and first heading.
	Title string
	// Intro is the HTML shown before the charts (a verdict, a table).
	Intro template.HTML
	// Charts are drawn in order, one per row.
	Charts []Chart
}

var pageTmpl = template.Must(template.New("page").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>{{.Title}}</title>
{{.Head}}</head><body class="corral-page">
<h1>{{.Title}}</h1>
{{.Intro}}
{{range .Charts}}{{.}}
{{end}}</body></html>
`))

// WritePage writes p as one HTML file that needs no network: the assets
// inline, each chart's data embedded. It stops at the first chart whose
// data is bad, naming it.
func WritePage(w io.Writer, p Page) error {
	var figs []template.HTML
	for _, c := range p.Charts {
		f, err := Render(c)
		if err != nil {
			return err
		}
		figs = append(figs, f)
	}
	err := pageTmpl.Execute(w, struct {
		Title  string
		Head   template.HTML
		Intro  template.HTML
		Charts []template.HTML
	}{p.Title, Inline(), p.Intro, figs})
	if err != nil {
		return fmt.Errorf("chart: %w", err)
	}
	return nil
}
