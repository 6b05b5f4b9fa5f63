package kraken

import (
	"fmt"
	"html/template"
	"io"
	"maps"
	"slices"
	"strings"

	"github.com/corralhq/corral/internal/chart"
)

// WriteReport writes res as one self-contained HTML page (corral kraken
// run --report FILE.html) that opens without a network: a summary of the
// run, its storms and messages, the latency percentiles, and charts over
// the run's seconds of the devices connected, the attempts per second,
// the failed attempts per second by priority and each origin's share of
// the sessions held. The charts are package internal/chart's (uPlot,
// inlined).
func WriteReport(w io.Writer, res *Result) error {
	n := max(len(res.HeldPerSecond), len(res.AttemptsPerSecond))
	for _, v := range res.FailuresPerSecond {
		n = max(n, len(v))
	}
	for _, v := range res.HeldByOrigin {
		n = max(n, len(v))
	}
	intro, err := reportIntro(res)
	if err != nil {
		return err
	}
	page := chart.Page{Title: "kraken: " + res.Scenario, Intro: intro}
	if n == 0 {
		return writeReportPage(w, page)
	}
	times := make([]float64, n)
	for i := range times {
		times[i] = float64(i)
	}
	series := func(name string, v []int64) chart.Series {
		s := chart.Series{Name: name, Values: make([]float64, n)}
		for i, x := range v {
			s.Values[i] = float64(x)
		}
		return s
	}
	held := chart.Chart{Title: "Devices connected", YLabel: "sessions held", Times: times,
		Series: []chart.Series{series("held at the end of the second", res.HeldPerSecond), series("fewest held in the second", res.HeldMinPerSecond)}}
	attempts := chart.Chart{Title: "Connection attempts", YLabel: "attempts", Unit: "/s", Times: times,
		Series: []chart.Series{series("attempts/s", res.AttemptsPerSecond)}}
	failures := chart.Chart{Title: "Failed attempts by priority", YLabel: "failures", Unit: "/s", Times: times}
	for _, p := range priorityLabels {
		failures.Series = append(failures.Series, series(strings.ToUpper(p), res.FailuresPerSecond[p]))
	}
	share := chart.Chart{Title: "Share of the sessions per origin", YLabel: "share of held", Format: chart.Percent, Times: times}
	for _, node := range slices.Sorted(maps.Keys(res.HeldByOrigin)) {
		s := chart.Series{Name: node, Values: make([]float64, n), Missing: make([]bool, n)}
		for i := range n {
			var total int64
			for _, v := range res.HeldByOrigin {
				if i < len(v) {
					total += v[i]
				}
			}
			if v := res.HeldByOrigin[node]; total > 0 && i < len(v) {
				s.Values[i] = float64(v[i]) / float64(total)
			} else {
				s.Missing[i] = true
			}
		}
		share.Series = append(share.Series, s)
	}
	page.Charts = []chart.Chart{held, attempts, failures}
	if len(share.Series) > 0 {
		page.Charts = append(page.Charts, share)
	}
	return writeReportPage(w, page)
}

func writeReportPage(w io.Writer, p chart.Page) error {
	if err := chart.WritePage(w, p); err != nil {
		return fmt.Errorf("kraken: report: %s", strings.TrimPrefix(err.Error(), "chart: "))
	}
	return nil
}

var introTmpl = template.Must(template.New("intro").Funcs(template.FuncMap{
	"ms": func(p *float64) string {
		if p == nil {
			return "-"
		}
		return fmt.Sprintf("%.0f ms", *p)
	},
}).Parse(`<p>{{.R.Devices}} devices for {{printf "%.1f" .R.Seconds}} s of event time (stopped by {{.R.Stopped}}), {{.R.Agents}} agent(s);
{{.R.Held}} sessions held at the end, {{.R.PeakHeld}} at the most; {{.R.Attempts}} connection attempts
({{printf "%.2f" .R.AttemptsPerDevice}} per device, {{.R.PeakAttemptsPerSecond}} per second at the peak).</p>
{{if .R.Storms}}<h2>Storms</h2>
<table><tr><th>#</th><th>kind</th><th>at</th><th>origins / share</th><th>dropped</th><th>back</th><th>50 % back</th><th>90 %</th><th>99 %</th><th>100 %</th><th>error</th></tr>
{{range $i, $s := .R.Storms}}<tr><td>{{$i}}</td><td>{{$s.Kind}}{{if $s.From}} {{$s.From}}{{end}}{{if $s.To}} → {{$s.To}}{{end}}</td><td>{{$s.AtSeconds}} s</td>
<td>{{if $s.Origins}}{{$s.Origins}}{{else}}{{$s.Share}}{{end}}</td><td>{{$s.Dropped}}</td><td>{{$s.Back}}</td>
<td>{{ms $s.Back50Ms}}</td><td>{{ms $s.Back90Ms}}</td><td>{{ms $s.Back99Ms}}</td><td>{{ms $s.Back100Ms}}</td><td>{{$s.Error}}</td></tr>
{{end}}</table>{{end}}
<h2>Messages and resumes</h2>
<table><tr><th></th><th>P0</th><th>P1</th><th>P2</th></tr>
<tr><td>published</td><td>{{index .R.Messages.Published "p0"}}</td><td>{{index .R.Messages.Published "p1"}}</td><td>{{index .R.Messages.Published "p2"}}</td></tr>
<tr><td>received</td><td>{{index .R.Messages.Received "p0"}}</td><td>{{index .R.Messages.Received "p1"}}</td><td>{{index .R.Messages.Received "p2"}}</td></tr>
<tr><td>delivered</td><td>{{index .R.Messages.Delivered "p0"}}</td><td>{{index .R.Messages.Delivered "p1"}}</td><td>{{index .R.Messages.Delivered "p2"}}</td></tr>
</table>
<p>P0 expected {{.R.Messages.P0Expected}}, lost {{.R.Messages.P0Lost}}, duplicated {{.R.Messages.P0Duplicated}};
duplicates dropped on the wire {{.R.Messages.WireDuplicates}}; resumes recovered {{.R.Resumes.Recovered}}, with a gap {{.R.Resumes.Gaps}}.</p>
<h2>Latency percentiles</h2>
<table><tr><th></th><th>count</th><th>p50</th><th>p90</th><th>p99</th><th>p99.9</th><th>max</th></tr>
{{range .Lat}}<tr><td>{{.Name}}</td><td>{{.Count}}</td>{{range .Q}}<td>{{.}}</td>{{end}}</tr>
{{end}}</table>
{{if .Fail}}<h2>Failures by reason</h2>
<table><tr><th>reason</th><th>P0</th><th>P1</th><th>P2</th></tr>
{{range .Fail}}<tr><td>{{.Name}}</td><td>{{index .C "p0"}}</td><td>{{index .C "p1"}}</td><td>{{index .C "p2"}}</td></tr>
{{end}}</table>{{end}}
<p>The charts are per second of event time (second <i>s</i> covers [<i>s</i>, <i>s</i>+1)); the warm-up is before 0.</p>`))

type latRow struct {
	Name  string
	Count int64
	Q     []string
}

type failRow struct {
	Name string
	C    Counts
}

// reportIntro is the page's text and tables.
func reportIntro(res *Result) (template.HTML, error) {
	var lat []latRow
	add := func(name string, h *Histogram) {
		if h == nil {
			return
		}
		row := latRow{Name: name, Count: h.Count()}
		for _, q := range []float64{50, 90, 99, 99.9} {
			row.Q = append(row.Q, fmtDur(h, q))
		}
		row.Q = append(row.Q, fmtDur(h, 100))
		lat = append(lat, row)
	}
	add("connect (TCP)", res.Latency.Connect)
	if h := res.Latency.TLS; h != nil && h.Count() > 0 {
		add(fmt.Sprintf("TLS handshake (%d full, %d resumed)", res.TLSHandshakes["full"], res.TLSHandshakes["resumed"]), h)
	}
	add("Welcome", res.Latency.Welcome)
	add("resume", res.Latency.Resume)
	for _, p := range priorityLabels {
		add("publish → deliver "+strings.ToUpper(p), res.Latency.Deliver[p])
	}
	var fail []failRow
	for _, reason := range slices.Sorted(maps.Keys(res.Failures)) {
		fail = append(fail, failRow{reason, res.Failures[reason]})
	}
	var b strings.Builder
	if err := introTmpl.Execute(&b, struct {
		R    *Result
		Lat  []latRow
		Fail []failRow
	}{res, lat, fail}); err != nil {
		return "", fmt.Errorf("kraken: report: %w", err)
	}
	return template.HTML(b.String()), nil
}

func fmtDur(h *Histogram, q float64) string {
	if h.Count() == 0 {
		return "-"
	}
	d := h.Quantile(q)
	if q == 100 {
		d = h.Max()
	}
	return fmt.Sprintf("%.1f ms", float64(d.Microseconds())/1000)
}
