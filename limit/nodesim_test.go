package limit

import (
	"math/rand/v2"
	"sort"
	"testing"
	"time"

	"github.com/corralhq/corral/internal/testkit"
)

// nodeSim simulates one node holding persistent sessions, in simulated
// time with no goroutines and no sleeps. The node has cpu work units per
// second; each open session costs one unit per second and is served first;
// a handshake costs hsWork units and runs at most hsSpeed units per second,
// sharing the CPU the sessions leave free (at least 0.5 % of it) with the
// other handshakes (processor sharing). So handshake latency is hsWork /
// hsSpeed (10 ms) on an idle node, and grows as sessions fill it: past
// 99 % full one handshake alone takes more than the 100 ms target. Devices are counted, not modelled one by one:
// a device that is turned away is rescheduled in a time bucket at its
// retry hint.
type nodeSim struct {
	t       *testing.T
	shed    *Shedder
	lim     *Limiter
	now     time.Time
	dt      time.Duration
	cpu     float64
	hsWork  float64
	hsSpeed float64
	timeout time.Duration

	sessions Counts
	hs       []handshake
	due      map[int64]*Counts // retry bucket (10 ms) -> devices due
	rng      *rand.Rand
	bucket   int64 // the last bucket processed

	// observations
	latencies   []time.Duration // completed handshakes in the current record span
	shedRej     Counts
	limRej      Counts
	timeouts    int64
	firstShed   [NumPriorities]time.Time // first shedder rejection or severance
	severed     Counts
	stageTrace  []Stage // stage every 100 ms
	maxInFlight int
}

type handshake struct {
	tok   Token
	p     Priority
	start time.Time
	left  float64
}

const bucket = 10 * time.Millisecond

// newNodeSim returns a node whose handshakes pass a Shedder and a Limiter
// over alg (a Gradient with 200 ms windows when nil).
func newNodeSim(t *testing.T, cpu float64, shedCfg ShedderConfig, alg Limit) *nodeSim {
	t.Helper()
	return newSeededNodeSim(t, cpu, shedCfg, alg, 3)
}

// newSeededNodeSim is newNodeSim with another seed for the device arrivals
// and the default Gradient's probes (newNodeSim's is 3).
func newSeededNodeSim(t *testing.T, cpu float64, shedCfg ShedderConfig, alg Limit, seed uint64) *nodeSim {
	t.Helper()
	n := &nodeSim{t: t, now: simEpoch, dt: time.Millisecond, cpu: cpu, hsWork: 2, hsSpeed: 200,
		timeout: 5 * time.Second, due: map[int64]*Counts{}, rng: rand.New(rand.NewPCG(seed, 4))}
	clock := testkit.NewClock(simEpoch)
	shedCfg.Clock = clock
	shedCfg.Seed = 11
	var err error
	if n.shed, err = NewShedder(shedCfg); err != nil {
		t.Fatal(err)
	}
	if alg == nil {
		if alg, err = NewGradient(GradientConfig{Common: Common{Window: 200 * time.Millisecond}, Seed: seed + 2}); err != nil {
			t.Fatal(err)
		}
	}
	if n.lim, err = NewLimiter(LimiterConfig{Limit: alg, Clock: clock}); err != nil {
		t.Fatal(err)
	}
	return n
}

// arrive schedules devices of priority p, spread uniformly over d from now.
func (n *nodeSim) arrive(p Priority, count int, d time.Duration) {
	for range count {
		n.schedule(p, n.now.Add(time.Duration(n.rng.Float64()*float64(d))))
	}
}

func (n *nodeSim) schedule(p Priority, at time.Time) {
	k := max(int64(at.Sub(simEpoch)/bucket), n.bucket+1)
	c := n.due[k]
	if c == nil {
		c = &Counts{}
		n.due[k] = c
	}
	c[p]++
}

// waiting returns the devices still due to retry.
func (n *nodeSim) waiting() Counts {
	var w Counts
	for _, c := range n.due {
		for p := range w {
			w[p] += c[p]
		}
	}
	return w
}

// forget drops every waiting device: the demand ends.
func (n *nodeSim) forget() { n.due = map[int64]*Counts{} }

func (n *nodeSim) run(d time.Duration) {
	end := n.now.Add(d)
	for n.now.Before(end) {
		n.step()
	}
}

func (n *nodeSim) step() {
	prev := n.now
	n.now = n.now.Add(n.dt)
	now := n.now
	// The CPU serves the sessions first and shares what is left (at least
	// 0.5 % of it: the scheduler is fair enough for that) among the
	// handshakes, each at most hsSpeed.
	free := max(0.005*n.cpu, n.cpu-float64(n.sessions.Total()))
	if len(n.hs) > 0 {
		speed := min(n.hsSpeed, free/float64(len(n.hs))) * n.dt.Seconds()
		kept := n.hs[:0]
		for _, h := range n.hs {
			h.left -= speed
			switch {
			case h.left <= 0:
				rtt := now.Sub(h.start)
				h.tok.SuccessAt(now)
				n.shed.Observe(rtt)
				n.latencies = append(n.latencies, rtt)
				n.sessions[h.p]++
			case now.Sub(h.start) > n.timeout:
				h.tok.DropAt(now)
				n.shed.Observe(n.timeout) // it took at least that long
				n.timeouts++
				n.schedule(h.p, now.Add(time.Second))
			default:
				kept = append(kept, h)
			}
		}
		n.hs = kept
	}
	// Devices whose time has come try to connect.
	if k := int64(now.Sub(simEpoch) / bucket); k != int64(prev.Sub(simEpoch)/bucket) {
		n.bucket = k
		if c := n.due[k]; c != nil {
			delete(n.due, k)
			for _, p := range [...]Priority{P0, P1, P2} {
				for range c[p] {
					n.connect(p)
				}
			}
		}
	}
	// Every 100 ms: sever what the shedder asks for, record the stage.
	if now.Sub(simEpoch)%(100*time.Millisecond) == 0 {
		q := n.shed.SeverQuotaAt(n.sessions, now)
		for p := range q {
			for range q[p] {
				n.sessions[p]--
				n.severed[p]++
				n.markShed(Priority(p))
				n.schedule(Priority(p), now.Add(n.shed.RetryAfterAt(Priority(p), now)))
			}
		}
		n.stageTrace = append(n.stageTrace, n.shed.EvaluateAt(now))
	}
	n.maxInFlight = max(n.maxInFlight, n.lim.InFlight())
}

func (n *nodeSim) markShed(p Priority) {
	if n.firstShed[p].IsZero() {
		n.firstShed[p] = n.now
	}
}

func (n *nodeSim) connect(p Priority) {
	now := n.now
	d := n.shed.AdmitAt(p, now)
	if !d.Admit {
		n.shedRej[p]++
		n.markShed(p)
		n.schedule(p, now.Add(d.RetryAfter))
		return
	}
	tok, ok := n.lim.TryAcquirePriorityAt(p, now)
	if !ok {
		n.limRej[p]++
		n.schedule(p, now.Add(n.shed.Rejected(p, now)))
		return
	}
	n.hs = append(n.hs, handshake{tok: tok, p: p, start: now, left: n.hsWork})
}

// p99 returns the 99th percentile of the recorded handshake latencies and
// starts a new record span.
func (n *nodeSim) p99() time.Duration {
	l := n.latencies
	n.latencies = nil
	if len(l) == 0 {
		return 0
	}
	sort.Slice(l, func(i, j int) bool { return l[i] < l[j] })
	return l[min(len(l)-1, len(l)*99/100)]
}
