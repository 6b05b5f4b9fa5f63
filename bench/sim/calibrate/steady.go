package main

import (
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/corralhq/corral/kraken"
)

// The admission rate of an origin is read from the steady part of its
// return after a herd: from the moment the sessions it holds pass a tenth
// of the herd it takes back to the moment they pass nine tenths, the eight
// tenths over that time (as bench/hub's versus mode times its steady
// part). Why that part:
//
//   - The sim's origin is a first-in first-out queue served at
//     max_new_per_second (sim/README.md, the model's item 7): under a herd
//     that comes faster than the origin takes it, its sessions rise at that
//     rate from the first arrivals until the queue is empty. Read on the
//     sim's own curve, the steady part gives that rate back; it has no
//     length to choose.
//   - A hub's return has two parts the queue has not: a ramp (the drop's
//     teardown, every session of the hub closed and its devices' closes
//     handled by kraken, then the first dials) and a tail (the last devices:
//     kraken's dials in flight run out, stragglers). Neither is the hub's
//     rate, and the tenths leave both out whatever their length.
//   - It replaces the largest rise over a fixed window (until session 7),
//     whose reading was the window's: at 50,000 devices a 3 s window read
//     4,879 and 4,932/s per hub, a 5 s one 2,285 and 2,524/s, and nothing
//     in the fleet said which length was its rate.
//   - Not the rate after the accepted-but-unserved backlog has drained:
//     once nothing waits, a hub's rise is how fast the devices reach it,
//     not how fast it admits them. Nor is the herd's first burst the
//     kernel's queue handing over connections faster than the hub serves
//     them: a connection in the listen queue has had its TCP handshake
//     only, and is held (kraken's count) after the hub's upgrade, Hello,
//     token check and Welcome, so queued or not it comes at the hub's rate.
//
// What the steady part holds that the sim does not model: a hub's listen
// queue is net.core.somaxconn connections (Go's net.Listen takes it; 4,096
// here). When a herd overflows it, the kernel drops SYNs, the clients'
// TCP sends them again 1 s, 3 s, 7 s later, and kraken's dialers (64 per
// agent, each blocked in connect()) wait out those timers: the hub idles
// with an empty queue for about a second, then takes the next burst. At
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

// MinSteady is the shortest steady part the measure times. kraken's series
// hold the sessions at the end of each second and the two ends are
// interpolated within their seconds; a span of 2 s or more always holds a
// whole second between two samples, so the rate does not rest on the
// interpolation alone.
const MinSteady = 2 * time.Second

// Steady is the steady part of one origin's return after a herd.
type Steady struct {
	// From and To are the times after the drop at which the sessions the
	// origin held passed a tenth and nine tenths of Took (interpolated
	// within their seconds).
	From, To time.Duration
	// Took is the herd the origin took back: the sessions it held at the
	// end of the run less those the drop left it.
	Took int64
}

// Rate is the origin's admission rate in new sessions per second: the
// eight tenths of Took over the steady part; 0 when the part has no
// length.
func (s Steady) Rate() float64 {
	d := (s.To - s.From).Seconds()
	if d <= 0 {
		return 0
	}
	return (steadyTo - steadyFrom) * float64(s.Took) / d
}

// MeasureRates reads each origin's steady part from herd, a kraken run
// whose one storm drops a share of the sessions at once and whose devices
// come back faster than the origins take them (a short backoff). An
// origin whose steady part is shorter than MinSteady, or that took nothing
// back, is refused with an error that names it.
func MeasureRates(herd *kraken.Result) (map[string]Steady, error) {
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
			return nil, fmt.Errorf("calibrate: the herd's series of %s ends at the drop", name)
		}
		s, err := steadyPart(held, from, storm.AtSeconds, storm.Share)
		if err != nil {
			return nil, fmt.Errorf("calibrate: %s: %w", name, err)
		}
		out[name] = s
	}
	return out, nil
}

// steadyPart times the steady part of one origin's series held (its
// sessions at the end of each second) after a drop of share at at seconds
// (in second from).
func steadyPart(held []int64, from int, at, share float64) (Steady, error) {
	// The curve: what the drop left at the drop, then the end of each
	// second from the drop's on.
	base := int64(math.Round(float64(held[from-1]) * (1 - share)))
	final := held[len(held)-1]
	took := final - base
	if took <= 0 {
		return Steady{}, fmt.Errorf("took no session back after the drop (%d held before it, %d at the end)", held[from-1], final)
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
	// until it handles its close) do not open the steady part early.
	to, k := -1.0, 0
	for k = 1; k < len(ts); k++ {
		if vs[k] >= hi {
			to = cross(ts[k-1], vs[k-1], ts[k], vs[k], hi)
			break
		}
	}
	if to < 0 {
		return Steady{}, fmt.Errorf("never reached nine tenths of the %d it took back", took)
	}
	fromT := at
	for j := k; j >= 1; j-- {
		if vs[j] >= lo && vs[j-1] < lo {
			fromT = cross(ts[j-1], vs[j-1], ts[j], vs[j], lo)
			break
		}
	}
	st := Steady{From: seconds(fromT - at), To: seconds(to - at), Took: took}
	if st.To-st.From < MinSteady {
		return st, fmt.Errorf("its steady part (a tenth to nine tenths of the %d it took back, %.2f to %.2f s after the drop) lasted %.2f s, under the %.0f s a per-second series times: give the herd more devices",
			took, st.From.Seconds(), st.To.Seconds(), (st.To - st.From).Seconds(), MinSteady.Seconds())
	}
	return st, nil
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
