package main

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"sort"
	"time"
)

// The teardown rate of an origin is read from the same readings as its
// admission rate (steady.go), from the sessions the drop cut that the hub
// still holds: its open sessions less the sessions it has set up since the
// drop (old = Open - (Welcomes - the Welcomes at the drop)). The hub counts
// a session out of its open sessions when it has detached the session's
// subscriptions, in its teardown (hub/session.go), so old falls as the hub
// works through the drop. The part read is again a tenth to nine tenths:
// from the moment old has fallen by a tenth of what the drop cut to the
// moment it has fallen by nine tenths.
//
// While it tears down, the hub also sets up the first devices that come
// back (at 10,000 devices over 3 hubs, about 700 a second against its
// 4,200 after). The sim's origin spends one budget of time on both (a
// first-in first-out queue, sim/README.md item 7): an end costs
// 1/teardown_per_second, a set-up 1/max_new_per_second, so over the part
// ends/T + setups/H = its length, when the hub is busy throughout. The
// rate it ends sessions at when doing nothing else is then
//
//	T = observed ends per second / (1 - observed set-ups per second / H)
//
// with H its admission rate after the teardown (MeasureTeardowns re-times
// the steady part to start at the teardown's end). That it is busy throughout is the
// model's assumption, not a reading: a hub that set up sessions at half
// its steady rate or more while tearing down is refused (its teardown did
// not hold it, so the readings do not say what a teardown costs).

// maxSetUpShare bounds the hub's set-ups during its teardown, as a share
// of its steady rate, for the teardown to be read as the time it took.
const maxSetUpShare = 0.5

// Teardown is the teardown part of one origin's readings after a herd.
type Teardown struct {
	// From and To are the times after the drop at which the sessions the
	// drop cut that the hub still held had fallen by a tenth and by nine
	// tenths of Cut (interpolated between readings).
	From, To time.Duration
	// Cut is what the drop cut: its share of the sessions held at it.
	Cut int64
	// SetUp is the sessions the hub set up from From to To
	// (interpolated).
	SetUp float64
}

// Observed is the sessions the hub ended per second over the part.
func (t Teardown) Observed() float64 {
	d := (t.To - t.From).Seconds()
	if d <= 0 {
		return 0
	}
	return (steadyTo - steadyFrom) * float64(t.Cut) / d
}

// Alone is the rate at which the hub ends sessions when it does nothing
// else, given its steady admission rate h (the comment above); 0 when
// the part has no length or h is not positive.
func (t Teardown) Alone(h float64) float64 {
	d := (t.To - t.From).Seconds()
	if d <= 0 || h <= 0 {
		return 0
	}
	busy := 1 - t.SetUp/d/h
	if busy <= 0 {
		return 0
	}
	return t.Observed() / busy
}

// MeasureTeardowns reads each hub's teardown part from opens, the same
// readings MeasureRates reads (share is the drop's), given each hub's
// steady part, and returns it with the steady part re-timed to start no
// earlier than the teardown's end: the set-ups the hub made while it tore
// down are paid for by the teardown rate, so the admission rate is read
// from what came after (with both in the sim, the part of the return
// spent tearing down would be counted twice otherwise). A hub is refused
// with an error that names it when its readings do not hold the drop,
// when its teardown part or the re-timed steady part is too short for its
// readings (MaxEnds: at 10,000 devices over 3 hubs a teardown lasts about
// 0.7 s), or when it set up more than maxSetUpShare of its re-timed
// steady rate meanwhile.
func MeasureTeardowns(opens *Samples, share float64, steady map[string]Steady) (map[string]Teardown, map[string]Steady, error) {
	tds, after := map[string]Teardown{}, map[string]Steady{}
	for _, name := range slices.Sorted(maps.Keys(opens.Hubs)) {
		s, ok := steady[name]
		if !ok {
			return nil, nil, fmt.Errorf("calibrate: %s: no steady part to read its teardown beside", name)
		}
		td, st, err := teardownOfOpens(opens.Hubs[name], share, s)
		if err != nil {
			return nil, nil, fmt.Errorf("calibrate: %s: %w", name, err)
		}
		tds[name], after[name] = td, st
	}
	return tds, after, nil
}

// teardownOfOpens times the teardown part of one hub's readings rs after a
// drop of share, for a hub whose steady part is st, and re-times st to
// start no earlier than the teardown's end.
func teardownOfOpens(rs []Sample, share float64, st Steady) (Teardown, Steady, error) {
	b, err := dropReading(rs, share)
	if err != nil {
		return Teardown{}, st, err
	}
	base, most := rs[b].Welcomes, rs[b].Open
	old := func(i int) float64 { return float64(rs[i].Open - (rs[i].Welcomes - base)) }
	// What the drop cut: its share of what was held (after the return the
	// run's end tears the sessions down again, which is not the drop's).
	cut := int64(math.Round(share * float64(most)))
	if cut <= 0 {
		return Teardown{}, st, fmt.Errorf("the drop cut nothing (%d held at it)", most)
	}
	// at returns when old fell to v, after the drop, and the interval of
	// the readings around that time.
	at := func(v float64) (time.Duration, time.Duration, error) {
		i := b + 1
		for i < len(rs) && old(i) > v {
			i++
		}
		if i == len(rs) {
			return 0, 0, fmt.Errorf("the sessions the drop cut never fell to %.0f of %d (the readings end first)", v, most)
		}
		t := fall(rs[i-1].At.Seconds(), old(i-1), rs[i].At.Seconds(), old(i), v)
		return seconds(t) - rs[b].At, rs[i].At - rs[i-1].At, nil
	}
	from, dFrom, err := at(float64(most) - steadyFrom*float64(cut))
	if err != nil {
		return Teardown{}, st, err
	}
	to, dTo, err := at(float64(most) - steadyTo*float64(cut))
	if err != nil {
		return Teardown{}, st, err
	}
	td := Teardown{From: from, To: to, Cut: cut}
	if span := to - from; span <= 0 || float64(dFrom+dTo) > MaxEnds*float64(span) {
		return td, st, fmt.Errorf("its teardown (a tenth to nine tenths of the %d the drop cut, %.2f to %.2f s after the drop) lasted %.2f s, under %.0f times the intervals of the readings around its ends (%.2f s and %.2f s): give the herd more devices, or read the hubs more often",
			cut, from.Seconds(), to.Seconds(), (to - from).Seconds(), 1/MaxEnds, dFrom.Seconds(), dTo.Seconds())
	}
	welcomes := func(d time.Duration) float64 { return welcomesAt(rs, rs[b].At+d) - float64(base) }
	td.SetUp = welcomes(to) - welcomes(from)
	if to > st.From {
		// The steady part from the teardown's end: what the hub set up
		// from then to nine tenths of what it took back.
		// Its ends: the teardown's end (interval dTo) and nine tenths,
		// within a reading interval (the first one's length stands for
		// it).
		st.Part = (steadyTo*float64(st.Took) - welcomes(to)) / float64(st.Took)
		st.From = to
		if span := st.To - st.From; st.Part <= 0 || span <= 0 || float64(dTo+rs[1].At-rs[0].At) > MaxEnds*float64(span) {
			return td, st, fmt.Errorf("its steady part after its teardown (%.2f to %.2f s after the drop) is too short for its readings: give the herd more devices, or read the hubs more often",
				st.From.Seconds(), st.To.Seconds())
		}
	}
	h := st.Rate()
	if r := td.SetUp / (to - from).Seconds(); h <= 0 || r > maxSetUpShare*h {
		return td, st, fmt.Errorf("it set up %.0f sessions a second while it tore down (%.2f to %.2f s after the drop), over half its steady rate after it, %.0f/s: its teardown did not hold it busy, so the readings do not say what a teardown costs",
			r, from.Seconds(), to.Seconds(), h)
	}
	return td, st, nil
}

// welcomesAt is the hub's Welcomes at time t of its readings rs,
// interpolated between the two around it (the first or last outside
// them).
func welcomesAt(rs []Sample, t time.Duration) float64 {
	i := sort.Search(len(rs), func(i int) bool { return rs[i].At >= t })
	switch {
	case i == 0:
		return float64(rs[0].Welcomes)
	case i == len(rs):
		return float64(rs[len(rs)-1].Welcomes)
	}
	a, c := rs[i-1], rs[i]
	return float64(a.Welcomes) + float64(c.Welcomes-a.Welcomes)*float64(t-a.At)/float64(c.At-a.At)
}

// fall returns the time at which the line from (t0, v0) to (t1, v1)
// falls to v (v0 > v >= v1, or v0 <= v: t0).
func fall(t0, v0, t1, v1, v float64) float64 {
	if v1 >= v0 || v >= v0 {
		return t0
	}
	return t0 + (t1-t0)*(v0-v)/(v0-v1)
}
