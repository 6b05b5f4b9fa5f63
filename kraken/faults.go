package kraken

import (
	"context"
	"fmt"
	"maps"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/corralhq/corral/scenario"
)

// The storm primitives that act on the target's origins (traffic.kill,
// traffic.unhealthy, traffic.mass_close) go through Config's functions;
// the region ones (traffic.move, traffic.disconnects[].region) through
// Config.Regions. Each is refused before the run when its means is
// missing, and bounded: a freeze or an unhealthy spell ends after its
// `for`, or at the end of the run at the latest.

// originStorms turns the storms on origins into events, refusing those the
// configuration cannot carry out.
func originStorms(c *scenario.Scenario, cfg Config, refuse func(path, format string, args ...any)) []stormEvent {
	var out []stormEvent
	gone := 0 // origins a kill or a mass close takes out for good
	for _, m := range c.Traffic.MassClose {
		out = append(out, stormEvent{kind: "mass_close", at: m.At, origins: m.Origins})
		gone += m.Origins
	}
	for i, k := range c.Traffic.Kill {
		path := fmt.Sprintf("traffic.kill[%d]", i)
		if cfg.Kill == nil {
			refuse(path, "the target has no way to signal its processes (corral kraken run --origin pid=PID or pidfile=FILE, or Config.Kill)")
			continue
		}
		kind := "kill"
		if k.Signal == "stop" {
			kind = "freeze"
		} else {
			gone += k.Origins
		}
		out = append(out, stormEvent{kind: kind, at: k.At, origins: k.Origins, dur: k.For})
		if cfg.Origins > 0 && k.Origins > cfg.Origins {
			refuse(path+".origins", "%d origins, the run can act on %d", k.Origins, cfg.Origins)
		}
	}
	for i, u := range c.Traffic.Unhealthy {
		path := fmt.Sprintf("traffic.unhealthy[%d]", i)
		if cfg.Unhealthy == nil {
			refuse(path, "the target has no way to mark an origin unhealthy (corral kraken run --origin ...,admin=http://HOST:PORT, or Config.Unhealthy)")
			continue
		}
		out = append(out, stormEvent{kind: "unhealthy", at: u.At, origins: u.Origins, dur: u.For})
		if cfg.Origins > 0 && u.Origins > cfg.Origins {
			refuse(path+".origins", "%d origins, the run can act on %d", u.Origins, cfg.Origins)
		}
	}
	if cfg.Origins > 0 && gone > cfg.Origins {
		refuse("traffic", "the kills and mass closes take out %d origins, the run can act on %d", gone, cfg.Origins)
	}
	return out
}

// regionsOf returns the scenario's regions (in file order) and their
// shares of the devices (the primary groups' count x weight; every group's
// when all are secondary) when cfg has targets per region, refusing a
// region without targets; nil, nil without Config.Regions.
func regionsOf(c *scenario.Scenario, cfg Config, refuse func(path, format string, args ...any)) ([]string, []float64) {
	if cfg.Regions == nil {
		return nil, nil
	}
	var names []string
	var shares, all []float64
	for i, o := range c.Origins {
		if _, ok := cfg.Regions[o.Region]; !ok {
			refuse(fmt.Sprintf("origins[%d].region", i), "region %q has no targets in the run (it has %v)", o.Region, slices.Sorted(maps.Keys(cfg.Regions)))
		}
		j := slices.Index(names, o.Region)
		if j < 0 {
			names, shares, all = append(names, o.Region), append(shares, 0), append(all, 0)
			j = len(names) - 1
		}
		w := float64(o.Count * o.Weight)
		all[j] += w
		if !o.Secondary {
			shares[j] += w
		}
	}
	if len(names) > math.MaxUint8 {
		refuse("origins", "%d regions, kraken drives at most %d", len(names), math.MaxUint8)
	}
	for _, name := range slices.Sorted(maps.Keys(cfg.Regions)) {
		if !slices.Contains(names, name) {
			refuse("origins", "the run has targets for region %q, which no origin group is in", name)
		}
	}
	if sum(shares) == 0 {
		shares = all
	}
	if t := sum(shares); t > 0 {
		for i := range shares {
			shares[i] /= t
		}
	}
	return names, shares
}

func sum(v []float64) float64 {
	var t float64
	for _, x := range v {
		t += x
	}
	return t
}

// dealShares gives each of n devices one of the classes by shares,
// interleaved (device i takes the class most behind its quota), as
// dealPriorities does.
func dealShares(n int, shares []float64) []uint8 {
	out := make([]uint8, n)
	given := make([]float64, len(shares))
	for i := range n {
		best, lag := 0, math.Inf(-1)
		for c, sh := range shares {
			if l := sh*float64(i+1) - given[c]; l > lag {
				best, lag = c, l
			}
		}
		given[best]++
		out[i] = uint8(best)
	}
	return out
}

// restores are the pending ends of freezes and unhealthy spells; the run
// calls every one at its end, and each runs once.
type restores struct {
	mu  sync.Mutex
	fns []func() error
}

// add keeps restore and returns it wrapped to run once.
func (rs *restores) add(restore func() error) func() error {
	var once sync.Once
	var err error
	f := func() error {
		once.Do(func() { err = restore() })
		return err
	}
	rs.mu.Lock()
	rs.fns = append(rs.fns, f)
	rs.mu.Unlock()
	return f
}

// all runs every restore not run yet.
func (rs *restores) all() []error {
	rs.mu.Lock()
	fns := rs.fns
	rs.fns = nil
	rs.mu.Unlock()
	var errs []error
	for _, f := range fns {
		if err := f(); err != nil {
			errs = append(errs, err)
		}
	}
	return errs
}

// fireOriginStorm runs storm i on the target's origins: a mass close, a
// kill, a freeze or an unhealthy spell. An error (a process gone, no pid
// file, an admin page refusing) is counted in failures as <kind>_error
// and kept in the storm's error.
func (r *runner) fireOriginStorm(ctx context.Context, i int, s stormEvent) {
	var restore func() error
	var err error
	switch s.kind {
	case "mass_close":
		err = r.cfg.MassClose(ctx, s.origins)
	case "kill":
		_, err = r.cfg.Kill(ctx, KillRequest{Origins: s.origins})
	case "freeze":
		restore, err = r.cfg.Kill(ctx, KillRequest{Origins: s.origins, Freeze: true})
	case "unhealthy":
		restore, err = r.cfg.Unhealthy(ctx, s.origins)
	}
	if err != nil {
		r.cfg.Logger.Warn("kraken: storm failed", "storm", i, "kind", s.kind, "err", err)
		r.rec.failure(s.kind+"_error", 0)
		r.rec.stormError(i, err)
	}
	if restore == nil {
		return
	}
	restore = r.restores.add(restore)
	if s.dur <= 0 {
		return // at the end of the run
	}
	go func() {
		t := time.NewTimer(s.dur)
		defer t.Stop()
		select {
		case <-t.C:
		case <-r.ended:
		}
		if err := restore(); err != nil {
			r.cfg.Logger.Warn("kraken: ending a storm failed", "storm", i, "kind", s.kind, "err", err)
			r.rec.stormError(i, err)
		}
	}()
}

// move sends every device of region from to region to: its later attempts
// go to the new region's targets, and a held session is cut now (counted
// for storm i) so that it reconnects there.
func (r *runner) move(i int, from, to int) {
	for _, d := range r.devices {
		if int(d.region.Load()) != from {
			continue
		}
		d.mu.Lock()
		d.region.Store(uint32(to))
		d.endRoundLocked() // a round under way goes on in the new region
		d.mu.Unlock()
		d.drop(int16(i))
	}
}
