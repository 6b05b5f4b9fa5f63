package kraken

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/corralhq/corral/backoff"
	"github.com/corralhq/corral/scenario"
)

// plan is a scenario turned into what this process drives: counts scaled,
// priorities and tenants dealt, events in time order.
type plan struct {
	name           string
	duration       time.Duration
	seed           uint64
	devices        int
	initial        int
	waves          []wave
	prio           []uint8 // per device
	tenants        int
	channels       int
	backoff        backoff.Config
	connectTimeout time.Duration
	storms         []stormEvent // by time
	regions        []string     // region names, in file order (Config.Regions set)
	region         []uint8      // per device: its home region (Config.Regions set)
	publishes      []publishStream
	stop           scenario.Stop
	part           part
}

// part is the share of a run's devices one agent process drives: device
// i is agent i mod of's. Alone, a run is part 0 of 1. Each device keeps
// its number in the whole run, so its tenant, priority, source address,
// random source and launch time are those it has when one process drives
// every device.
type part struct{ index, of int }

// owns reports whether device i is this part's.
func (p part) owns(i int) bool { return i%p.of == p.index }

// count is the number of this part's devices among the first n.
func (p part) count(n int) int {
	if n <= p.index {
		return 0
	}
	return (n-p.index-1)/p.of + 1
}

// publishes reports whether this part runs the publish streams (one part
// does, so that each message is published once).
func (p part) publishes() bool { return p.index == 0 }

type wave struct {
	at, over time.Duration
	n        int
}

// stormEvent is a storm of the run: a drop (share of the held sessions,
// cut by kraken), a move, a poison tenant, or a primitive on origins.
type stormEvent struct {
	kind     string // "drop", "mass_close", "kill", "freeze", "unhealthy", "move" or "poison"
	at       time.Duration
	over     time.Duration
	share    float64
	origins  int
	dur      time.Duration // freeze, unhealthy: how long (0: to the end)
	region   int           // drop: the region whose sessions drop (-1 all); move: from
	toRegion int           // move: to
	tenant   int           // poison: the tenant
}

type publishStream struct {
	at, dur time.Duration
	rank    int
	rate    float64
}

func scaled(n int64, scale float64) int { return int(math.Round(float64(n) * scale)) }

// newPlan checks that kraken can run every key of sc as it is set, and
// builds the plan. A key it cannot run yet is refused with its file and
// line: never started, never ignored. fileTargets says cfg's targets
// are the scenario's target.urls (a bad one is refused with its line).
func newPlan(sc *scenario.Scenario, cfg Config, fileTargets bool, pt part) (*plan, error) {
	c := *sc
	c.WithDefaults()
	if err := c.Validate(); err != nil {
		return nil, fmt.Errorf("kraken: %w", sc.Locate(err))
	}
	var errs []error
	refuse := func(path, format string, args ...any) {
		errs = append(errs, scenario.Errorf(path, format, args...))
	}
	if fileTargets {
		for i, u := range cfg.Targets {
			if _, err := parseTarget(u); err != nil {
				refuse(fmt.Sprintf("target.urls[%d]", i), "%s", strings.TrimPrefix(err.Error(), "kraken: "))
			}
		}
	}
	p := c.Population
	checkProtocol(p.Protocol, cfg, fileTargets, refuse)
	if len(p.Priorities) > 3 {
		refuse("population.priorities", "kraken maps classes onto the three session priorities P0, P1, P2: at most three classes, got %d", len(p.Priorities))
	}
	if len(c.Sweep.Backoff)+len(c.Sweep.Overload)+len(c.Sweep.OriginCount)+len(c.Sweep.DNSPolicy) > 0 {
		refuse("sweep", "kraken runs one variant per run (a sweep is for sim); remove the sweep and set the values")
	}
	if len(c.Traffic.RegionLoss) > 0 {
		refuse("traffic.region_loss", "kraken does not run region loss yet")
	}
	if c.Client.RequestsPerSecond > 0 {
		refuse("client.requests_per_second", "kraken does not send requests on held sessions yet")
	}
	if c.Client.CatchupRequests != 1 {
		refuse("client.catchup_requests", "kraken's catch-up is the resume in Hello, one per reconnection: leave it at 1")
	}
	if len(c.Traffic.MassClose) > 0 && cfg.MassClose == nil {
		refuse("traffic.mass_close", "the target has no way to close its sessions server-side (corral kraken run --drain-pid, or Config.MassClose)")
	}
	pl := &plan{}
	pl.storms = originStorms(&c, cfg, refuse)
	for i, q := range c.Traffic.Poison {
		if cfg.Kill == nil {
			refuse(fmt.Sprintf("traffic.poison[%d]", i), "the target has no way to kill the origins the poison tenant reaches (corral kraken run --origin pid=PID,node=ID, or Config.Kill)")
			continue
		}
		pl.storms = append(pl.storms, stormEvent{kind: "poison", at: q.At, tenant: q.Tenant})
	}
	var regionShares []float64
	pl.regions, regionShares = regionsOf(&c, cfg, refuse)
	regionOf := func(name string) int { return slices.Index(pl.regions, name) }
	for i, d := range c.Traffic.Disconnects {
		if d.Region != "" && cfg.Regions == nil {
			refuse(fmt.Sprintf("traffic.disconnects[%d].region", i), "the run has no targets per region to tell the region's sessions apart (corral kraken run --region NAME=URL, or Config.Regions)")
		}
	}
	for i, m := range c.Traffic.Move {
		if cfg.Regions == nil {
			refuse(fmt.Sprintf("traffic.move[%d]", i), "the run has no targets per region to move the devices to (corral kraken run --region NAME=URL, or Config.Regions)")
			continue
		}
		pl.storms = append(pl.storms, stormEvent{kind: "move", at: m.At, region: regionOf(m.From), toRegion: regionOf(m.To)})
	}
	if len(c.Traffic.Publish) > 0 && cfg.PublishURL == "" {
		refuse("traffic.publish", "no publish URL to publish through (corral kraken run --publish http://host:port)")
	}
	pl.name, pl.duration, pl.seed, pl.tenants, pl.channels = c.Name, c.Duration, c.Seed, p.Tenants, p.Channels
	pl.backoff, pl.connectTimeout, pl.stop = c.Client.Backoff, c.Client.ConnectTimeout, c.Stop
	pl.initial, pl.part = scaled(p.Initial, c.Scale), pt
	n := pl.initial
	for _, a := range c.Traffic.Arrivals {
		w := wave{at: a.At, over: a.Over, n: scaled(a.Devices, c.Scale)}
		pl.waves = append(pl.waves, w)
		n += w.n
	}
	if limit := maxDevicesHere(); pt.count(n) > limit {
		refuse("population.devices", "%d devices at scale %v need a socket each: %d in this process is over its file limit (%d usable); lower scale, or split the run over more agents (corral kraken run --agents)", n, c.Scale, pt.count(n), limit)
	}
	pl.devices = n
	for _, d := range c.Traffic.Disconnects {
		region := -1 // every region
		if d.Region != "" {
			region = regionOf(d.Region)
		}
		pl.storms = append(pl.storms, stormEvent{kind: "drop", at: d.At, over: d.Over, share: d.Share, region: region})
	}
	slices.SortStableFunc(pl.storms, func(a, b stormEvent) int { return cmp.Compare(a.at, b.at) })
	for _, pu := range c.Traffic.Publish {
		rank := slices.IndexFunc(p.Priorities, func(q scenario.Priority) bool { return q.Name == pu.Priority })
		pl.publishes = append(pl.publishes, publishStream{at: pu.At, dur: pu.For, rank: rank, rate: pu.PerSecond})
	}
	pl.prio = dealPriorities(n, p.Priorities)
	if pl.regions != nil {
		pl.region = dealShares(n, regionShares)
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("kraken: %w", sc.Locate(errors.Join(errs...)))
	}
	return pl, nil
}

// checkProtocol refuses a target that is not of the population's
// protocol (websocket devices take ws:// targets, grpc devices grpc://):
// a target of the file on its own line, one given to the run (--target,
// --region) on the protocol's.
func checkProtocol(protocol string, cfg Config, fileTargets bool, refuse func(path, format string, args ...any)) {
	check := func(path, u string) {
		t, err := parseTarget(u)
		if err != nil || t.protocol() == protocol {
			return // a bad URL is refused on its own
		}
		refuse(path, "target %q takes %s devices, and population.protocol is %s: give %s targets, or set protocol: %s",
			u, t.protocol(), protocol, schemesOf(protocol), t.protocol())
	}
	for i, u := range cfg.Targets {
		if fileTargets {
			check(fmt.Sprintf("target.urls[%d]", i), u)
		} else {
			check("population.protocol", u)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(cfg.Regions)) {
		for _, u := range cfg.Regions[name] {
			check("population.protocol", u)
		}
	}
}

// schemesOf names the target URLs a protocol's devices take.
func schemesOf(protocol string) string {
	if protocol == "grpc" {
		return "grpc:// or grpcs://"
	}
	return "ws:// or wss://"
}

// dealPriorities gives device i its class: the counts are the shares of
// n rounded by largest remainder, and the classes are interleaved (device
// i takes the class whose quota is most behind), so any prefix of the
// devices (the initial ones, a wave) has the mix of the whole.
func dealPriorities(n int, classes []scenario.Priority) []uint8 {
	out := make([]uint8, n)
	given := make([]float64, len(classes))
	for i := range n {
		best, lag := 0, math.Inf(-1)
		for c, cl := range classes {
			if l := cl.Share*float64(i+1) - given[c]; l > lag {
				best, lag = c, l
			}
		}
		given[best]++
		out[i] = uint8(min(best, 2))
	}
	return out
}
