package scenario

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/goccy/go-yaml/ast"
	"github.com/goccy/go-yaml/parser"

	"github.com/corralhq/corral/authdns/answer"
	"github.com/corralhq/corral/backoff"
	"github.com/corralhq/corral/internal/config"
)

// maxDevices bounds every count of devices and every capacity: counts stay
// exact in float64 arithmetic far below it.
const maxDevices = 1e12

// Names accepted by the enumerated fields.
var (
	protocols     = []string{"grpc", "websocket"}
	distributions = []string{"zipf", "explicit"}
	picks         = []string{"first", "random", "p2c"}
	modes         = []string{"errors", "adaptive"}
	algorithms    = []string{"gradient", "vegas", "aimd", "fixed"}
	signals       = []string{"kill", "stop"}
)

// WithDefaults fills every absent field that has a default (see the field
// documentation). A key the file sets keeps its value, zero included: only
// a key the file leaves out takes its default, and Validate refuses an
// explicit zero that is not usable. On a Scenario built in code (not read
// by Load or Decode) every zero field counts as absent. It is idempotent.
func (s *Scenario) WithDefaults() {
	orDefault(s, "seed", &s.Seed, 1)
	orDefault(s, "step", &s.Step, time.Second)
	orDefault(s, "scale", &s.Scale, 1)
	p := &s.Population
	orDefault(s, "population.protocol", &p.Protocol, "grpc")
	if len(p.Priorities) == 0 && !s.has("population.priorities") {
		p.Priorities = []Priority{{Name: "P0", Share: 1}}
	}
	orDefault(s, "population.tenants", &p.Tenants, 1)
	orDefault(s, "population.channels", &p.Channels, 1)
	for i := range s.Traffic.MassClose {
		orDefault(s, fmt.Sprintf("traffic.mass_close[%d].origins", i), &s.Traffic.MassClose[i].Origins, 1)
	}
	for i := range s.Traffic.Kill {
		orDefault(s, fmt.Sprintf("traffic.kill[%d].origins", i), &s.Traffic.Kill[i].Origins, 1)
		orDefault(s, fmt.Sprintf("traffic.kill[%d].signal", i), &s.Traffic.Kill[i].Signal, "kill")
	}
	for i := range s.Traffic.Unhealthy {
		orDefault(s, fmt.Sprintf("traffic.unhealthy[%d].origins", i), &s.Traffic.Unhealthy[i].Origins, 1)
	}
	g := &s.Geography
	orDefault(s, "geography.pops", &g.PoPs, 1)
	orDefault(s, "geography.distribution", &g.Distribution, "zipf")
	orDefault(s, "geography.zipf_exponent", &g.ZipfExponent, 1)
	orDefault(s, "geography.hosts_per_pop", &g.HostsPerPoP, 1)
	orDefault(s, "geography.hosts_per_resolver", &g.HostsPerResolver, g.HostsPerPoP)
	d := &s.DNS
	orDefault(s, "dns.ttl", &d.TTL, 60*time.Second)
	orDefault(s, "dns.max_answers", &d.MaxAnswers, 8)
	orDefault(s, "dns.health_check.interval", &d.HealthCheck.Interval, 10*time.Second)
	orDefault(s, "dns.health_check.threshold", &d.HealthCheck.Threshold, 3)
	orDefault(s, "dns.health_check.kind", &d.HealthCheck.Kind, "tcp")
	orDefault(s, "dns.health_check.timeout", &d.HealthCheck.Timeout, 2*time.Second)
	fb, fd := &d.Feedback, answer.DefaultFeedback
	orDefault(s, "dns.feedback.interval", &fb.Interval, time.Second)
	orDefault(s, "dns.feedback.floor", &fb.Floor, fd.Floor)
	orDefault(s, "dns.feedback.ceiling", &fb.Ceiling, fd.Ceiling)
	orDefault(s, "dns.feedback.max_step", &fb.MaxStep, fd.MaxStep)
	orDefault(s, "dns.feedback.hysteresis", &fb.Hysteresis, fd.Hysteresis)
	orDefault(s, "dns.feedback.timeout", &fb.Timeout, fd.Timeout)
	orDefault(s, "dns.feedback.max_ttl", &fb.MaxTTL, fd.MaxTTL)
	orDefault(s, "dns.resolvers.window", &d.Resolvers.Window, answer.DefaultClassWindow)
	orDefault(s, "dns.resolvers.big_share", &d.Resolvers.BigShare, answer.DefaultBigShare)
	orDefault(s, "dns.resolvers.half_life", &d.Resolvers.HalfLife, answer.DefaultAudienceHalfLife)
	orDefault(s, "edge.pick", &s.Edge.Pick, "first")
	orDefault(s, "edge.streams_per_connection", &s.Edge.StreamsPerConnection, 1)
	orDefault(s, "edge.attempts", &s.Edge.Attempts, 1)
	for i := range s.Origins {
		o := &s.Origins[i]
		path := fmt.Sprintf("origins[%d].", i)
		orDefault(s, path+"count", &o.Count, 1)
		orDefault(s, path+"weight", &o.Weight, 1)
		orDefault(s, path+"handshake_latency", &o.HandshakeLatency, 50*time.Millisecond)
		orDefault(s, path+"name", &o.Name, fmt.Sprintf("origin%d", i+1))
	}
	orDefault(s, "overload.mode", &s.Overload.Mode, "errors")
	orDefault(s, "overload.algorithm", &s.Overload.Algorithm, "gradient")
	orDefault(s, "overload.retry_after", &s.Overload.RetryAfter, 5*time.Second)
	orDefault(s, "overload.target", &s.Overload.Target, 250*time.Millisecond)
	orDefault(s, "client.connect_timeout", &s.Client.ConnectTimeout, 10*time.Second)
	orDefault(s, "client.catchup_requests", &s.Client.CatchupRequests, 1)
	orDefault(s, "sim.quantiles", &s.Sim.Quantiles, 64)
	orDefault(s, "sim.draws", &s.Sim.Draws, 1)
}

// Validate reports every bad value of s, with the key path of each (so
// Load can name its line). It checks a copy with defaults filled, so it may
// be called before or after WithDefaults.
func (s *Scenario) Validate() error {
	c := *s
	c.Origins = append([]Origin(nil), s.Origins...)
	c.Population.Priorities = append([]Priority(nil), s.Population.Priorities...)
	c.Traffic.MassClose = append([]MassClose(nil), s.Traffic.MassClose...)
	c.Traffic.Kill = append([]Kill(nil), s.Traffic.Kill...)
	c.Traffic.Unhealthy = append([]Unhealthy(nil), s.Traffic.Unhealthy...)
	c.WithDefaults()
	var errs []error
	bad := func(path, format string, args ...any) {
		errs = append(errs, config.Errorf(path, format, args...))
	}
	if c.Duration <= 0 {
		bad("duration", "must be positive (how much event time to simulate)")
	}
	if c.Step <= 0 {
		bad("step", "must be positive, got %v", c.Step)
	} else if c.Duration > 0 && c.Duration/c.Step > 10_000_000 {
		bad("step", "%v over %v is more than 10,000,000 steps", c.Step, c.Duration)
	}
	if !(c.Scale > 0) || math.IsInf(c.Scale, 0) || c.Scale > 1 {
		bad("scale", "must be in (0, 1], got %v", c.Scale)
	}
	p := c.Population
	if p.Devices <= 0 || p.Devices > maxDevices {
		bad("population.devices", "must be in [1, %d], got %d", int64(maxDevices), p.Devices)
	}
	if p.Initial < 0 {
		bad("population.initial", "must not be negative, got %d", p.Initial)
	}
	oneOf(&errs, "population.protocol", p.Protocol, protocols)
	sum := 0.0
	for i, pr := range p.Priorities {
		if !(pr.Share > 0 && pr.Share <= 1) {
			bad(fmt.Sprintf("population.priorities[%d].share", i), "must be in (0, 1], got %v", pr.Share)
		}
		if pr.Name == "" {
			bad(fmt.Sprintf("population.priorities[%d].name", i), "is required")
		}
		sum += pr.Share
	}
	if len(p.Priorities) == 0 {
		bad("population.priorities", "needs at least one class (remove the key for one class P0)")
	} else if math.Abs(sum-1) > 1e-9 {
		bad("population.priorities", "shares add up to %v, want 1", sum)
	}
	if p.Tenants < 1 || p.Tenants > 100_000 {
		bad("population.tenants", "must be in [1, 100000], got %d", p.Tenants)
	}
	if p.Channels < 1 || p.Channels > 128 {
		bad("population.channels", "must be in [1, 128], got %d", p.Channels)
	}
	total := p.Initial
	for i, a := range c.Traffic.Arrivals {
		path := fmt.Sprintf("traffic.arrivals[%d]", i)
		if a.Devices <= 0 {
			bad(path+".devices", "must be positive, got %d", a.Devices)
		}
		if a.At < 0 || a.Over < 0 {
			bad(path, "at and over must not be negative")
		}
		total += a.Devices
	}
	if p.Devices > 0 && total > p.Devices {
		bad("population.devices", "%d is below initial plus arrivals (%d)", p.Devices, total)
	}
	c.Target.validate(bad)
	c.Geography.validate(bad)
	c.DNS.validate(bad, len(c.Origins))
	c.validateFeedback(bad)
	c.validateResolvers(bad)
	oneOf(&errs, "edge.pick", c.Edge.Pick, picks)
	if c.Edge.StreamsPerConnection < 1 || c.Edge.StreamsPerConnection > 1_000_000 {
		bad("edge.streams_per_connection", "must be in [1, 1000000], got %d", c.Edge.StreamsPerConnection)
	}
	if c.Edge.Attempts < 1 || c.Edge.Attempts > 8 {
		bad("edge.attempts", "must be in [1, 8], got %d", c.Edge.Attempts)
	}
	regions := map[string]bool{}
	if len(c.Origins) == 0 {
		bad("origins", "at least one origin group is required")
	}
	for i, o := range c.Origins {
		o.validate(bad, fmt.Sprintf("origins[%d]", i))
		if k := fmt.Sprintf("origins[%d].teardown_per_second", i); c.has(k) && o.TeardownPerSecond == 0 {
			bad(k, "must be positive (the sessions one origin ends per second; leave the key out for a teardown that costs nothing)")
		}
		if c.Edge.StreamsPerConnection > 1 && o.MaxNewStreamsPerSecond == 0 {
			bad(fmt.Sprintf("origins[%d].max_new_streams_per_second", i), "is required with edge.streams_per_connection above 1 (over pooled connections a device costs the origin a stream set-up, not a handshake)")
		}
		if o.Name == "" {
			bad(fmt.Sprintf("origins[%d].name", i), "must not be empty (remove the key for origin%d)", i+1)
		}
		regions[o.Region] = true
	}
	oneOf(&errs, "overload.mode", c.Overload.Mode, modes)
	oneOf(&errs, "overload.algorithm", c.Overload.Algorithm, algorithms)
	if c.Overload.RetryAfter <= 0 {
		bad("overload.retry_after", "must be positive (the least retry-after hint), got %v", c.Overload.RetryAfter)
	}
	if c.Overload.Target <= 0 {
		bad("overload.target", "must be positive (the handshake latency the shedder holds to), got %v", c.Overload.Target)
	}
	if err := c.Client.Backoff.Validate(); err != nil {
		bad("client.backoff", "%s", strings.TrimPrefix(err.Error(), "backoff: "))
	}
	c.explicitZeroBackoff(bad)
	if c.Client.ConnectTimeout <= 0 {
		bad("client.connect_timeout", "must be positive")
	}
	if !(c.Client.RequestsPerSecond >= 0) || !(c.Client.CatchupRequests >= 0) || c.Client.RequestsPerSecond > 1e6 || c.Client.CatchupRequests > 1e6 {
		bad("client", "requests_per_second and catchup_requests must be in [0, 1e6]")
	}
	for i, d := range c.Traffic.Disconnects {
		path := fmt.Sprintf("traffic.disconnects[%d]", i)
		if !(d.Share > 0 && d.Share <= 1) {
			bad(path+".share", "must be in (0, 1], got %v", d.Share)
		}
		if d.Region != "" && !regions[d.Region] {
			bad(path+".region", "no origin group is in region %q", d.Region)
		}
	}
	for i, r := range c.Traffic.RegionLoss {
		if !regions[r.Region] || r.Region == "" {
			bad(fmt.Sprintf("traffic.region_loss[%d].region", i), "no origin group is in region %q", r.Region)
		}
	}
	for i, q := range c.Traffic.Poison {
		if q.Tenant < 0 || q.Tenant >= p.Tenants {
			bad(fmt.Sprintf("traffic.poison[%d].tenant", i), "must be in [0, %d), got %d", p.Tenants, q.Tenant)
		}
	}
	for i, pu := range c.Traffic.Publish {
		path := fmt.Sprintf("traffic.publish[%d]", i)
		if pu.At < 0 || pu.For <= 0 {
			bad(path, "at must not be negative and for must be positive")
		}
		if !(pu.PerSecond > 0) || pu.PerSecond > 1e6 {
			bad(path+".per_second", "must be in (0, 1e6], got %v", pu.PerSecond)
		}
		if !slices.ContainsFunc(p.Priorities, func(q Priority) bool { return q.Name == pu.Priority }) {
			bad(path+".priority", "%q is not a class of population.priorities", pu.Priority)
		} else if slices.IndexFunc(p.Priorities, func(q Priority) bool { return q.Name == pu.Priority }) > 2 {
			bad(path+".priority", "%q is past the third class: messages have three priorities (P0, P1, P2)", pu.Priority)
		}
	}
	for i, m := range c.Traffic.MassClose {
		path := fmt.Sprintf("traffic.mass_close[%d]", i)
		if m.At < 0 {
			bad(path+".at", "must not be negative")
		}
		if m.Origins < 1 || m.Origins > 10_000 {
			bad(path+".origins", "must be in [1, 10000], got %d", m.Origins)
		}
	}
	for i, k := range c.Traffic.Kill {
		path := fmt.Sprintf("traffic.kill[%d]", i)
		if k.At < 0 {
			bad(path+".at", "must not be negative")
		}
		if k.Origins < 1 || k.Origins > 10_000 {
			bad(path+".origins", "must be in [1, 10000], got %d", k.Origins)
		}
		oneOf(&errs, path+".signal", k.Signal, signals)
		if k.For < 0 {
			bad(path+".for", "must not be negative")
		} else if k.For > 0 && k.Signal == "kill" {
			bad(path+".for", "applies to signal stop only (a killed process does not come back within the run)")
		}
	}
	for i, u := range c.Traffic.Unhealthy {
		path := fmt.Sprintf("traffic.unhealthy[%d]", i)
		if u.At < 0 || u.For < 0 {
			bad(path, "at and for must not be negative")
		}
		if u.Origins < 1 || u.Origins > 10_000 {
			bad(path+".origins", "must be in [1, 10000], got %d", u.Origins)
		}
	}
	for i, m := range c.Traffic.Move {
		path := fmt.Sprintf("traffic.move[%d]", i)
		if m.At < 0 {
			bad(path+".at", "must not be negative")
		}
		if m.From == "" || !regions[m.From] {
			bad(path+".from", "no origin group is in region %q", m.From)
		}
		if m.To == "" || !regions[m.To] {
			bad(path+".to", "no origin group is in region %q", m.To)
		} else if m.To == m.From {
			bad(path+".to", "is the region the devices move from")
		}
	}
	if c.Stop.MaxAttempts < 0 {
		bad("stop.max_attempts", "must not be negative")
	}
	for i, b := range c.Sweep.Backoff {
		if _, err := backoff.Parse(b); err != nil {
			bad(fmt.Sprintf("sweep.backoff[%d]", i), "%s", strings.TrimPrefix(err.Error(), "backoff: "))
		}
	}
	for i, m := range c.Sweep.Overload {
		oneOf(&errs, fmt.Sprintf("sweep.overload[%d]", i), m, modes)
	}
	for i, pol := range c.Sweep.DNSPolicy {
		d := c.DNS
		d.Policy = pol
		var polErrs []error
		d.validate(func(path, format string, args ...any) {
			if path == "dns.policy" {
				polErrs = append(polErrs, config.Errorf(fmt.Sprintf("sweep.dns_policy[%d]", i), format, args...))
			}
		}, len(c.Origins))
		errs = append(errs, polErrs...)
	}
	for i, n := range c.Sweep.OriginCount {
		if n < 1 {
			bad(fmt.Sprintf("sweep.origin_count[%d]", i), "must be at least 1, got %d", n)
		}
	}
	if c.Sim.Quantiles < 1 || c.Sim.Quantiles > 4096 {
		bad("sim.quantiles", "must be in [1, 4096], got %d", c.Sim.Quantiles)
	}
	if c.Sim.Draws < 1 || c.Sim.Draws > 1000 {
		bad("sim.draws", "must be in [1, 1000], got %d", c.Sim.Draws)
	}
	return errors.Join(errs...)
}

func (g Geography) validate(bad func(string, string, ...any)) {
	if g.PoPs < 1 || g.PoPs > 10_000 {
		bad("geography.pops", "must be in [1, 10000], got %d", g.PoPs)
	}
	switch g.Distribution {
	case "zipf":
		if !(g.ZipfExponent >= 0) || g.ZipfExponent > 10 {
			bad("geography.zipf_exponent", "must be in [0, 10], got %v", g.ZipfExponent)
		}
		if len(g.Shares) > 0 {
			bad("geography.shares", "applies only to the explicit distribution")
		}
	case "explicit":
		if len(g.Shares) != g.PoPs {
			bad("geography.shares", "has %d shares for %d pops", len(g.Shares), g.PoPs)
		}
		sum := 0.0
		for _, v := range g.Shares {
			if !(v >= 0) {
				bad("geography.shares", "share %v is negative", v)
			}
			sum += v
		}
		if math.Abs(sum-1) > 1e-9 {
			bad("geography.shares", "add up to %v, want 1", sum)
		}
	default:
		bad("geography.distribution", "unknown %q (want one of %s)", g.Distribution, strings.Join(distributions, ", "))
	}
	if g.HostsPerPoP < 1 || g.HostsPerPoP > 100_000 {
		bad("geography.hosts_per_pop", "must be in [1, 100000], got %d", g.HostsPerPoP)
	}
	if g.HostsPerResolver < 1 || g.HostsPerResolver > g.HostsPerPoP {
		bad("geography.hosts_per_resolver", "must be in [1, hosts_per_pop], got %d", g.HostsPerResolver)
	}
}

// dnsPolicies are the policies of authdns/answer that sim runs: those that
// need no client location (sim does not model client addresses).
func dnsPolicies() []string {
	var out []string
	for _, p := range answer.Policies() {
		if !p.Uses(answer.FieldLocation) {
			out = append(out, p.String())
		}
	}
	return out
}

func (d DNS) validate(bad func(string, string, ...any), groups int) {
	pol, err := answer.ParsePolicy(d.Policy)
	switch {
	case err != nil || d.Policy == "":
		bad("dns.policy", "unknown %q (want one of %s)", d.Policy, strings.Join(dnsPolicies(), ", "))
	case pol.Uses(answer.FieldLocation):
		bad("dns.policy", "%s answers by client location, which the simulator does not model (want one of %s)", d.Policy, strings.Join(dnsPolicies(), ", "))
	}
	shuffle := err == nil && pol.Uses(answer.FieldDealer)
	if d.TTL < 0 {
		bad("dns.ttl", "must not be negative")
	}
	if d.MaxAnswers < 1 || d.MaxAnswers > 64 {
		bad("dns.max_answers", "must be in [1, 64], got %d", d.MaxAnswers)
	}
	if shuffle && d.HandSize < 1 {
		bad("dns.hand_size", "the shuffle policy needs a hand size of at least 1")
	}
	if d.Spill < 0 {
		bad("dns.spill", "must not be negative")
	}
	if !shuffle && (d.HandSize != 0 || d.Spill != 0) {
		bad("dns.hand_size", "hand_size and spill apply only to the shuffle policy")
	}
	if d.HealthCheck.Interval <= 0 || d.HealthCheck.Threshold < 1 {
		bad("dns.health_check", "interval must be positive and threshold at least 1")
	}
	if d.HealthCheck.Kind != "tcp" && d.HealthCheck.Kind != "stream" {
		bad("dns.health_check.kind", "unknown %q (want tcp or stream)", d.HealthCheck.Kind)
	}
	if d.HealthCheck.Timeout <= 0 {
		bad("dns.health_check.timeout", "must be positive, got %v", d.HealthCheck.Timeout)
	}
}

// feedbackKeys are the keys of dns.feedback besides enabled.
var feedbackKeys = []string{"interval", "floor", "ceiling", "max_step", "hysteresis", "timeout", "max_ttl"}

// validateFeedback checks dns.feedback (s has its defaults): the bounds
// as authdns/answer checks them, an explicit 0 that authdns would read as
// its default, and that feedback is on (or swept on) for a policy it
// weights when the section sets anything.
func (s *Scenario) validateFeedback(bad func(string, string, ...any)) {
	f, d := s.DNS.Feedback, answer.DefaultFeedback
	on := f.Enabled || slices.Contains(s.Sweep.DNSFeedback, true) || s.feedbackSwept
	if (on || s.has("dns.feedback.interval")) && s.Step > 0 && (f.Interval < s.Step || f.Interval%s.Step != 0) {
		bad("dns.feedback.interval", "must be a whole number of steps (step %v): the weights move at a step, got %v", s.Step, f.Interval)
	}
	zeros := false
	for _, z := range []struct {
		key  string
		zero bool
		def  any
	}{
		{"floor", f.Floor == 0, d.Floor}, {"ceiling", f.Ceiling == 0, d.Ceiling}, {"max_step", f.MaxStep == 0, d.MaxStep},
		{"hysteresis", f.Hysteresis == 0, d.Hysteresis}, {"timeout", f.Timeout == 0, d.Timeout},
		{"max_ttl", f.MaxTTL == 0, d.MaxTTL},
	} {
		if z.zero {
			zeros = true
			bad("dns.feedback."+z.key, "0 is not usable: authdns's feedback reads 0 as its default (%v); give a positive value or remove the key", z.def)
		}
	}
	if f.MaxTTL%time.Second != 0 {
		bad("dns.feedback.max_ttl", "must be whole seconds, as authdns serves TTLs, got %v", f.MaxTTL)
	}
	if !zeros {
		cfg := answer.FeedbackConfig{Floor: f.Floor, Ceiling: f.Ceiling, MaxStep: f.MaxStep, Hysteresis: f.Hysteresis, Timeout: f.Timeout, MaxTTL: f.MaxTTL}
		if err := cfg.Validate(); err != nil {
			for _, line := range strings.Split(err.Error(), "\n") {
				bad("dns.feedback", "%s", strings.TrimPrefix(line, "answer: feedback "))
			}
		}
	}
	if !on {
		var set []string
		for _, k := range feedbackKeys {
			if s.has("dns.feedback." + k) {
				set = append(set, k)
			}
		}
		if len(set) > 0 {
			bad("dns.feedback.enabled", "is off while dns.feedback sets %s: turn it on (enabled: true, or sweep.dns_feedback) or remove them", strings.Join(set, ", "))
		}
		return
	}
	notFed := func(path, policy string) {
		if p, err := answer.ParsePolicy(policy); err == nil && !p.Fed() {
			bad(path, "the %s policy is not weighted by load feedback, which dns.feedback turns on (only weighted, weighted-subset and multivalue are)", policy)
		}
	}
	if len(s.Sweep.DNSPolicy) == 0 {
		notFed("dns.policy", s.DNS.Policy)
	}
	for i, p := range s.Sweep.DNSPolicy {
		notFed(fmt.Sprintf("sweep.dns_policy[%d]", i), p)
	}
}

func (o Origin) validate(bad func(string, string, ...any), path string) {
	if o.Count < 1 || o.Count > 10_000 {
		bad(path+".count", "must be in [1, 10000], got %d", o.Count)
	}
	if o.Weight < 0 {
		bad(path+".weight", "must not be negative")
	}
	switch {
	case o.MaxConnections > 0 && o.Headroom > 0:
		bad(path+".headroom", "set max_connections or headroom, not both")
	case o.MaxConnections < 0 || o.Headroom < 0 || math.IsNaN(o.Headroom) || o.MaxConnections > maxDevices || o.Headroom > 1000:
		bad(path, "max_connections must be in [0, %d] and headroom in [0, 1000]", int64(maxDevices))
	case o.MaxConnections == 0 && o.Headroom == 0:
		bad(path+".max_connections", "set max_connections or headroom (the capacity is an input)")
	}
	if !(o.MaxNewPerSecond > 0) || o.MaxNewPerSecond > maxDevices {
		bad(path+".max_new_per_second", "must be in (0, %d], got %v", int64(maxDevices), o.MaxNewPerSecond)
	}
	if !(o.MaxNewStreamsPerSecond >= 0) || o.MaxNewStreamsPerSecond > maxDevices {
		bad(path+".max_new_streams_per_second", "must be in [0, %d], got %v", int64(maxDevices), o.MaxNewStreamsPerSecond)
	}
	if o.Backlog < 0 || o.Backlog > maxDevices {
		bad(path+".backlog", "must be in [0, %d]", int64(maxDevices))
	}
	if o.HandshakeLatency < 0 {
		bad(path+".handshake_latency", "must not be negative")
	}
	if !(o.MaxRequestsPerSecond >= 0) || o.MaxRequestsPerSecond > 1e15 {
		bad(path+".max_requests_per_second", "must be in [0, 1e15]")
	}
	if !(o.TeardownPerSecond >= 0) || o.TeardownPerSecond > maxDevices {
		bad(path+".teardown_per_second", "must be in (0, %d], got %v", int64(maxDevices), o.TeardownPerSecond)
	}
}

func oneOf(errs *[]error, path, v string, allowed []string) {
	if !slices.Contains(allowed, v) {
		*errs = append(*errs, config.Errorf(path, "unknown %q (want one of %s)", v, strings.Join(allowed, ", ")))
	}
}

// outcomeWords are key fragments that would set an outcome rather than an
// input. A key holding one is refused with its line, even inside a section
// that would otherwise report it as merely unknown.
var outcomeWords = []string{
	"error_rate", "errors_per", "failure_rate", "fail_rate", "success_rate",
	"drop_rate", "loss_rate", "shed_rate", "timeout_rate", "reject_rate",
	"5xx", "availability", "downtime", "utilisation", "utilization",
	"imbalance", "outcome", "expected_", "target_",
}

// rejectOutcomes refuses a file with a key that sets an outcome.
func rejectOutcomes(name string, data []byte) error {
	file, err := parser.ParseBytes(data, 0)
	if err != nil {
		return nil // config.Decode reports the syntax error with its line
	}
	var errs []error
	for _, doc := range file.Docs {
		if doc.Body == nil {
			continue
		}
		ast.Walk(visitor(func(n ast.Node) {
			mv, ok := n.(*ast.MappingValueNode)
			if !ok {
				return
			}
			tok := mv.Key.GetToken()
			if tok == nil {
				return
			}
			key := strings.ToLower(tok.Value)
			for _, w := range outcomeWords {
				if strings.Contains(key, w) {
					errs = append(errs, fmt.Errorf("scenario: %s:%d:%d: %q would set an outcome; outcomes come from capacities and policies, never from the scenario", name, tok.Position.Line, tok.Position.Column, tok.Value))
					return
				}
			}
		}), doc.Body)
	}
	return errors.Join(errs...)
}

type visitor func(ast.Node)

func (v visitor) Visit(n ast.Node) ast.Visitor {
	v(n)
	return v
}

// retune returns c with its policy replaced by name, dropping the
// parameters name does not accept.
func retune(c backoff.Config, name string) backoff.Config {
	c.Policy = name
	if name == backoff.PolicyNone {
		c.Multiplier = 0
	}
	if name != backoff.PolicyGRPC {
		c.Jitter = 0
	}
	return c
}
