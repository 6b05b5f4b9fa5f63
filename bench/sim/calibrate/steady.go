package main

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"time"

	"github.com/corralhq/corral/kraken"
)

// The admission rate of an origin is read from the steady part of its
// return after a herd: from the moment the sessions it has set up since
// the drop pass a tenth of the herd it takes back to the moment they pass
// nine tenths, the eight tenths over that time (as bench/hub's versus mode
// times its steady part). What is counted, and why that part:
//
//   - The hub's own count of the sessions it set up: its Welcomes (the
//     handshake histogram's count, sample.go), read from its metrics every
//     100 ms during the herd (bench/sim/calibrate.sh runs `calibrate
//     sample` beside kraken). That count is the admission itself: a
//     session is counted when the hub has said yes and sent its Welcome,
//     and a counter only rises, so nothing the drop tears down is in it.
//   - Not kraken's per-origin held series (the measure until 2026-12-02):
//     kraken counts a dropped session until it has handled its close, so
//     for seconds after a drop of 50,000 sessions the series mixes
//     kraken's teardown with the return and reads kraken's bookkeeping,
//     not the hubs. The full run of 2026-12-02, 14:59 UTC, read from it
//     hub-1 and hub-3 taking nothing for 8 s and then eight tenths of
//     their herd in 2.4 s (5,575 and 5,877/s) and hub-2 a steady 1,282/s,
//     while the herd's warm-up read 2,520/s per hub and the storms' time
//     to 99 % agreed with about 2,000-2,500. It stays as a cross-check
//     (KrakenHeld): the sessions it says each hub took back should be the
//     hub's own count, and its times show the lag.
//   - Not the hub's open sessions (corral_hub_sessions): they fall with
//     the hub's own teardown of the dropped sessions while the return
//     raises them, the same mixture on the hub's side. Their fall only
//     places the drop on the hub's clock (steadyOfOpens): the drop cuts
//     sessions before any device can come back, and before it the fleet
//     is held and nothing opens, so the Welcomes counted at the last
//     reading at the most sessions held, before they first fell by a
//     hundredth of what the drop cuts, are the base the return counts
//     from, and its time is the drop's (to within a reading).
//   - The sim's origin is a first-in first-out queue served at
//     max_new_per_second (sim/README.md, the model's item 7): under a herd
//     that comes faster than the origin takes it, its sessions rise at that
//     rate from the first arrivals until the queue is empty. Read on the
//     sim's own curve, the steady part gives that rate back; it has no
//     length to choose.
//   - A hub's return has two parts the queue has not: a ramp (the hub
//     tearing the dropped sessions down, the devices' first dials) and a
//     tail (the last devices: kraken's dials in flight run out,
//     stragglers). Neither is the hub's rate, and the tenths leave both
//     out whatever their length. A device dials again only once kraken
//     has handled its close, so kraken's teardown paces the ramp's
//     arrivals too: at 10,000 devices over 3 hubs a hub set up about 700
//     sessions a second for the 0.7 s its open sessions took to fall,
//     then about 4,200 a second.
//   - It replaces the largest rise over a fixed window (until session 7),
//     whose reading was the window's: at 50,000 devices a 3 s window read
//     4,879 and 4,932/s per hub, a 5 s one 2,285 and 2,524/s, and nothing
//     in the fleet said which length was its rate.
//   - Not the rate after the accepted-but-unserved backlog has drained:
//     once nothing waits, a hub's rise is how fast the devices reach it,
//     not how fast it admits them. Nor is the herd's first burst the
//     kernel's queue handing over connections faster than the hub serves
//     them: a connection in the listen queue has had its TCP handshake
//     only, and is counted after the hub's upgrade, Hello, token check
//     and Welcome, so queued or not it comes at the hub's rate.
//
// What the steady part holds that the sim does not model: a hub's listen
// queue is net.core.somaxconn connections (Go's net.Listen takes it; 4,096
// here). When a herd overflows it, the kernel drops SYNs, the clients'
// TCP sends them again 1 s, 3 s, 7 s later, and each device waits out its
// own timers. With kraken's former pool of 64 dialers per agent (each
// blocked in connect(); gone since 91f6950) the hub idled with an empty
// queue for about a second, then took the next burst. At
// 10,000 devices on one hub with a listen queue of 1,000 (a private
// network namespace), the herd came back in three bursts with a stall of
// about a second between them, each stall 128 SYN retransmissions, the
// two agents' dialers exactly; with a queue of 65,535 it came back in one
// burst, with none.
// The steady part of an overflowed herd is then the rate at which the
// fleet takes a herd through its listen queue, stalls included, not the
// hub's rate while busy. bench/sim/calibrate.sh prints the kernel's listen
// overflows and SYN retransmissions of every run so the reader knows
// which was measured, and -somaxconn runs the fleet with a listen queue
// that holds the herd.

// Tenths of the herd an origin takes back that open and close its steady
// part.
const (
	steadyFrom = 0.1
	steadyTo   = 0.9
)

// dropFall is how far, as a share of what the drop cuts, a hub's open
// sessions must fall below their most for the readings to hold its drop:
// more than a stray close, less than what the hub tears down in the first
// reading after a drop.
const dropFall = 0.01

// MaxEnds bounds the two ends' reading intervals against the steady
// part's length. Each end is interpolated between the two readings around
// it, so it is misplaced by less than that interval (in the worst case,
// every Welcome of the interval at one instant; a hub under a herd sets
// up hundreds within each 100 ms, spread through it, and a constant rate
// is interpolated exactly). A part at least 1/MaxEnds times as long as
// its ends' two intervals together, ten intervals of 100 ms (1 s), rests
// on the readings, not on the interpolation; a shorter one is refused.
// With kraken's per-second series the same bound would have asked for
// 10 s; the 2 s it asked then let the interpolation carry the whole span.
const MaxEnds = 0.2

// Steady is the steady part of one origin's return after a herd.
type Steady struct {
	// From and To are the times after the drop at which the sessions the
	// origin set up since the drop passed a tenth and nine tenths of Took
	// (interpolated between readings).
	From, To time.Duration
	// Took is the herd the origin took back: the sessions it set up from
	// the drop to the end of the readings.
	Took int64
	// Part is the share of Took the origin set up from From to To; 0
	// means the eight tenths from a tenth to nine tenths. A part that
	// starts at the end of the origin's teardown instead (teardown.go)
	// sets it.
	Part float64
}

// Rate is the origin's admission rate in new sessions per second: its
// share of Took over the steady part; 0 when the part has no length.
func (s Steady) Rate() float64 {
	d := (s.To - s.From).Seconds()
	if d <= 0 {
		return 0
	}
	part := s.Part
	if part == 0 {
		part = steadyTo - steadyFrom
	}
	return part * float64(s.Took) / d
}

// MeasureRates reads each hub's steady part from opens, its readings over
// a herd pass whose one storm drops share of the sessions at once and
// whose devices come back faster than the hubs take them (a short
// backoff). A hub whose readings do not hold the drop, that took nothing
// back, or whose steady part is too short for its readings (MaxEnds), is
// refused with an error that names it.
func MeasureRates(opens *Samples, share float64) (map[string]Steady, error) {
	if opens == nil || len(opens.Hubs) == 0 {
		return nil, errors.New("calibrate: the herd's readings hold no hub")
	}
	if share <= 0 || share > 1 {
		return nil, fmt.Errorf("calibrate: a drop of share %v: want one in (0, 1]", share)
	}
	out := map[string]Steady{}
	for _, name := range slices.Sorted(maps.Keys(opens.Hubs)) {
		s, err := steadyOfOpens(opens.Hubs[name], share)
		if err != nil {
			return nil, fmt.Errorf("calibrate: %s: %w", name, err)
		}
		out[name] = s
	}
	return out, nil
}

// steadyOfOpens times the steady part of one hub's readings rs after a
// drop of share of its sessions.
func steadyOfOpens(rs []Sample, share float64) (Steady, error) {
	b, err := dropReading(rs, share)
	if err != nil {
		return Steady{}, err
	}
	base, final := rs[b].Welcomes, rs[len(rs)-1].Welcomes
	took := final - base
	if took <= 0 {
		return Steady{}, fmt.Errorf("took no session back after the drop (%d Welcomes at it, %d at the end)", base, final)
	}
	// at returns when the count reached v (base < v <= final), after the
	// drop, and the interval of the readings around that time: the count
	// only rises, so each tenth is crossed once, in the first interval
	// that reaches it.
	at := func(v float64) (time.Duration, time.Duration) {
		i := b + 1
		for float64(rs[i].Welcomes) < v {
			i++
		}
		t := cross(rs[i-1].At.Seconds(), float64(rs[i-1].Welcomes), rs[i].At.Seconds(), float64(rs[i].Welcomes), v)
		return seconds(t) - rs[b].At, rs[i].At - rs[i-1].At
	}
	from, dFrom := at(float64(base) + steadyFrom*float64(took))
	to, dTo := at(float64(base) + steadyTo*float64(took))
	st := Steady{From: from, To: to, Took: took}
	if span := to - from; span <= 0 || float64(dFrom+dTo) > MaxEnds*float64(span) {
		return st, fmt.Errorf("its steady part (a tenth to nine tenths of the %d it took back, %.2f to %.2f s after the drop) lasted %.2f s, under %.0f times the intervals of the readings around its ends (%.2f s and %.2f s): give the herd more devices, or read the hubs more often",
			took, from.Seconds(), to.Seconds(), span.Seconds(), 1/MaxEnds, dFrom.Seconds(), dTo.Seconds())
	}
	return st, nil
}

// dropReading checks one hub's readings rs (in time order, its Welcomes
// never falling) and returns the reading that places a drop of share on
// the hub's clock: the last reading at the most sessions held before they
// first fell by more than dropFall of what the drop cuts.
func dropReading(rs []Sample, share float64) (int, error) {
	if len(rs) < 2 {
		return 0, fmt.Errorf("too few readings (%d) to hold a herd", len(rs))
	}
	for i := 1; i < len(rs); i++ {
		if rs[i].At <= rs[i-1].At {
			return 0, fmt.Errorf("reading %d at %v is not after the one before (%v)", i, rs[i].At, rs[i-1].At)
		}
		if rs[i].Welcomes < rs[i-1].Welcomes {
			return 0, fmt.Errorf("its Welcomes fell from %d to %d at %v (did it restart?)", rs[i-1].Welcomes, rs[i].Welcomes, rs[i].At)
		}
	}
	b, most := 0, rs[0].Open
	for i := 1; i < len(rs); i++ {
		if float64(most-rs[i].Open) > max(1, dropFall*share*float64(most)) {
			return b, nil
		}
		if rs[i].Open >= most {
			b, most = i, rs[i].Open
		}
	}
	return 0, fmt.Errorf("its open sessions (at most %d) never fell by a hundredth of the drop's share %v: the readings do not hold the drop", most, share)
}

// KrakenHeld reads each origin's return from herd's per-origin held
// series, kraken's count of the sessions it holds at the end of each
// second: the cross-check beside MeasureRates, not a measure (kraken
// counts a dropped session until it has handled its close, so its return
// lags the hub's by kraken's teardown). Took is what the series held at
// the end less what the drop left it; From and To are when it passed a
// tenth and nine tenths of that, interpolated within their seconds. An
// origin whose series cannot be read is left out; an error only when
// herd has no single drop storm or no series.
func KrakenHeld(herd *kraken.Result) (map[string]Steady, error) {
	if len(herd.Storms) != 1 || herd.Storms[0].Kind != "drop" {
		return nil, errors.New("calibrate: the herd result has no single drop storm")
	}
	storm := herd.Storms[0]
	if len(herd.HeldByOrigin) == 0 {
		return nil, errors.New("calibrate: the herd result holds no origin's series")
	}
	from := int(storm.AtSeconds)
	if from < 1 {
		return nil, errors.New("calibrate: the herd's drop comes in its first second: no second before it")
	}
	out := map[string]Steady{}
	for name, held := range herd.HeldByOrigin {
		if len(held) <= from {
			continue
		}
		if s, ok := heldPart(held, from, storm.AtSeconds, storm.Share); ok {
			out[name] = s
		}
	}
	return out, nil
}

// heldPart times the return in one origin's series held (its sessions at
// the end of each second) after a drop of share at at seconds (in second
// from); false when it took nothing back or never reached nine tenths.
func heldPart(held []int64, from int, at, share float64) (Steady, bool) {
	// The curve: what the drop left at the drop, then the end of each
	// second from the drop's on.
	base := int64(math.Round(float64(held[from-1]) * (1 - share)))
	took := held[len(held)-1] - base
	if took <= 0 {
		return Steady{}, false
	}
	ts := []float64{at}
	vs := []float64{float64(base)}
	for s := from; s < len(held); s++ {
		ts = append(ts, float64(s+1))
		vs = append(vs, float64(held[s]))
	}
	lo, hi := float64(base)+steadyFrom*float64(took), float64(base)+steadyTo*float64(took)
	// To: the first time the curve reaches nine tenths. From: the last
	// time before it that the curve rose through a tenth, so sessions the
	// drop had not cut yet when a second ended (kraken counts a session
	// until it handles its close) do not open the part early.
	to, k := -1.0, 0
	for k = 1; k < len(ts); k++ {
		if vs[k] >= hi {
			to = cross(ts[k-1], vs[k-1], ts[k], vs[k], hi)
			break
		}
	}
	if to < 0 {
		return Steady{}, false
	}
	fromT := at
	for j := k; j >= 1; j-- {
		if vs[j] >= lo && vs[j-1] < lo {
			fromT = cross(ts[j-1], vs[j-1], ts[j], vs[j], lo)
			break
		}
	}
	return Steady{From: seconds(fromT - at), To: seconds(to - at), Took: took}, true
}

// cross returns the time at which the line from (t0, v0) to (t1, v1)
// reaches v (v0 < v <= v1, or v0 >= v: t0).
func cross(t0, v0, t1, v1, v float64) float64 {
	if v1 <= v0 || v <= v0 {
		return t0
	}
	return t0 + (t1-t0)*(v-v0)/(v1-v0)
}

func seconds(s float64) time.Duration { return time.Duration(math.Round(s * float64(time.Second))) }
