package report

import (
	"fmt"
	"strings"
	"time"

	table "github.com/corralhq/corral/internal/report"
	"github.com/corralhq/corral/sim"
)

// column is one column of the summary table: its header, what it means
// (the HTML report prints it under the table), and its cell.
type column struct {
	head, explain string
	// narrow columns are in the terminal table; the others need --wide.
	narrow bool
	cell   func(r *sim.Result, m Measures) string
}

var columns = []column{
	{"devices", "devices in the scenario (after its scale)", false, func(r *sim.Result, _ Measures) string { return human(r.Devices) }},
	{"peak conn", "most devices connected at once", false, func(r *sim.Result, _ Measures) string { return human(r.Summary.PeakConnected) }},
	{"final conn", "devices connected at the end of the run", false, func(r *sim.Result, _ Measures) string { return human(r.Summary.FinalConnected) }},
	{"attempts", "connection attempts of the devices over the run (every reconnect counts; an edge's retry of another address is part of the same attempt)", true, func(r *sim.Result, _ Measures) string { return human(r.Summary.Attempts) }},
	{"peak att/s", "most connection attempts in one second", false, func(r *sim.Result, _ Measures) string { return human(int64(r.Summary.PeakAttemptsSec)) }},
	{"att fail", "share of connection attempts that failed, at the worst step with enough attempts", true, func(_ *sim.Result, m Measures) string { return pct(m.AttemptFailPeak) }},
	{"fail s", "seconds of event time during which more than 1 % of a step's attempts failed (steps with enough attempts)", true, func(_ *sim.Result, m Measures) string { return fmt.Sprintf("%.0f", m.FailingSeconds) }},
	{"att fail event", "share of connection attempts that failed from the first scheduled event to the step the fleet settled", false, func(r *sim.Result, _ Measures) string { return pct(r.Summary.AttemptErrorEvent) }},
	{"att fail run", "share of connection attempts that failed over the whole run", false, func(_ *sim.Result, m Measures) string { return pct(m.AttemptFail) }},
	{"down", "attempts failed because the origin was down (502)", false, causeCell("down")},
	{"backlog", "attempts refused because the origin's set-up backlog was full (503)", false, causeCell("backlog")},
	{"capacity", "attempts refused because the origin held its maximum of connections (503)", false, causeCell("capacity")},
	{"shed", "attempts shed by adaptive admission, with a retry-after hint (503)", false, causeCell("shed")},
	{"timeout", "attempts whose set-up did not finish within the client's connect timeout (504)", false, causeCell("timeout")},
	{"req fail", "share of requests on held streams that failed for lack of request capacity, over the run", true, func(_ *sim.Result, m Measures) string { return pct(m.RequestFail) }},
	{"req fail peak", "share of requests on held streams that failed, at the worst step with enough requests", false, func(_ *sim.Result, m Measures) string { return pct(m.RequestFailPeak) }},
	{"5xx peak", "highest share of attempts and requests together answered 5xx in one step (requests outnumber attempts once the fleet holds: see att fail and req fail)", false, func(r *sim.Result, _ Measures) string { return pct(r.Summary.FiveXXPeak) }},
	{"P0 down s", "mean seconds a P0 device that was online spent without a connection", true, func(r *sim.Result, _ Measures) string { return fmt.Sprintf("%.1f", r.Summary.P0Downtime) }},
	{"top new", "largest share of a step's stream set-ups one origin received (steps with enough attempts; an even share is 1 / origins)", true, func(_ *sim.Result, m Measures) string { return pct(m.NewShare) }},
	{"conn share", "largest share of all held connections on one origin at any step holding a tenth of the peak connections", false, func(_ *sim.Result, m Measures) string { return pct(m.BusiestShare) }},
	{"peak util", "highest utilisation of an origin: its connections over its maximum", true, func(r *sim.Result, _ Measures) string { return fmt.Sprintf("%.2f", r.Summary.PeakUtilisation) }},
	{"imbalance", "highest ratio of the busiest up origin's connections to the mean of the up origins", false, func(r *sim.Result, _ Measures) string { return fmt.Sprintf("%.2f", r.Summary.PeakImbalance) }},
	{"settle s", "seconds from the last scheduled event to the step from which, to the end of the run, 99 % of the devices online hold a connection and at most 1 % of requests fail", true, func(r *sim.Result, _ Measures) string { return settle(r.Summary.TimeToSettle) }},
}

func causeCell(name string) func(*sim.Result, Measures) string {
	return func(r *sim.Result, _ Measures) string { return human(r.Summary.Errors[name]) }
}

func settle(s float64) string {
	if s < 0 {
		return "never"
	}
	return fmt.Sprintf("%.0f", s)
}

// variantLabels returns the column header and a label per run: the sweep's
// values without their keys ("full adaptive" under "backoff overload")
// when every run's name has the same keys, else the names.
func variantLabels(rs []*sim.Result) (string, []string) {
	labels := make([]string, len(rs))
	var keys []string
	same := true
	for i, r := range rs {
		var ks, vs []string
		for _, part := range strings.Fields(r.Variant) {
			k, v, ok := strings.Cut(part, "=")
			if !ok {
				same = false
			}
			ks, vs = append(ks, k), append(vs, v)
		}
		if i == 0 {
			keys = ks
		} else if strings.Join(ks, " ") != strings.Join(keys, " ") {
			same = false
		}
		labels[i] = strings.Join(vs, " ")
	}
	if !same || len(keys) == 0 {
		for i, r := range rs {
			labels[i] = r.Variant
			if labels[i] == "" {
				labels[i] = r.Scenario
			}
		}
		return "variant", labels
	}
	return strings.Join(keys, " "), labels
}

// SummaryTable returns one row per run (sweep variant). The narrow table
// (wide false) fits 100 columns: attempts, the failed share of attempts at
// peak and how long failures lasted, failed requests, P0 downtime, the
// largest share of new streams on one origin, peak utilisation and settle
// time. Wide adds devices, connections, peak attempts/s, the failed share
// of attempts over the event and the run, failures by cause, the peak of
// failed requests, the 5xx peak, the largest share of connections and
// imbalance.
func SummaryTable(rs []*sim.Result, wide bool) *table.Table {
	head, labels := variantLabels(rs)
	t := &table.Table{Header: []string{head}}
	if len(rs) > 0 {
		t.Title = "scenario " + rs[0].Scenario
	}
	var cols []column
	for _, c := range columns {
		if wide || c.narrow {
			cols = append(cols, c)
			t.Right = append(t.Right, len(t.Header))
			t.Header = append(t.Header, c.head)
		}
	}
	for i, r := range rs {
		m := Measure(r)
		row := []string{labels[i]}
		for _, c := range cols {
			row = append(row, c.cell(r, m))
		}
		t.Rows = append(t.Rows, row)
	}
	return t
}

// TenantTable returns the blast radius of a poison tenant against the
// exact maths, or nil when no run has one.
func TenantTable(rs []*sim.Result) *table.Table {
	head, labels := variantLabels(rs)
	t := &table.Table{
		Title:  "tenants other than the poison one",
		Header: []string{head, "tenants", "affected", "predicted", "fully down", "predicted"},
		Right:  []int{1, 2, 3, 4, 5},
	}
	for i, r := range rs {
		ts := r.Summary.Tenants
		if ts == nil {
			continue
		}
		t.Add(labels[i], ts.Tenants, pct(ts.Affected), pct(ts.PredictedAffected), pct(ts.FullyDown), pct(ts.PredictedFullyDown))
	}
	if len(t.Rows) == 0 {
		return nil
	}
	return t
}

// SeriesTable returns the steps of r every `every` of event time.
func SeriesTable(r *sim.Result, every time.Duration) *table.Table {
	name := r.Variant
	if name == "" {
		name = r.Scenario
	}
	t := &table.Table{
		Title:  "per step: " + name,
		Header: []string{"t s", "connected", "connecting", "waiting", "attempts/s", "successes", "att fail", "req fail", "busiest util"},
		Right:  []int{0, 1, 2, 3, 4, 5, 6, 7, 8},
	}
	k := max(1, int(every.Seconds()/r.Step))
	for i := 0; i < len(r.Steps); i += k {
		s := r.Steps[i]
		busiest := 0.0
		for _, o := range s.Origins {
			busiest = max(busiest, o.Utilisation)
		}
		t.Add(fmt.Sprintf("%.0f", s.T), human(s.Connected), human(s.Connecting), human(s.Waiting), human(int64(s.AttemptsPerSec)), human(sum(s.Successes)),
			share(failedAttempts(s), s.Attempts), share(sum(s.RequestErrors), s.Requests), fmt.Sprintf("%.2f", busiest))
	}
	return t
}

func share(n, of int64) string {
	if of == 0 {
		return "-"
	}
	return pct(float64(n) / float64(of))
}

// human prints a count with a k suffix past 10,000, M past a million and
// G past a billion.
func human(n int64) string {
	f := float64(n)
	switch {
	case n >= 10_000_000_000 || n <= -10_000_000_000:
		return fmt.Sprintf("%.1fG", f/1e9)
	case n >= 1_000_000_000 || n <= -1_000_000_000:
		return fmt.Sprintf("%.2fG", f/1e9)
	case n >= 1_000_000 || n <= -1_000_000:
		return fmt.Sprintf("%.1fM", f/1e6)
	case n >= 10_000 || n <= -10_000:
		return fmt.Sprintf("%.1fk", f/1e3)
	}
	return fmt.Sprint(n)
}

func pct(f float64) string { return fmt.Sprintf("%.1f%%", 100*f) }
