package limit

import (
	"testing"
	"time"
)

// TestOverloadTenTimesCapacity offers ten times what a node can hold:
// 20,000 devices for 2,000 sessions, P0 half of the capacity. It asserts
// goodput, that P0 is never shed, that stages rise in order (P2 shed before
// P1), that a steady overload does not flap, and that stages fall back to
// normal after the load ends.
func TestOverloadTenTimesCapacity(t *testing.T) {
	const capacity = 2000 // sessions the node can hold
	n := newNodeSim(t, capacity, ShedderConfig{SeverRate: 40}, nil)
	demand := Counts{P0: 1000, P1: 7000, P2: 12000}
	for p, c := range demand {
		n.arrive(Priority(p), int(c), 10*time.Second)
	}
	var held []int64
	for range 240 {
		n.run(time.Second)
		held = append(held, n.sessions.Total())
	}
	t.Logf("after 240 s: sessions %v, shed rejections %v, limiter rejections %v, severed %v, timeouts %d, waiting %v",
		n.sessions, n.shedRej, n.limRej, n.severed, n.timeouts, n.waiting())
	t.Logf("sessions held per second: %v", held)

	// Goodput: from 30 s on, the node holds at least 90 % of its capacity.
	var sum int64
	for _, h := range held[30:] {
		sum += min(h, capacity)
	}
	if g := float64(sum) / float64(len(held[30:])) / capacity; g < 0.9 {
		t.Errorf("goodput %.3f of capacity, want >= 0.9", g)
	} else {
		t.Logf("goodput %.3f of capacity", g)
	}
	// P0: demand below capacity, never shed, every P0 device connected.
	if n.shedRej[P0] != 0 || n.severed[P0] != 0 {
		t.Errorf("P0 shed: %d rejections, %d severed", n.shedRej[P0], n.severed[P0])
	}
	if n.sessions[P0] != demand[P0] {
		t.Errorf("P0 sessions %d, want all %d P0 devices connected", n.sessions[P0], demand[P0])
	}
	t.Logf("P0 handshakes the limiter turned away for a retry: %d", n.limRej[P0])
	// P2 is shed before P1.
	if n.firstShed[P2].IsZero() || !n.firstShed[P2].Before(n.firstShed[P1]) {
		t.Errorf("first P2 shed at %v, first P1 shed at %v: P2 must go first", n.firstShed[P2], n.firstShed[P1])
	}
	tr := n.shed.Transitions()
	for i, x := range tr {
		t.Logf("transition %d: %v %v -> %v (%s)", i, x.At.Sub(simEpoch), x.From, x.To, x.Reason)
	}
	// Stages move one step at a time; the first three rise in order (P1
	// demand alone exceeds the capacity, so new P1 must be rejected); P0
	// demand fits, so the lifeboat is never reached.
	for i, x := range tr {
		if d := int(x.To) - int(x.From); d != 1 && d != -1 {
			t.Errorf("transition %d jumps %v -> %v", i, x.From, x.To)
		}
		if x.To >= StageLifeboat {
			t.Errorf("transition %d reaches the lifeboat with P0 demand below capacity", i)
		}
		if i < 3 && x.To != Stage(i+1) {
			t.Errorf("transition %d goes to %v, want %v: stages rise in order", i, x.To, Stage(i+1))
		}
	}
	// Damped cycles: each flap (a rise right after a fall) doubles the
	// fall dwell, and calm halves it back (every 2 x FallDwell of unbroken
	// calm), so a steady overload settles into cycles of a severing
	// stage's calm and a re-admission that finds the node full again,
	// not into flapping: from the second flap on, no two rises come
	// closer than FallDwell (10 s). (Before calm forgave the damping, the
	// dwell climbed towards MaxFallDwell and the node took 7 min 34 s to
	// come back once the load ended.)
	flaps, from := 0, len(tr)
	for i := 1; i < len(tr); i++ {
		if tr[i].To > tr[i].From && tr[i-1].To < tr[i-1].From {
			if flaps++; flaps == 2 {
				from = i
				break
			}
		}
	}
	if from == len(tr) {
		t.Errorf("%d flaps: the overload should settle into damped cycles", flaps)
	}
	var lastRise time.Time
	for _, x := range tr[min(from, len(tr)):] {
		if x.To < x.From {
			continue
		}
		if !lastRise.IsZero() && x.At.Sub(lastRise) < 10*time.Second {
			t.Errorf("rises at %v and %v: closer than the fall dwell", lastRise.Sub(simEpoch), x.At.Sub(simEpoch))
		}
		lastRise = x.At
	}

	// The load ends: waiting devices give up and most sessions leave.
	n.forget()
	n.sessions = Counts{P0: 500}
	end := n.now
	for range 20 * 60 {
		n.run(time.Second)
		if n.shed.Stage() == StageNormal {
			break
		}
	}
	if st := n.shed.Stage(); st != StageNormal {
		t.Fatalf("stage %v 20 min after the load ended, want normal", st)
	}
	// Four stages down: two calms and two re-admissions of FallDwell each,
	// the damping forgiven by the calm; a node that was overloaded for
	// long must not turn work away for minutes once it is idle.
	if back := n.now.Sub(end); back > 2*time.Minute {
		t.Errorf("back to normal %v after the load ended, want within 2 min", back)
	}
	t.Logf("back to normal %v after the load ended", n.now.Sub(end))
	for _, x := range n.shed.Transitions() {
		if x.At.After(end) && x.To != x.From-1 {
			t.Errorf("after the load: %v -> %v, want one step down at a time", x.From, x.To)
		}
	}
}

// overloadP0Refusals runs TestOverloadTenTimesCapacity's overload for the
// first minute (the P0 devices are all connected well before it ends)
// with another seed, and returns the P0 handshakes the Limiter refused.
func overloadP0Refusals(t *testing.T, seed uint64) int64 {
	n := newSeededNodeSim(t, 2000, ShedderConfig{SeverRate: 40}, nil, seed)
	for p, c := range (Counts{P0: 1000, P1: 7000, P2: 12000}) {
		n.arrive(Priority(p), int(c), 10*time.Second)
	}
	n.run(time.Minute)
	if n.sessions[P0] != 1000 {
		t.Errorf("seed %d: %d P0 sessions after a minute, want all 1000", seed, n.sessions[P0])
	}
	return n.limRej[P0]
}

// TestOverloadP0RefusalsAcrossSeeds pins how often the Limiter turns P0
// away under the ten-times overload, as a mean over 20 seeds. One seed's
// figure swings by 10x with the arrival order: P0 is refused once P1
// sessions have filled the node's CPU before all P0 devices arrived (then
// the node has CPU for a few handshakes a second and P0 alone fills the
// limit), and a few dozen P1 handshakes more or fewer in the first
// seconds decide it. Before issue 10's floors (b69b092^) the mean was
// 1,002 (289 for newNodeSim's seed); with the lower-half floor on the
// recent peak in-flight alone it was 1,513 (2,657): that floor opened
// whenever slow start doubled the limit past twice the in-flight while
// the Limiter turned away 1,200 handshakes a second, and let P1 in. With
// refused work counted as demand it never opens under this overload
// (1,213), and with the last slot kept for an active P0 (in flight or
// refused) as well, 1,119 (363). Each half alone fails this bound. What
// remains over 1,002 is the last slot given while P0 is idle (933
// without any floor), which the near-idle tests need.
func TestOverloadP0RefusalsAcrossSeeds(t *testing.T) {
	const seeds, maxMean = 20, 1150
	var sum int64
	var per []int64
	for seed := uint64(1); seed <= seeds; seed++ {
		r := overloadP0Refusals(t, seed)
		per = append(per, r)
		sum += r
	}
	mean := float64(sum) / seeds
	t.Logf("P0 handshakes refused by the limiter per seed: %v, mean %.0f", per, mean)
	if mean > maxMean {
		t.Errorf("mean P0 refusals %.0f over %d seeds, want <= %d (1,002 before issue 10's floors, 1,513 with a lower-half floor that counted in-flight work only)", mean, seeds, maxMean)
	}
}
