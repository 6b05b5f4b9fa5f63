package report

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/corralhq/corral/scenario"
	"github.com/corralhq/corral/sim"
)

// Verdict is one paragraph on a run, computed from its results: how many
// connection attempts failed at the worst step and for how long, the
// largest share of new streams and of connections one origin took,
// failed requests on held streams, how long P0 devices were without a
// connection and when the fleet settled.
func Verdict(r *sim.Result) string {
	m := Measure(r)
	name := r.Variant
	if name == "" {
		name = r.Scenario
	}
	var b strings.Builder
	b.WriteString(name + ": ")
	switch {
	case m.AttemptFailPeakAt < 0:
		fmt.Fprintf(&b, "no step had %s connection attempts or more", count(m.MinAttempts))
	case m.AttemptFailPeak == 0:
		b.WriteString("no connection attempt failed")
	default:
		fmt.Fprintf(&b, "%s of connection attempts failed at the worst step (%s)", pctWords(m.AttemptFailPeak), clock(m.AttemptFailPeakAt))
		if m.FailingSeconds > 0 {
			fmt.Fprintf(&b, "; more than 1 %% failed for %s", dur(m.FailingSeconds))
			if span := m.FailingTo - m.FailingFrom; span > m.FailingSeconds {
				fmt.Fprintf(&b, " between %s and %s", clock(m.FailingFrom), clock(m.FailingTo))
			}
		}
		fmt.Fprintf(&b, "; %s of all attempts failed over the run", pctWords(m.AttemptFail))
	}
	b.WriteString(". ")
	if len(r.Origins) > 1 {
		even := pctWords(1 / float64(len(r.Origins)))
		var parts []string
		if m.NewShareOrigin != "" {
			parts = append(parts, fmt.Sprintf("%s took %s of the new streams at %s", m.NewShareOrigin, pctWords(m.NewShare), clock(m.NewShareAt)))
		}
		if m.Busiest != "" {
			parts = append(parts, fmt.Sprintf("%s held up to %s of the connections (at %s)", m.Busiest, pctWords(m.BusiestShare), clock(m.BusiestAt)))
		}
		if len(parts) > 0 {
			fmt.Fprintf(&b, "Concentration: %s; an even share is %s. ", strings.Join(parts, "; "), even)
		}
		fmt.Fprintf(&b, "The fullest origin reached %s of its connection capacity. ", pctWords(r.Summary.PeakUtilisation))
	}
	if r.Summary.Requests > 0 {
		if r.Summary.RequestErrors == 0 {
			b.WriteString("No request on a held stream failed. ")
		} else {
			fmt.Fprintf(&b, "%s of the requests on held streams failed (%s at the worst step). ", pctWords(m.RequestFail), pctWords(m.RequestFailPeak))
		}
	}
	if len(r.Priorities) > 0 {
		fmt.Fprintf(&b, "%s devices were without a connection %s on average", r.Priorities[0], dur(r.Summary.P0Downtime))
	}
	if r.Summary.TimeToSettle >= 0 {
		fmt.Fprintf(&b, "; the fleet settled %s after the last scheduled event (from then on 99 %% of the devices online connected, at most 1 %% of requests failing).", dur(r.Summary.TimeToSettle))
	} else {
		fmt.Fprintf(&b, "; the fleet had not settled at the end (%s of %s devices connected", count(r.Summary.FinalConnected), count(r.Devices))
		if r.Summary.Requests > 0 {
			fmt.Fprintf(&b, ", %s of the last step's requests failing", pctWords(lastRequestFail(r)))
		}
		b.WriteString(").")
	}
	if ts := r.Summary.Tenants; ts != nil {
		fmt.Fprintf(&b, " Poison: %s of the other tenants saw a failure (shard's maths: %s), %s lost every connection (maths: %s).",
			pctWords(ts.Affected), pctWords(ts.PredictedAffected), pctWords(ts.FullyDown), pctWords(ts.PredictedFullyDown))
	}
	return b.String()
}

func lastRequestFail(r *sim.Result) float64 {
	if n := len(r.Steps); n > 0 {
		return r.Steps[n-1].RequestErrorRate
	}
	return 0
}

// Describe says what was simulated: the fleet, its origins and clients,
// the scheduled events and the sweep (read from the runs' variant names),
// one line each.
func Describe(sc *scenario.Scenario, rs []*sim.Result) []string {
	var devices int64
	if len(rs) > 0 {
		devices = rs[0].Devices
	}
	var out []string
	p := sc.Population
	var prios []string
	for _, q := range p.Priorities {
		prios = append(prios, fmt.Sprintf("%s %s", q.Name, pctWords(q.Share)))
	}
	fleet := fmt.Sprintf("Fleet: %s %s devices (%s), %s connected at the start", count(devices), protocol(p.Protocol), strings.Join(prios, ", "), count(int64(float64(p.Initial)*scale(sc))))
	if p.Tenants > 1 {
		fleet += fmt.Sprintf(", %d tenants", p.Tenants)
	}
	g := sc.Geography
	if g.PoPs > 1 {
		fleet += fmt.Sprintf("; %d points of presence (%s", g.PoPs, g.Distribution)
		if g.Distribution == "zipf" {
			fleet += " exponent " + num(g.ZipfExponent)
		}
		fleet += fmt.Sprintf("), %d edge hosts each, %d per recursive resolver.", g.HostsPerPoP, g.HostsPerResolver)
	} else {
		fleet += fmt.Sprintf("; one point of presence, %d edge hosts, %d per recursive resolver.", g.HostsPerPoP, g.HostsPerResolver)
	}
	out = append(out, fleet)
	d := sc.DNS
	dns := fmt.Sprintf("DNS: %s answers, TTL %s", d.Policy, dd(d.TTL))
	if d.Policy == "multivalue" || d.Policy == "weighted-subset" {
		dns += fmt.Sprintf(", up to %d addresses", d.MaxAnswers)
	}
	if d.Policy == "shuffle" {
		dns += fmt.Sprintf(", hands of %d", d.HandSize)
	}
	hc := "a TCP check"
	if d.HealthCheck.Kind == "stream" {
		hc = fmt.Sprintf("a stream check through the origin (answer within %s)", dd(d.HealthCheck.Timeout))
	}
	dns += fmt.Sprintf(", %s every %s (%d in a row to change).", hc, dd(d.HealthCheck.Interval), d.HealthCheck.Threshold)
	swept := func(on bool, sweep []bool) string {
		switch {
		case len(sweep) > 0:
			return "when on"
		case on:
			return "on"
		}
		return ""
	}
	if w := swept(d.Feedback.Enabled, sc.Sweep.DNSFeedback); w != "" {
		dns += fmt.Sprintf(" Load feedback (%s): the origins' load moves the weights every %s, and answers are held at most %s.", w, dd(d.Feedback.Interval), dd(d.Feedback.MaxTTL))
	}
	if w := swept(d.Resolvers.Enabled, sc.Sweep.DNSResolvers); w != "" {
		r := d.Resolvers
		by := fmt.Sprintf("%s of the queries over %s", pctWords(r.BigShare), dd(r.Window))
		if r.Audience {
			by += fmt.Sprintf(", or of the sessions its answers send (learned from the load reports, half-life %s", dd(r.HalfLife))
			if sc.Population.SessionAge > 0 {
				by += fmt.Sprintf(", over a day before the event of sessions renewed every %s", dd(sc.Population.SessionAge))
			}
			by += ")"
		}
		dns += fmt.Sprintf(" Resolver-aware answers (%s): a resolver above %s, is big and gets more addresses.", w, by)
	}
	out = append(out, dns)
	e := sc.Edge
	edge := "Edge hosts pick " + pick(e.Pick)
	if e.StreamsPerConnection > 1 {
		edge += fmt.Sprintf(", carry up to %d device streams per upstream connection (a TLS handshake at the origin only when a pool grows)", e.StreamsPerConnection)
	} else {
		edge += ", one upstream connection per device stream"
	}
	if e.Attempts > 1 {
		edge += fmt.Sprintf(", and try up to %d addresses of the answer when an origin refuses a stream at once", e.Attempts)
	}
	dns = edge + "."
	out = append(out, dns)
	for _, o := range sc.Origins {
		line := fmt.Sprintf("Origins: %d x %s", o.Count, o.Name)
		if o.Region != "" {
			line += " in " + o.Region
		}
		if o.MaxConnections > 0 {
			line += fmt.Sprintf(", %s connections each", count(int64(float64(o.MaxConnections)*scale(sc))))
		} else {
			line += fmt.Sprintf(", together %sx the devices in connections", num(o.Headroom))
		}
		line += fmt.Sprintf(", %s TLS handshakes/s each", count(int64(o.MaxNewPerSecond*scale(sc))))
		if o.MaxNewStreamsPerSecond > 0 {
			line += fmt.Sprintf(", %s stream set-ups/s each", count(int64(o.MaxNewStreamsPerSecond*scale(sc))))
		}
		if o.Backlog > 0 {
			line += fmt.Sprintf(", backlog %s", count(int64(float64(o.Backlog)*scale(sc))))
		} else {
			line += ", unbounded backlog"
		}
		line += fmt.Sprintf(", %s per set-up when idle", dd(o.HandshakeLatency))
		if o.MaxRequestsPerSecond > 0 {
			line += fmt.Sprintf(", %s requests/s each", count(int64(o.MaxRequestsPerSecond*scale(sc))))
		}
		line += "; overload: " + sc.Overload.Mode + "."
		out = append(out, line)
	}
	c := sc.Client
	client := fmt.Sprintf("Clients: %s backoff, connect timeout %s", protocol(c.Backoff.Policy), dd(c.ConnectTimeout))
	if c.RequestsPerSecond > 0 {
		client += fmt.Sprintf(", %s requests/s on each held stream", num(c.RequestsPerSecond))
	}
	if c.CatchupRequests == 0 {
		client += ", no catch-up request after a connection."
	} else if c.CatchupRequests == 1 {
		client += ", 1 catch-up request after each connection."
	} else {
		client += fmt.Sprintf(", %s catch-up requests after each connection.", num(c.CatchupRequests))
	}
	out = append(out, client)
	var ev []string
	s := scale(sc)
	for _, a := range sc.Traffic.Arrivals {
		e := fmt.Sprintf("at %s %s devices arrive", dd(a.At), count(int64(float64(a.Devices)*s)))
		if a.Over > 0 {
			e += " over " + dd(a.Over)
		}
		ev = append(ev, e)
	}
	for _, x := range sc.Traffic.Disconnects {
		e := fmt.Sprintf("at %s %s of the connections drop", dd(x.At), pctWords(x.Share))
		if x.Region != "" {
			e += " in " + x.Region
		}
		if x.Over > 0 {
			e += " over " + dd(x.Over)
		}
		ev = append(ev, e)
	}
	for _, l := range sc.Traffic.RegionLoss {
		e := fmt.Sprintf("at %s region %s goes dark", dd(l.At), l.Region)
		if l.For > 0 {
			e += " for " + dd(l.For)
		}
		ev = append(ev, e)
	}
	for _, x := range sc.Traffic.Poison {
		ev = append(ev, fmt.Sprintf("at %s tenant %d starts poison traffic", dd(x.At), x.Tenant))
	}
	if len(ev) == 0 {
		ev = append(ev, "none scheduled")
	}
	out = append(out, fmt.Sprintf("Event (%s simulated in steps of %s): %s.", dd(sc.Duration), dd(sc.Step), strings.Join(ev, "; ")))
	if sweep := sweepOf(rs); sweep != "" {
		out = append(out, "Sweep (one run per combination, each replacing the value above): "+sweep+".")
	}
	return out
}

// sweepOf lists the values each sweep key takes over the runs, in order:
// "dns weighted, multivalue; origins 6, 2".
func sweepOf(rs []*sim.Result) string {
	var keys []string
	vals := map[string][]string{}
	for _, r := range rs {
		for _, part := range strings.Fields(r.Variant) {
			k, v, ok := strings.Cut(part, "=")
			if !ok {
				continue
			}
			if _, seen := vals[k]; !seen {
				keys = append(keys, k)
			}
			if !slices.Contains(vals[k], v) {
				vals[k] = append(vals[k], v)
			}
		}
	}
	var parts []string
	for _, k := range keys {
		parts = append(parts, k+" "+strings.Join(vals[k], ", "))
	}
	return strings.Join(parts, "; ")
}

func scale(sc *scenario.Scenario) float64 {
	if sc.Scale > 0 {
		return sc.Scale
	}
	return 1
}

func protocol(p string) string {
	switch p {
	case "grpc":
		return "gRPC"
	case "websocket":
		return "WebSocket"
	}
	return p
}

func pick(p string) string {
	switch p {
	case "first":
		return "the first address of the answer"
	case "random":
		return "a random address of the answer"
	case "p2c":
		return "the less loaded of two random addresses"
	}
	return p
}

// count writes a count of things: "121 M", "1.2 k", "950".
func count(n int64) string {
	f := float64(n)
	a := max(f, -f)
	switch {
	case a >= 1e9:
		return trim(f/1e9) + " G"
	case a >= 1e6:
		return trim(f/1e6) + " M"
	case a >= 1e4:
		return trim(f/1e3) + " k"
	}
	return strconv.FormatInt(n, 10)
}

// trim writes x with three significant digits at most, no trailing zeros.
func trim(x float64) string {
	if s := strconv.FormatFloat(x, 'g', 3, 64); !strings.Contains(s, "e") {
		return s
	}
	return strconv.FormatFloat(x, 'f', 0, 64)
}

func num(x float64) string { return strconv.FormatFloat(x, 'g', 4, 64) }

// pctWords writes a share as "38 %", "0.03 %", "100 %".
func pctWords(f float64) string {
	x := 100 * f
	switch {
	case x == 0:
		return "0 %"
	case x >= 10:
		return strconv.FormatFloat(x, 'f', 0, 64) + " %"
	case x >= 1:
		return strings.TrimSuffix(strconv.FormatFloat(x, 'f', 1, 64), ".0") + " %"
	}
	return strconv.FormatFloat(x, 'g', 2, 64) + " %"
}

// dur writes seconds as "90 s" or "3 min 5 s".
func dur(s float64) string {
	if s < 120 {
		if s < 10 && s != float64(int64(s)) {
			return strconv.FormatFloat(s, 'f', 1, 64) + " s"
		}
		return strconv.FormatFloat(s, 'f', 0, 64) + " s"
	}
	r := int64(s + 0.5)
	if r%60 == 0 {
		return fmt.Sprintf("%d min", r/60)
	}
	return fmt.Sprintf("%d min %d s", r/60, r%60)
}

// dd writes a duration of the scenario: "60 ms", "20 s", "1 h".
func dd(d time.Duration) string {
	switch {
	case d < time.Second:
		return strconv.FormatInt(d.Milliseconds(), 10) + " ms"
	case d >= time.Hour && d%time.Hour == 0:
		return strconv.FormatInt(int64(d/time.Hour), 10) + " h"
	}
	return dur(d.Seconds())
}

// clock writes an event time: "t = 45 s".
func clock(t float64) string { return "t = " + dur(t) }
