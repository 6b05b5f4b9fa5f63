package authdns

import (
	"context"
	"net"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/corralhq/corral/authdns/answer"
	"github.com/corralhq/corral/internal/config"
	"github.com/corralhq/corral/internal/loadreport"
	"github.com/corralhq/corral/internal/natsutil"
)

// FeedbackConfig is load feedback: hubs and edges publish their load on
// NATS (their `load` config), and every Interval the effective weights of
// the weighted, weighted-subset and multivalue sets whose values are
// those origins move by it, within the bounds (answer.FeedbackConfig);
// the answers of those sets carry at most MaxTTL. The zero value (no
// NATS) turns it off. A change needs a restart.
type FeedbackConfig struct {
	// NATS is the NATS URL (comma-separated for a cluster); empty turns
	// feedback off.
	NATS string `yaml:"nats"`
	// Subject is the subject of the load reports (default "corral.load").
	Subject string `yaml:"subject"`
	// Interval is how often the weights move (default 1s).
	Interval time.Duration `yaml:"interval"`
	// Timeout: an origin silent this long gets its configured weight back
	// (default 5s).
	Timeout time.Duration `yaml:"timeout"`
	// Floor is the least factor of a configured weight (default 0.1),
	// Ceiling the largest (default 2), MaxStep the most the factor moves
	// per interval (default 0.25), Hysteresis the least move followed
	// (default 0.05).
	Floor      float64 `yaml:"floor"`
	Ceiling    float64 `yaml:"ceiling"`
	MaxStep    float64 `yaml:"max_step"`
	Hysteresis float64 `yaml:"hysteresis"`
	// MaxTTL is the longest TTL of the answers of the weighted,
	// weighted-subset and multivalue sets, which feedback weights: new
	// weights reach a resolver when its cached answer expires (default
	// 30s, answer.DefaultFeedbackMaxTTL, whose comment gives the
	// sources; whole seconds; a set with a shorter TTL keeps it, and a
	// cap at or above the records' TTLs leaves them as they are).
	MaxTTL time.Duration `yaml:"max_ttl"`

	// given marks the keys of zeroKeys that the file or the environment
	// sets (UnmarshalYAML, givenByEnv), so that validate refuses a 0 that
	// was written rather than left out; readConfig clears it once the
	// config is valid, so that valid configs compare by their values.
	given uint8
}

// zeroKeys are the keys of the block where 0 stands for the default, in
// the bit order of FeedbackConfig.given, with the value of each.
func (c FeedbackConfig) zeroKeys() [7]struct {
	key  string
	zero bool
	def  any
} {
	d := answer.DefaultFeedback
	return [7]struct {
		key  string
		zero bool
		def  any
	}{
		{"interval", c.Interval == 0, loadreport.DefaultInterval}, {"timeout", c.Timeout == 0, d.Timeout},
		{"floor", c.Floor == 0, d.Floor}, {"ceiling", c.Ceiling == 0, d.Ceiling},
		{"max_step", c.MaxStep == 0, d.MaxStep}, {"hysteresis", c.Hysteresis == 0, d.Hysteresis},
		{"max_ttl", c.MaxTTL == 0, d.MaxTTL},
	}
}

// UnmarshalYAML reads the block and notes the keys it sets: a zero
// field takes its default (answer.FeedbackConfig's zero value), so an
// explicit `hysteresis: 0` would silently be 0.05; validate refuses it
// instead, as the simulator's dns.feedback does.
func (c *FeedbackConfig) UnmarshalYAML(unmarshal func(any) error) error {
	type plain FeedbackConfig
	if err := unmarshal((*plain)(c)); err != nil {
		return err
	}
	var keys map[string]any
	if err := unmarshal(&keys); err != nil {
		return err
	}
	for i, k := range c.zeroKeys() {
		if v, ok := keys[k.key]; ok && v != nil {
			c.given |= 1 << i
		}
	}
	return nil
}

// givenByEnv notes the keys of the block that environment overrides set
// (prefix_FEEDBACK_KEY, as internal/config names them), as UnmarshalYAML
// does for the file's.
func (c *FeedbackConfig) givenByEnv(opts config.Options) {
	if opts.EnvPrefix == "" {
		return
	}
	env := opts.Environ
	if env == nil {
		env = os.Environ()
	}
	for i, k := range c.zeroKeys() {
		name := opts.EnvPrefix + "_FEEDBACK_" + strings.ToUpper(k.key) + "="
		if slices.ContainsFunc(env, func(kv string) bool { return strings.HasPrefix(kv, name) }) {
			c.given |= 1 << i
		}
	}
}

func (c FeedbackConfig) enabled() bool { return c.NATS != "" }

func (c FeedbackConfig) bounds() answer.FeedbackConfig {
	return answer.FeedbackConfig{Floor: c.Floor, Ceiling: c.Ceiling, MaxStep: c.MaxStep, Hysteresis: c.Hysteresis, Timeout: c.Timeout, MaxTTL: c.MaxTTL}.WithDefaults()
}

// answerTTL is the TTL, in seconds, of the answers of a set of policy p
// whose records have TTL ttl: capped at MaxTTL by answer's rule when
// feedback is on and weights p, ttl otherwise.
func (c FeedbackConfig) answerTTL(p *answer.Policy, ttl uint32) uint32 {
	if !c.enabled() {
		return ttl
	}
	return uint32(c.bounds().AnswerTTL(p, time.Duration(ttl)*time.Second) / time.Second)
}

func (c FeedbackConfig) interval() time.Duration {
	if c.Interval <= 0 {
		return loadreport.DefaultInterval
	}
	return c.Interval
}

func (c FeedbackConfig) validate(bad func(path, format string, args ...any)) {
	if c.Interval < 0 {
		bad("feedback.interval", "must not be negative, got %v", c.Interval)
	}
	if strings.ContainsAny(c.Subject, " \t\r\n") {
		bad("feedback.subject", "%q is not a NATS subject", c.Subject)
	}
	zeros := false
	for i, k := range c.zeroKeys() {
		if c.given&(1<<i) != 0 && k.zero {
			zeros = true
			bad("feedback."+k.key, "0 is not usable: it stands for the default (%v); give a positive value or remove the key", k.def)
		}
	}
	if zeros {
		return
	}
	if _, err := seconds(c.MaxTTL); err != nil {
		bad("feedback.max_ttl", "%v", err)
		return
	}
	if err := c.bounds().Validate(); err != nil {
		bad("feedback", "%s", strings.TrimPrefix(err.Error(), "answer: "))
	}
}

// feedback keeps the origins' last reports and moves the sets' weights.
// It is safe for concurrent use.
type feedback struct {
	s      *Server
	bounds answer.FeedbackConfig

	mu      sync.Mutex // guards loads
	loads   map[string]loadreport.Report
	heardAt map[string]time.Time

	factors map[string]float64 // by record value; only the tick goroutine
	view    atomic.Pointer[feedbackView]
	reports [2]atomic.Uint64 // ok, bad
}

// feedbackView is what the last tick did, for metrics and the status page.
type feedbackView struct {
	at      time.Time
	weights []weightRow
	origins []originRow
}

// weightRow is one record's effective weight, in units of its configured
// weight (multivalue records weigh 1), and the TTL its set's answers
// carry (capped by max_ttl) and is configured with, in seconds.
type weightRow struct {
	name, rtype, value, origin string
	configured, effective      float64
	ttl, configuredTTL         uint32
}

type originRow struct {
	addr, node, kind string
	load             answer.Load
	fresh            bool
}

func newFeedback(s *Server) *feedback {
	f := &feedback{s: s, bounds: s.cfg.Feedback.bounds(), loads: map[string]loadreport.Report{}, heardAt: map[string]time.Time{}, factors: map[string]float64{}}
	f.view.Store(&feedbackView{})
	return f
}

// receive records a report.
func (f *feedback) receive(m *nats.Msg) {
	r, err := loadreport.Decode(m.Data)
	if err != nil {
		f.reports[1].Add(1)
		return
	}
	f.reports[0].Add(1)
	f.mu.Lock()
	f.loads[r.Addr], f.heardAt[r.Addr] = r, f.s.now()
	f.mu.Unlock()
}

// run connects to NATS, subscribes and moves the weights every interval
// until ctx ends. A NATS that is down is retried in the background; the
// weights meanwhile fall back as the reports age.
func (f *feedback) run(ctx context.Context) {
	cfg := f.s.cfg.Feedback
	c, err := natsutil.Connect(ctx, natsutil.Config{URL: cfg.NATS}, "corral-dns", f.s.log)
	if err != nil {
		f.s.log.Error("feedback: nats", "err", err)
	} else {
		defer c.Close()
		subject := cfg.Subject
		if subject == "" {
			subject = loadreport.DefaultSubject
		}
		if _, err := c.NC.Subscribe(subject, f.receive); err != nil {
			f.s.log.Error("feedback: subscribe", "subject", subject, "err", err)
		}
	}
	t := time.NewTicker(cfg.interval())
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			f.tick(f.s.now())
		}
	}
}

// byValue returns, for each key a record value may be (an origin's
// address, and its host), the origin's load: for a host shared by several
// origins, the most loaded of those heard from within the timeout.
func (f *feedback) byValue(now time.Time) (map[string]answer.Load, map[string]string, []originRow) {
	f.mu.Lock()
	defer f.mu.Unlock()
	loads := make(map[string]answer.Load, 2*len(f.loads))
	who := make(map[string]string, 2*len(f.loads))
	var rows []originRow
	for addr, r := range f.loads {
		l := answer.Load{At: f.heardAt[addr], Sessions: r.Sessions, Capacity: r.Capacity, Inflight: r.Inflight, Limit: r.Limit, Stage: r.Stage}
		fresh := now.Sub(l.At) <= f.bounds.Timeout
		rows = append(rows, originRow{addr: addr, node: r.Node, kind: r.Kind, load: l, fresh: fresh})
		keys := []string{addr}
		if h := hostOf(addr); h != addr {
			keys = append(keys, h)
		}
		for _, k := range keys {
			old, ok := loads[k]
			oldFresh := ok && now.Sub(old.At) <= f.bounds.Timeout
			if !ok || (fresh && (!oldFresh || l.Pressure() > old.Pressure())) || (!fresh && !oldFresh && l.At.After(old.At)) {
				loads[k], who[k] = l, addr
			}
		}
	}
	slices.SortFunc(rows, func(a, b originRow) int { return strings.Compare(a.addr, b.addr) })
	return loads, who, rows
}

// tick moves every origin's factor one step (answer.FeedbackConfig.Next)
// and gives each fed set its effective weights (answer.Set.ApplyFeedback).
func (f *feedback) tick(now time.Time) {
	loads, who, origins := f.byValue(now)
	factors := make(map[string]float64, len(f.factors))
	view := &feedbackView{at: now, origins: origins}
	var w []uint32
	var fs []float64
	var learn []*rrset
	f.s.state.Load().zones.eachSet(func(set *rrset) {
		if !set.sel.Policy().Fed() {
			return
		}
		if set.learn {
			learn = append(learn, set)
		}
		base := set.sel.FeedbackBase()
		fs = fs[:0]
		for i, v := range set.values {
			fi, ok := factors[v]
			if !ok {
				prev, seen := f.factors[v]
				if !seen {
					prev = 1
				}
				fi = f.bounds.Next(prev, loads[v], now)
				factors[v] = fi
			}
			fs = append(fs, fi)
			view.weights = append(view.weights, weightRow{name: set.owner, rtype: typeName(set.rtype), value: v, origin: who[v],
				configured: float64(base[i]), effective: float64(base[i]) * fi, ttl: set.ttl, configuredTTL: set.configuredTTL})
		}
		w = set.sel.ApplyFeedback(w, fs)
	})
	f.factors = factors
	f.view.Store(view)
	if f.s.res != nil && f.s.res.aud != nil {
		f.s.res.aud.tick(learn, f.opened(), now, f.s.cfg.Feedback.interval(), f.bounds.Timeout)
	}
}

// opened returns each origin's last report of its opened sessions, for
// audience learning.
func (f *feedback) opened() []originReport {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]originReport, 0, len(f.loads))
	for addr, r := range f.loads {
		out = append(out, originReport{addr: addr, host: hostOf(addr), opened: r.Opened, at: f.heardAt[addr]})
	}
	return out
}

// hostOf returns the host of an origin's advertised address (host:port),
// or the address when it has no port: a record value matches either.
func hostOf(addr string) string {
	if h, _, err := net.SplitHostPort(addr); err == nil {
		return h
	}
	return addr
}

// eachSet calls fn with every record set of the zones.
func (zs *zoneSet) eachSet(fn func(*rrset)) {
	for _, z := range zs.zones {
		for _, n := range z.order {
			for _, set := range n.sets {
				fn(set)
			}
		}
	}
}

// typeName returns the name of a record type of the zones.
func typeName(t uint16) string {
	for name, v := range typeNames {
		if v == t {
			return name
		}
	}
	return "other"
}
