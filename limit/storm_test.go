package limit

import (
	"slices"
	"testing"
	"time"
)

// storm runs a node holding 520 sessions hit by a herd of three times its
// capacity reconnecting within one second, and returns the node, the
// handshake p99 of each of the seconds after and the p99 over them all.
func storm(t *testing.T, shedCfg ShedderConfig, alg Limit, seconds int) (*nodeSim, []time.Duration, time.Duration) {
	n := newNodeSim(t, 2000, shedCfg, alg)
	n.arrive(P0, 20, 10*time.Second)
	n.arrive(P1, 200, 10*time.Second)
	n.arrive(P2, 300, 10*time.Second)
	n.run(20 * time.Second)
	if n.sessions.Total() != 520 {
		t.Fatalf("warm-up: %d sessions, want 520", n.sessions.Total())
	}
	n.p99()
	for p, c := range stormHerd {
		n.arrive(Priority(p), int(c), time.Second)
	}
	var perSecond []time.Duration
	var all []time.Duration
	for range seconds {
		n.run(time.Second)
		all = append(all, n.latencies...)
		perSecond = append(perSecond, n.p99())
	}
	n.latencies = all
	return n, perSecond, n.p99()
}

var stormHerd = Counts{P0: 100, P1: 2400, P2: 3500}

// TestStorm: the Limiter and the Shedder hold the handshake p99 near the
// 100 ms target while the node fills (<= 1.25 x over the storm, <= 2.5 x
// in any one second: latency only crosses the target once the node is 99 %
// full, and handshakes already admitted finish slowly), shed P2 first, and never turn P0
// away. Without them (a fixed limit of 10,000 and no stages) the same herd
// collapses the node into timeouts.
func TestStorm(t *testing.T) {
	target := 100 * time.Millisecond
	n, perSecond, overall := storm(t, ShedderConfig{SeverRate: 40}, nil, 60)
	t.Logf("storm p99 per second %v, overall %v", perSecond, overall)
	t.Logf("sessions %v, shed rejections %v, limiter rejections %v, severed %v, waiting %v, timeouts %d, max handshakes in flight %d",
		n.sessions, n.shedRej, n.limRej, n.severed, n.waiting(), n.timeouts, n.maxInFlight)
	if overall > target*5/4 {
		t.Errorf("handshake p99 over the storm %v, want near the target: <= 1.25 x %v", overall, target)
	}
	worst := slices.Max(perSecond)
	if worst > 5*target/2 {
		t.Errorf("worst per-second handshake p99 %v, want <= 2.5 x target", worst)
	}
	if n.shedRej[P0]+n.limRej[P0] != 0 {
		t.Errorf("P0 rejected %d times by the shedder and %d by the limiter, want none", n.shedRej[P0], n.limRej[P0])
	}
	if n.sessions[P0] != 120 {
		t.Errorf("P0 sessions %d, want all 120", n.sessions[P0])
	}
	if n.firstShed[P2].IsZero() || (!n.firstShed[P1].IsZero() && !n.firstShed[P2].Before(n.firstShed[P1])) {
		t.Errorf("first P2 shed at %v, first P1 at %v: P2 must go first", n.firstShed[P2], n.firstShed[P1])
	}
	// Relative to demand, the limiter turns P2 away more than P1.
	if n.limRej[P2]*stormHerd[P1] < n.limRej[P1]*stormHerd[P2] {
		t.Errorf("limiter rejections P1 %d, P2 %d: relative to demand P2 must be rejected more", n.limRej[P1], n.limRej[P2])
	}
	if n.timeouts != 0 {
		t.Errorf("%d handshakes timed out", n.timeouts)
	}
	for _, x := range n.shed.Transitions() {
		t.Logf("transition %v: %v -> %v (%s)", x.At.Sub(simEpoch), x.From, x.To, x.Reason)
	}

	// The same herd without adaptive admission or stages.
	fixed, err := NewFixed(10_000)
	if err != nil {
		t.Fatal(err)
	}
	u, _, unprotected := storm(t, ShedderConfig{Target: time.Hour}, fixed, 15)
	t.Logf("unprotected: p99 %v, timeouts %d, sessions %v", unprotected, u.timeouts, u.sessions)
	if unprotected < 10*overall || u.timeouts == 0 {
		t.Errorf("unprotected p99 %v with %d timeouts: the herd should collapse a node without admission control", unprotected, u.timeouts)
	}
}
