package report

import (
	"bytes"
	"fmt"
	"image/color"
	"io"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"

	"github.com/corralhq/corral/sim"
)

// maxPoints bounds the points of one line: longer series are thinned by
// keeping the largest value of each run of steps, so peaks survive.
const maxPoints = 1200

// Figure is one chart of a run.
type Figure struct {
	// Name is a short file-friendly name ("connected").
	Name string
	// Title is the chart's title.
	Title string
	plot  *plot.Plot
}

// Figures returns the charts of one run: devices connected (by priority),
// attempts and successes per second, failed attempts per second by cause
// with the 5xx rate, and each origin's utilisation.
func Figures(r *sim.Result) ([]Figure, error) {
	var figs []Figure
	label := r.Scenario
	if r.Variant != "" {
		label += " (" + r.Variant + ")"
	}
	steps := r.Steps
	// connected
	{
		var lines []any
		lines = append(lines, "all", series(steps, func(s sim.Step) float64 { return float64(s.Connected) }))
		for p, name := range r.Priorities {
			lines = append(lines, name, series(steps, func(s sim.Step) float64 { return float64(s.ConnectedByPriority[p]) }))
		}
		f, err := newFigure("connected", "Devices connected: "+label, "devices", lines)
		if err != nil {
			return nil, err
		}
		figs = append(figs, f)
	}
	// attempts
	{
		lines := []any{
			"attempts/s", series(steps, func(s sim.Step) float64 { return s.AttemptsPerSec }),
			"connections/s", series(steps, func(s sim.Step) float64 { return float64(sum(s.Successes)) / r.Step }),
		}
		f, err := newFigure("attempts", "Connection attempts: "+label, "per second", lines)
		if err != nil {
			return nil, err
		}
		figs = append(figs, f)
	}
	// errors
	{
		var lines []any
		for c, name := range r.Causes {
			if r.Summary.Errors[name] == 0 {
				continue
			}
			lines = append(lines, name, series(steps, func(s sim.Step) float64 { return float64(sum(s.Errors[c])) / r.Step }))
		}
		if r.Summary.RequestErrors > 0 {
			lines = append(lines, "request errors", series(steps, func(s sim.Step) float64 { return float64(sum(s.RequestErrors)) / r.Step }))
		}
		if len(lines) > 0 {
			f, err := newFigure("errors", "Failures per second by cause: "+label, "per second", lines)
			if err != nil {
				return nil, err
			}
			figs = append(figs, f)
		}
		f, err := newFigure("5xx", "Share of attempts and requests answered 5xx: "+label, "share", []any{
			"5xx rate", series(steps, func(s sim.Step) float64 { return s.FiveXXRate }),
		})
		if err != nil {
			return nil, err
		}
		figs = append(figs, f)
	}
	// origins
	{
		var lines []any
		for o, name := range r.Origins {
			if o >= 12 {
				break
			}
			lines = append(lines, name, series(steps, func(s sim.Step) float64 { return s.Origins[o].Utilisation }))
		}
		f, err := newFigure("origins", "Origin utilisation (connections / maximum): "+label, "utilisation", lines)
		if err != nil {
			return nil, err
		}
		figs = append(figs, f)
	}
	return figs, nil
}

// Compare returns one chart per metric with a line per run, for sweeps.
func Compare(rs []*sim.Result) ([]Figure, error) {
	if len(rs) < 2 {
		return nil, nil
	}
	metrics := []struct {
		name, title, y string
		f              func(sim.Step) float64
	}{
		{"compare-connected", "Devices connected, by variant", "devices", func(s sim.Step) float64 { return float64(s.Connected) }},
		{"compare-attempts", "Connection attempts per second, by variant", "per second", func(s sim.Step) float64 { return s.AttemptsPerSec }},
		{"compare-p0", "P0 devices connected, by variant", "devices", func(s sim.Step) float64 { return float64(s.ConnectedByPriority[0]) }},
	}
	var figs []Figure
	for _, m := range metrics {
		var lines []any
		for _, r := range rs {
			lines = append(lines, r.Variant, series(r.Steps, m.f))
		}
		f, err := newFigure(m.name, m.title+": "+rs[0].Scenario, m.y, lines)
		if err != nil {
			return nil, err
		}
		figs = append(figs, f)
	}
	return figs, nil
}

func newFigure(name, title, y string, lines []any) (Figure, error) {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = "event time (s)"
	p.Y.Label.Text = y
	p.Legend.Top = true
	p.BackgroundColor = color.White
	p.Add(plotter.NewGrid())
	if err := plotutil.AddLines(p, lines...); err != nil {
		return Figure{}, fmt.Errorf("report: %s: %w", name, err)
	}
	return Figure{Name: name, Title: title, plot: p}, nil
}

// series samples f over the steps, thinned to at most maxPoints points.
func series(steps []sim.Step, f func(sim.Step) float64) plotter.XYs {
	every := max(1, (len(steps)+maxPoints-1)/maxPoints)
	xys := make(plotter.XYs, 0, len(steps)/every+1)
	for i := 0; i < len(steps); i += every {
		best := f(steps[i])
		for j := i + 1; j < min(i+every, len(steps)); j++ {
			best = max(best, f(steps[j]))
		}
		xys = append(xys, plotter.XY{X: steps[i].T, Y: best})
	}
	return xys
}

func sum(xs []int64) int64 {
	var s int64
	for _, x := range xs {
		s += x
	}
	return s
}

// Write renders f as "png" or "svg" to w.
func (f Figure) Write(w io.Writer, format string) error {
	if format != "png" && format != "svg" {
		return fmt.Errorf("report: unknown image format %q (want png or svg)", format)
	}
	wt, err := f.plot.WriterTo(8*vg.Inch, 4*vg.Inch, format)
	if err != nil {
		return fmt.Errorf("report: %s: %w", f.Name, err)
	}
	_, err = wt.WriteTo(w)
	return err
}

// SVG returns f rendered as SVG.
func (f Figure) SVG() ([]byte, error) {
	var b bytes.Buffer
	err := f.Write(&b, "svg")
	return b.Bytes(), err
}
