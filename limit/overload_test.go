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
	// No flapping: each flap (a rise right after a fall) doubles the fall
	// dwell, so from the second flap on there are at most 4 changes in
	// any minute. (Counted from a flap, not from a fixed time: the first
	// two damped cycles hold 6 changes within a minute wherever they fall,
	// and a fixed start only tells whether they fell before it.)
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
	for i := range tr {
		if i < from {
			continue
		}
		inMinute := 0
		for _, y := range tr[i:] {
			if y.At.Sub(tr[i].At) < time.Minute {
				inMinute++
			}
		}
		if inMinute > 4 {
			t.Errorf("%d stage changes in the minute from %v", inMinute, tr[i].At.Sub(simEpoch))
		}
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
	t.Logf("back to normal %v after the load ended", n.now.Sub(end))
	for _, x := range n.shed.Transitions() {
		if x.At.After(end) && x.To != x.From-1 {
			t.Errorf("after the load: %v -> %v, want one step down at a time", x.From, x.To)
		}
	}
}
