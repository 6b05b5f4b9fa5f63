package report

import (
	"fmt"
	"html/template"
	"io"
	"os"
	"path/filepath"

	"github.com/corralhq/corral/internal/chart"
	table "github.com/corralhq/corral/internal/report"
	"github.com/corralhq/corral/scenario"
	"github.com/corralhq/corral/sim"
)

// Output is the JSON document of a scenario's runs.
type Output struct {
	Scenario string        `json:"scenario"`
	Runs     []*sim.Result `json:"runs"`
}

// JSON writes the runs as one JSON document.
func JSON(w io.Writer, rs []*sim.Result) error {
	name := ""
	if len(rs) > 0 {
		name = rs[0].Scenario
	}
	return table.JSON(w, Output{Scenario: name, Runs: rs})
}

// WriteDir writes into dir (created if missing) result.json and
// report.html (see WriteHTML) for the runs of sc (sc may be nil: the
// report then says only what the results say). It returns the paths
// written.
func WriteDir(dir string, sc *scenario.Scenario, rs []*sim.Result) ([]string, error) {
	if len(rs) == 0 {
		return nil, fmt.Errorf("report: no runs to write")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("report: %w", err)
	}
	var paths []string
	write := func(name string, fn func(io.Writer) error) error {
		p := filepath.Join(dir, name)
		f, err := os.Create(p)
		if err != nil {
			return fmt.Errorf("report: %w", err)
		}
		if err := fn(f); err != nil {
			f.Close()
			return err
		}
		if err := f.Close(); err != nil {
			return fmt.Errorf("report: %w", err)
		}
		paths = append(paths, p)
		return nil
	}
	if err := write("result.json", func(w io.Writer) error { return JSON(w, rs) }); err != nil {
		return paths, err
	}
	err := write("report.html", func(w io.Writer) error { return WriteHTML(w, sc, rs) })
	return paths, err
}

// WriteHTML writes the report of sc's runs as one HTML page that opens
// without a network: what was simulated (the scenario's description, the
// fleet, the event, the sweep), a verdict per run computed from its
// results, the comparison table with every column explained, then the
// charts (the runs compared, then each run), their time axis first on the
// part where things happen. When the scenario draws each variant at
// several seeds (sim.draws), the verdicts are over the draws (DrawsVerdict),
// a table gives each variant's median and worst (DrawsTable), and the
// comparison and the charts show each variant's median draw.
func WriteHTML(w io.Writer, sc *scenario.Scenario, rs []*sim.Result) error {
	if len(rs) == 0 {
		return fmt.Errorf("report: no runs to write")
	}
	groups := GroupDraws(rs)
	drawn := Drawn(groups)
	rs = Medians(groups)
	p := page{Scenario: rs[0].Scenario, Tenants: TenantTable(rs), MinAttempts: count(Measure(rs[0]).MinAttempts)}
	head, labels := variantLabels(rs)
	p.Compare.Head, p.Compare.Variants = head, labels
	ms := make([]Measures, len(rs))
	for i, r := range rs {
		ms[i] = Measure(r)
	}
	for _, c := range columns {
		row := compareRow{Head: c.head, Explain: c.explain}
		for i, r := range rs {
			row.Cells = append(row.Cells, c.cell(r, ms[i]))
		}
		p.Compare.Rows = append(p.Compare.Rows, row)
	}
	if sc != nil {
		p.Description = sc.Description
		p.Setup = Describe(sc, rs)
	}
	for _, g := range groups {
		p.Verdicts = append(p.Verdicts, DrawsVerdict(g))
	}
	if drawn {
		p.Draws, p.DrawsNote = DrawsTable(groups), drawsNote(groups)
	}
	view := View(sc, rs)
	if view[1] > view[0] {
		p.View = fmt.Sprintf("The charts open on %s to %s, where things happen; drag across a chart to zoom, double-click to see the whole run.", dur(view[0]), dur(view[1]))
	}
	render := func(title string, cs []chart.Chart) error {
		sec := section{Title: title}
		for _, c := range cs {
			h, err := chart.Render(c)
			if err != nil {
				return fmt.Errorf("report: %w", err)
			}
			sec.Charts = append(sec.Charts, h)
		}
		p.Sections = append(p.Sections, sec)
		return nil
	}
	if cmp := Compare(rs, view); len(cmp) > 0 {
		if err := render("All variants", cmp); err != nil {
			return err
		}
	}
	for _, r := range rs {
		title := r.Variant
		if title == "" {
			title = r.Scenario
		}
		if drawn {
			title += fmt.Sprintf(" (median draw, seed %d)", r.Seed)
		}
		if err := render(title, Charts(r, view)); err != nil {
			return err
		}
	}
	p.Head = chart.Inline()
	if err := pageTmpl.Execute(w, p); err != nil {
		return fmt.Errorf("report: %w", err)
	}
	return nil
}

type compareRow struct {
	Head, Explain string
	Cells         []string
}

type section struct {
	Title  string
	Charts []template.HTML
}

type page struct {
	Scenario    string
	Description string
	Setup       []string
	Verdicts    []string
	Compare     struct {
		Head     string
		Variants []string
		Rows     []compareRow
	}
	Tenants     *table.Table
	Draws       *table.Table
	DrawsNote   string
	MinAttempts string
	View        string
	Sections    []section
	Head        template.HTML
}

var pageTmpl = template.Must(template.New("report").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>corral sim: {{.Scenario}}</title>
{{.Head}}<style>div.scroll{overflow-x:auto}table.summary th{text-align:left;white-space:nowrap}table.summary td.explain{text-align:left;color:#444}</style></head><body class="corral-page">
<h1>corral sim: {{.Scenario}}</h1>
{{with .Description}}<p class="description">{{.}}</p>{{end}}
{{with .Setup}}<h2>What was simulated</h2>
<ul class="setup">{{range .}}<li>{{.}}</li>{{end}}</ul>{{end}}
<h2>Verdict</h2>
{{range .Verdicts}}<p class="verdict">{{.}}</p>
{{end}}
<p>Outcomes come out of the scenario's capacities and policies, which are inputs written in the scenario file with their sources; no input sets an error rate, a downtime or a utilisation.</p>
{{with .Draws}}<h2>Over the draws</h2>
<p>{{$.DrawsNote}}</p>
<table class="summary"><tr>{{range .Header}}<th>{{.}}</th>{{end}}</tr>
{{range .Rows}}<tr>{{range .}}<td>{{.}}</td>{{end}}</tr>
{{end}}</table>{{end}}
<h2>Comparison</h2>
<p>One column per variant{{with .Compare.Head}} ({{.}}){{end}}; the row names are the columns of <code>corral sim --wide</code>. "Enough attempts" is at least {{.MinAttempts}} in a step (sim's <code>peak_min_attempts</code>, from the number of devices): a step with a handful of attempts says nothing about a share.</p>
<div class="scroll"><table class="summary"><tr><th>measure</th>{{range .Compare.Variants}}<th>{{.}}</th>{{end}}<th class="explain">what it is</th></tr>
{{range .Compare.Rows}}<tr><th>{{.Head}}</th>{{range .Cells}}<td>{{.}}</td>{{end}}<td class="explain">{{.Explain}}</td></tr>
{{end}}</table></div>
{{with .Tenants}}<h2>{{.Title}}</h2><table><tr>{{range .Header}}<th>{{.}}</th>{{end}}</tr>
{{range .Rows}}<tr>{{range .}}<td>{{.}}</td>{{end}}</tr>
{{end}}</table>{{end}}
<h2>Charts</h2>
{{with .View}}<p>{{.}}</p>{{end}}
{{range .Sections}}<h3>{{.Title}}</h3>
{{range .Charts}}{{.}}
{{end}}{{end}}</body></html>
`))

// drawsNote says what the draws are and which draw the rest of the report
// shows.
func drawsNote(ds []Draws) string {
	n := 0
	for _, d := range ds {
		n = max(n, len(d.Runs))
	}
	first := ds[0].Runs[0].Seed
	return fmt.Sprintf("Each variant ran %d times, at the seeds %d to %d (sim.draws): which address each resolver's answers name, "+
		"and the rounding offsets, are random draws, so an outcome that depends on them is a distribution. "+
		"Median: the middle draw's figure (the lower of the two middle ones for an even count); worst: the highest failure figure "+
		"and the longest settle over the draws; draws failing: those in which any connection attempt failed. "+
		"The comparison table and the charts below show each variant's median draw (of its draws ordered by failed attempts "+
		"over the run, the middle one), the typical outcome; the verdicts give the range over the failing draws and the seed of the worst.",
		n, first, first+uint64(n)-1)
}
