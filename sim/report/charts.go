package report

import (
	"github.com/corralhq/corral/internal/chart"
	"github.com/corralhq/corral/scenario"
	"github.com/corralhq/corral/sim"
)

// maxPoints bounds the points of one line: longer series are thinned by
// keeping the largest value of each run of steps, so peaks survive.
const maxPoints = 1200

// maxOrigins bounds the origins drawn in one chart.
const maxOrigins = 12

// Charts returns the charts of one run: devices connected (all and by
// priority), connection attempts and connections made per second, failed
// attempts per second by cause, failed requests per second, the failed
// shares of attempts and of requests, and per origin (up to 12): its share
// of the new streams, its pooled upstream connections (when edge hosts
// pool), its utilisation and the factor of its DNS weight (with load
// feedback). view is the time range shown first ([0, 0]:
// all).
func Charts(r *sim.Result, view [2]float64) []chart.Chart {
	label := r.Variant
	if label == "" {
		label = r.Scenario
	}
	steps := r.Steps
	ts, idx := thin(steps)
	line := func(name string, f func(sim.Step) float64) chart.Series {
		return chart.Series{Name: name, Values: values(steps, idx, f)}
	}
	var out []chart.Chart
	conn := chart.Chart{Title: "Devices connected: " + label, YLabel: "devices", Times: ts, View: view,
		Series: []chart.Series{line("all", func(s sim.Step) float64 { return float64(s.Connected) })}}
	for p, name := range r.Priorities {
		if len(r.Priorities) > 1 {
			conn.Series = append(conn.Series, line(name, func(s sim.Step) float64 { return float64(at(s.ConnectedByPriority, p)) }))
		}
	}
	out = append(out, conn)
	out = append(out, chart.Chart{Title: "Connection attempts: " + label, YLabel: "per second", Unit: "/s", Times: ts, View: view,
		Series: []chart.Series{
			line("attempts", func(s sim.Step) float64 { return s.AttemptsPerSec }),
			line("connections made", func(s sim.Step) float64 { return float64(sum(s.Successes)) / r.Step }),
		}})
	fails := chart.Chart{Title: "Failed connection attempts by cause: " + label, YLabel: "per second", Unit: "/s", Times: ts, View: view}
	for c, name := range r.Causes {
		if r.Summary.Errors[name] == 0 {
			continue
		}
		fails.Series = append(fails.Series, line(name, func(s sim.Step) float64 { return float64(sum(s.Errors[c])) / r.Step }))
	}
	if len(fails.Series) > 0 {
		out = append(out, fails)
	}
	if r.Summary.RequestErrors > 0 {
		out = append(out, chart.Chart{Title: "Failed requests on held streams: " + label, YLabel: "per second", Unit: "/s", Times: ts, View: view,
			Series: []chart.Series{line("failed requests", func(s sim.Step) float64 { return float64(sum(s.RequestErrors)) / r.Step })}})
	}
	minAttempts := Measure(r).MinAttempts
	attShare := line("connection attempts", attemptShare(minAttempts))
	attShare.Missing = missing(steps, idx, func(s sim.Step) bool { return s.Attempts < minAttempts })
	shares := chart.Chart{Title: "Share failed (attempts: steps with at least " + count(minAttempts) + "): " + label, YLabel: "share", Format: chart.Percent, Times: ts, View: view,
		Series: []chart.Series{attShare}}
	if r.Summary.Requests > 0 {
		shares.Series = append(shares.Series, line("requests on held streams", func(s sim.Step) float64 { return ratio(sum(s.RequestErrors), s.Requests) }))
	}
	out = append(out, shares)
	if len(r.Origins) > 1 {
		newShare := chart.Chart{Title: "Share of the new streams per origin (steps with at least " + count(minAttempts) + " attempts): " + label, YLabel: "share of set-ups", Format: chart.Percent, Times: ts, View: view}
		few := missing(steps, idx, func(s sim.Step) bool { return s.Attempts < minAttempts })
		for o, name := range r.Origins {
			if o >= maxOrigins {
				break
			}
			l := line(name, func(s sim.Step) float64 {
				if s.Attempts < minAttempts || o >= len(s.Origins) {
					return 0
				}
				var all int64
				for _, x := range s.Origins {
					all += x.Attempts
				}
				return ratio(s.Origins[o].Attempts, all)
			})
			l.Missing = few
			newShare.Series = append(newShare.Series, l)
		}
		out = append(out, newShare)
	}
	if pooled(r) {
		pool := chart.Chart{Title: "Pooled upstream connections per origin (edge hosts to origins): " + label, YLabel: "connections", Times: ts, View: view}
		for o, name := range r.Origins {
			if o >= maxOrigins {
				break
			}
			pool.Series = append(pool.Series, line(name, func(s sim.Step) float64 {
				if o < len(s.Origins) {
					return float64(s.Origins[o].Connections)
				}
				return 0
			}))
		}
		out = append(out, pool)
	}
	util := chart.Chart{Title: "Origin utilisation (connections / maximum): " + label, YLabel: "utilisation", Format: chart.Percent, Times: ts, View: view}
	for o, name := range r.Origins {
		if o >= maxOrigins {
			break
		}
		util.Series = append(util.Series, line(name, func(s sim.Step) float64 {
			if o < len(s.Origins) {
				return s.Origins[o].Utilisation
			}
			return 0
		}))
	}
	if len(util.Series) > 0 {
		out = append(out, util)
	}
	if fed(r) {
		w := chart.Chart{Title: "DNS weight factor per origin (load feedback; 1 = the configured weight): " + label, YLabel: "factor", Times: ts, View: view}
		for o, name := range r.Origins {
			if o >= maxOrigins {
				break
			}
			w.Series = append(w.Series, line(name, func(s sim.Step) float64 {
				if o < len(s.Origins) {
					return s.Origins[o].WeightFactor
				}
				return 0
			}))
		}
		out = append(out, w)
	}
	return out
}

// fed reports whether the run had load feedback on the DNS weights.
func fed(r *sim.Result) bool {
	for _, s := range r.Steps {
		for _, o := range s.Origins {
			if o.WeightFactor > 0 {
				return true
			}
		}
	}
	return false
}

// Compare returns one chart per measure with a line per run, for sweeps
// (nil for fewer than two runs): devices connected, attempts per second,
// the failed share of attempts, P0 devices connected and the busiest
// origin's utilisation. The runs must share their time steps.
func Compare(rs []*sim.Result, view [2]float64) []chart.Chart {
	if len(rs) < 2 {
		return nil
	}
	measures := []struct {
		title, y string
		format   chart.Format
		unit     string
		f        func(sim.Step) float64
	}{
		{"Devices connected, by variant", "devices", chart.SI, "", func(s sim.Step) float64 { return float64(s.Connected) }},
		{"Connection attempts, by variant", "per second", chart.SI, "/s", func(s sim.Step) float64 { return s.AttemptsPerSec }},
		{"Share of connection attempts failed (steps with enough attempts), by variant", "share", chart.Percent, "", nil},
		{"P0 devices connected, by variant", "devices", chart.SI, "", func(s sim.Step) float64 { return float64(at(s.ConnectedByPriority, 0)) }},
		{"Busiest origin's utilisation, by variant", "utilisation", chart.Percent, "", busiestUtil},
	}
	// The longest run sets the times; a shorter one (stopped on recovery)
	// holds its last value.
	longest := rs[0]
	for _, r := range rs {
		if len(r.Steps) > len(longest.Steps) {
			longest = r
		}
	}
	ts, idx := thin(longest.Steps)
	var out []chart.Chart
	for _, m := range measures {
		c := chart.Chart{Title: m.title + ": " + rs[0].Scenario, YLabel: m.y, Format: m.format, Unit: m.unit, Times: ts, View: view}
		for _, r := range rs {
			name := r.Variant
			if name == "" {
				name = r.Scenario
			}
			line := chart.Series{Name: name}
			if m.f != nil {
				line.Values = values(r.Steps, idx, m.f)
			} else { // the failed share of attempts
				min := Measure(r).MinAttempts
				line.Values = values(r.Steps, idx, attemptShare(min))
				line.Missing = missing(r.Steps, idx, func(s sim.Step) bool { return s.Attempts < min })
			}
			c.Series = append(c.Series, line)
		}
		out = append(out, c)
	}
	return out
}

// pooled reports whether edge hosts pooled device streams over fewer
// upstream connections at some step.
func pooled(r *sim.Result) bool {
	for _, s := range r.Steps {
		for _, o := range s.Origins {
			if o.Connections != o.Connected {
				return true
			}
		}
	}
	return false
}

func busiestUtil(s sim.Step) float64 {
	b := 0.0
	for _, o := range s.Origins {
		b = max(b, o.Utilisation)
	}
	return b
}

// View returns the part of the runs where things happen: from a little
// before the first scheduled event to a while after the last step where
// connection attempts failed or were above a hundredth of their peak;
// [0, 0] (all) when that is most of the run. (Requests failing on held
// streams at a steady rate are a state, not an event: the charts show it
// at any time.)
func View(sc *scenario.Scenario, rs []*sim.Result) [2]float64 {
	first, end := -1.0, 0.0
	if sc != nil {
		for _, at := range eventTimes(sc) {
			if first < 0 || at < first {
				first = at
			}
		}
	}
	last := -1.0
	for _, r := range rs {
		if n := len(r.Steps); n > 0 {
			end = max(end, r.Steps[n-1].T+r.Step)
		}
		for _, s := range r.Steps {
			if failedAttempts(s) > 0 || s.AttemptsPerSec > r.Summary.PeakAttemptsSec/100 {
				last = max(last, s.T)
			}
		}
	}
	if first < 0 || last < 0 || end <= 0 {
		return [2]float64{}
	}
	from := max(0, first-max(10, 0.1*(last-first)))
	to := min(end, last+max(30, 0.25*(last-first)))
	if to-from > 0.7*end || to <= from {
		return [2]float64{}
	}
	return [2]float64{from, to}
}

// eventTimes lists when sc's scheduled events start, in seconds.
func eventTimes(sc *scenario.Scenario) []float64 {
	var out []float64
	for _, a := range sc.Traffic.Arrivals {
		out = append(out, a.At.Seconds())
	}
	for _, d := range sc.Traffic.Disconnects {
		out = append(out, d.At.Seconds())
	}
	for _, l := range sc.Traffic.RegionLoss {
		out = append(out, l.At.Seconds())
	}
	for _, p := range sc.Traffic.Poison {
		out = append(out, p.At.Seconds())
	}
	return out
}

// thin returns the times of the points kept and, for each, the first step
// of its run of steps.
func thin(steps []sim.Step) ([]float64, []int) {
	every := max(1, (len(steps)+maxPoints-1)/maxPoints)
	ts := make([]float64, 0, len(steps)/every+1)
	idx := make([]int, 0, cap(ts))
	for i := 0; i < len(steps); i += every {
		ts = append(ts, steps[i].T)
		idx = append(idx, i)
	}
	return ts, idx
}

// values samples f at the points idx (see thin), keeping the largest value
// of each run of steps; a point past the end of steps holds the last
// step's value.
func values(steps []sim.Step, idx []int, f func(sim.Step) float64) []float64 {
	out := make([]float64, len(idx))
	if len(steps) == 0 {
		return out
	}
	for k, i := range idx {
		if i >= len(steps) {
			out[k] = f(steps[len(steps)-1])
			continue
		}
		end := len(steps)
		if k+1 < len(idx) {
			end = min(end, idx[k+1])
		}
		best := f(steps[i])
		for j := i + 1; j < end; j++ {
			best = max(best, f(steps[j]))
		}
		out[k] = best
	}
	return out
}

// missing marks the points idx (see thin) whose whole run of steps is
// gone: a point stays if any of its steps has a value.
func missing(steps []sim.Step, idx []int, gone func(sim.Step) bool) []bool {
	out := make([]bool, len(idx))
	for k, i := range idx {
		end := len(steps)
		if k+1 < len(idx) {
			end = min(end, idx[k+1])
		}
		out[k] = true
		for j := i; j < end; j++ {
			if !gone(steps[j]) {
				out[k] = false
				break
			}
		}
	}
	return out
}

// attemptShare is the failed share of a step's attempts, 0 in a step with
// fewer than min attempts (those points are marked missing; a thinned
// point takes the largest share of its steps that have enough).
func attemptShare(min int64) func(sim.Step) float64 {
	return func(s sim.Step) float64 {
		if s.Attempts < min {
			return 0
		}
		return s.AttemptErrorRate
	}
}

func ratio(n, of int64) float64 {
	if of == 0 {
		return 0
	}
	return float64(n) / float64(of)
}

func at(xs []int64, i int) int64 {
	if i < len(xs) {
		return xs[i]
	}
	return 0
}
