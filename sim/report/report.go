package report

import (
	"fmt"
	"html/template"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	table "github.com/corralhq/corral/internal/report"
	"github.com/corralhq/corral/sim"
)

// SummaryTable returns one row per run: connections, attempts, errors by
// cause, the 5xx rate (peak step, and over the event) and P0 downtime.
func SummaryTable(rs []*sim.Result) *table.Table {
	t := &table.Table{
		Header: []string{"variant", "devices", "peak conn", "final conn", "attempts", "peak att/s", "down", "backlog", "capacity", "shed", "timeout", "req err", "5xx peak", "5xx event", "P0 down s", "peak util", "imbalance", "settle s"},
		Right:  []int{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17},
	}
	if len(rs) > 0 {
		t.Title = "scenario " + rs[0].Scenario
	}
	for _, r := range rs {
		s := r.Summary
		name := r.Variant
		if name == "" {
			name = "-"
		}
		settle := "never"
		if s.TimeToSettle >= 0 {
			settle = fmt.Sprintf("%.0f", s.TimeToSettle)
		}
		t.Add(name, human(r.Devices), human(s.PeakConnected), human(s.FinalConnected), human(s.Attempts), human(int64(s.PeakAttemptsSec)),
			human(s.Errors["down"]), human(s.Errors["backlog"]), human(s.Errors["capacity"]), human(s.Errors["shed"]), human(s.Errors["timeout"]), human(s.RequestErrors),
			pct(s.FiveXXPeak), pct(s.FiveXXEvent), fmt.Sprintf("%.1f", s.P0Downtime), fmt.Sprintf("%.2f", s.PeakUtilisation), fmt.Sprintf("%.2f", s.PeakImbalance), settle)
	}
	return t
}

// TenantTable returns the blast radius of a poison tenant against the
// exact maths, or nil when no run has one.
func TenantTable(rs []*sim.Result) *table.Table {
	t := &table.Table{
		Title:  "tenants other than the poison one",
		Header: []string{"variant", "tenants", "affected", "predicted affected", "fully down", "predicted fully down"},
		Right:  []int{1, 2, 3, 4, 5},
	}
	for _, r := range rs {
		ts := r.Summary.Tenants
		if ts == nil {
			continue
		}
		t.Add(r.Variant, ts.Tenants, pct(ts.Affected), pct(ts.PredictedAffected), pct(ts.FullyDown), pct(ts.PredictedFullyDown))
	}
	if len(t.Rows) == 0 {
		return nil
	}
	return t
}

// SeriesTable returns the steps of r every `every` of event time.
func SeriesTable(r *sim.Result, every time.Duration) *table.Table {
	t := &table.Table{
		Title:  "per step: " + r.Variant,
		Header: []string{"t s", "connected", "connecting", "waiting", "attempts/s", "successes", "errors", "5xx", "busiest origin"},
		Right:  []int{0, 1, 2, 3, 4, 5, 6, 7, 8},
	}
	k := max(1, int(every.Seconds()/r.Step))
	for i := 0; i < len(r.Steps); i += k {
		s := r.Steps[i]
		var errs int64
		for _, e := range s.Errors {
			errs += sum(e)
		}
		busiest := 0.0
		for _, o := range s.Origins {
			busiest = max(busiest, o.Utilisation)
		}
		t.Add(fmt.Sprintf("%.0f", s.T), human(s.Connected), human(s.Connecting), human(s.Waiting), human(int64(s.AttemptsPerSec)), human(sum(s.Successes)), human(errs), pct(s.FiveXXRate), fmt.Sprintf("%.2f", busiest))
	}
	return t
}

// human prints a count with a k/M/G suffix past 10,000.
func human(n int64) string {
	f := float64(n)
	switch {
	case n >= 10_000_000_000 || n <= -10_000_000_000:
		return fmt.Sprintf("%.1fG", f/1e9)
	case n >= 10_000_000 || n <= -10_000_000:
		return fmt.Sprintf("%.1fM", f/1e6)
	case n >= 10_000 || n <= -10_000:
		return fmt.Sprintf("%.1fk", f/1e3)
	}
	return fmt.Sprint(n)
}

func pct(f float64) string { return fmt.Sprintf("%.1f%%", 100*f) }

// Output is the JSON document of a scenario's runs.
type Output struct {
	Scenario string        `json:"scenario"`
	Runs     []*sim.Result `json:"runs"`
}

// WriteDir writes into dir (created if missing) result.json, the charts of
// every run as PNG and SVG, and report.html with the SVG charts embedded.
// It returns the paths written.
func WriteDir(dir string, rs []*sim.Result) ([]string, error) {
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
		paths = append(paths, p)
		return f.Close()
	}
	if len(rs) == 0 {
		return nil, fmt.Errorf("report: no runs to write")
	}
	if err := write("result.json", func(w io.Writer) error {
		return table.JSON(w, Output{Scenario: rs[0].Scenario, Runs: rs})
	}); err != nil {
		return paths, err
	}
	page := htmlPage{Scenario: rs[0].Scenario, Table: SummaryTable(rs), Tenants: TenantTable(rs)}
	cmp, err := Compare(rs)
	if err != nil {
		return paths, err
	}
	addFigs := func(title, prefix string, figs []Figure) error {
		sec := htmlSection{Title: title}
		for _, f := range figs {
			if err := write(prefix+f.Name+".png", func(w io.Writer) error { return f.Write(w, "png") }); err != nil {
				return err
			}
			// The SVG is rendered once, for its file and for the page.
			svg, err := f.SVG()
			if err != nil {
				return err
			}
			if err := write(prefix+f.Name+".svg", func(w io.Writer) error {
				_, err := w.Write(svg)
				return err
			}); err != nil {
				return err
			}
			sec.Charts = append(sec.Charts, template.HTML(svg))
		}
		page.Sections = append(page.Sections, sec)
		return nil
	}
	if len(cmp) > 0 {
		if err := addFigs("All variants", "", cmp); err != nil {
			return paths, err
		}
	}
	for i, r := range rs {
		figs, err := Figures(r)
		if err != nil {
			return paths, err
		}
		title := r.Variant
		if title == "" {
			title = r.Scenario
		}
		if err := addFigs(title, fmt.Sprintf("run%02d-%s-", i+1, slug(r.Variant)), figs); err != nil {
			return paths, err
		}
	}
	err = write("report.html", func(w io.Writer) error { return writeHTML(w, page) })
	return paths, err
}

func slug(s string) string {
	if s == "" {
		return "base"
	}
	r := strings.NewReplacer(" ", "_", "=", "-", "/", "-")
	return r.Replace(s)
}

type htmlSection struct {
	Title  string
	Charts []template.HTML
}

type htmlPage struct {
	Scenario string
	Table    *table.Table
	Tenants  *table.Table
	Sections []htmlSection
}

var pageTmpl = template.Must(template.New("report").Parse(`<!doctype html>
<html><head><meta charset="utf-8"><title>corral sim: {{.Scenario}}</title>
<style>body{font-family:sans-serif;margin:2em}table{border-collapse:collapse;font-size:90%}
td,th{border:1px solid #ccc;padding:2px 6px;text-align:right}td:first-child{text-align:left}
.chart svg{max-width:100%;height:auto}</style></head><body>
<h1>corral sim: {{.Scenario}}</h1>
<p>Outcomes come out of the scenario's capacities and policies; see the scenario file for its assumptions.</p>
{{with .Table}}<table><tr>{{range .Header}}<th>{{.}}</th>{{end}}</tr>
{{range .Rows}}<tr>{{range .}}<td>{{.}}</td>{{end}}</tr>{{end}}</table>{{end}}
{{with .Tenants}}<h2>{{.Title}}</h2><table><tr>{{range .Header}}<th>{{.}}</th>{{end}}</tr>
{{range .Rows}}<tr>{{range .}}<td>{{.}}</td>{{end}}</tr>{{end}}</table>{{end}}
{{range .Sections}}<h2>{{.Title}}</h2>{{range .Charts}}<div class="chart">{{.}}</div>{{end}}{{end}}
</body></html>
`))

// writeHTML writes the report page.
func writeHTML(w io.Writer, p htmlPage) error {
	return pageTmpl.Execute(w, p)
}

// JSON writes the runs as one JSON document.
func JSON(w io.Writer, rs []*sim.Result) error {
	name := ""
	if len(rs) > 0 {
		name = rs[0].Scenario
	}
	return table.JSON(w, Output{Scenario: name, Runs: rs})
}
