package hub

import (
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/corralhq/corral/internal/config"
	"github.com/corralhq/corral/limit"
)

// TestExampleConfigTrickleAfterBurstIsNeverRefused is the acceptance test
// of the publish limiter: examples/hub.yaml as shipped (overload on),
// loaded the way `corral hub --config` loads it, the limiter built by New;
// in simulated time (testing/synctest), a burst of 1,000 publishes then one
// publish per second for five minutes, each holding its token for a noisy
// storage-like latency as Publish does around the history append. From 8
// concurrent backend workers nothing is refused, at any priority; all 1,000
// at once overflow the limit of 20, and the trickle after them is refused
// nothing. Before the fix the limit drifted down on the noise of a few
// samples and the P0 and P1 reserves shut P2, then P1, out with nothing in
// flight.
func TestExampleConfigTrickleAfterBurstIsNeverRefused(t *testing.T) {
	cfg := DefaultConfig()
	if err := config.Load("../examples/hub.yaml", &cfg, config.Options{EnvPrefix: "CORRAL_HUB"}); err != nil {
		t.Fatal(err)
	}
	if !cfg.Overload.Enabled {
		t.Fatal("examples/hub.yaml ships with overload off; this test is about it on")
	}
	for _, at := range []bool{false, true} {
		for _, tc := range []struct {
			name string
			prio func(i int) limit.Priority
		}{
			{name: "p0", prio: func(int) limit.Priority { return limit.P0 }},
			{name: "p1", prio: func(int) limit.Priority { return limit.P1 }},
			{name: "p2", prio: func(int) limit.Priority { return limit.P2 }},
			{name: "p0 p1 p2 in turn", prio: func(i int) limit.Priority { return limit.Priority(i % limit.NumPriorities) }},
		} {
			for seed := uint64(1); seed <= 3; seed++ {
				t.Run(fmt.Sprintf("burst at once %v/%s/seed %d", at, tc.name, seed), func(t *testing.T) {
					synctest.Test(t, func(t *testing.T) {
						h, err := New(cfg, Options{})
						if err != nil {
							t.Fatal(err)
						}
						if h.limiter == nil {
							t.Fatal("no publish limiter with overload enabled")
						}
						p := &simPublisher{lim: h.limiter, rng: rand.New(rand.NewPCG(seed, 1))}
						// The burst: 1,000 publishes, priorities mixed, from 8
						// concurrent backend workers or all at once.
						var wg sync.WaitGroup
						workers := 8
						if at {
							workers = 1000
						}
						for w := range workers {
							wg.Go(func() {
								for i := range 1000 / workers {
									p.publish(limit.Priority((w + i) % limit.NumPriorities))
								}
							})
						}
						wg.Wait()
						burst := p.refused
						// The trickle: one publish a second for five minutes.
						for i := range 300 {
							time.Sleep(time.Second)
							p.publish(tc.prio(i))
						}
						if p.refused != burst || (burst.Total() != 0) != at {
							s := h.limiter.Snapshot()
							t.Errorf("refused %v in the burst and %v in the trickle (per priority); limit %d, ceilings %v",
								burst, subCounts(p.refused, burst), s.Limit, s.Ceilings)
						}
					})
				})
			}
		}
	}
}

// simPublisher holds a publish limiter's token for a simulated history
// append: 2 ms at the median with log-normal noise, one in 50 ten times
// slower.
type simPublisher struct {
	lim     *limit.Limiter
	mu      sync.Mutex
	rng     *rand.Rand
	refused limit.Counts
}

func (p *simPublisher) publish(prio limit.Priority) {
	tok, ok := p.lim.TryAcquirePriority(prio)
	p.mu.Lock()
	if !ok {
		p.refused[prio]++
		p.mu.Unlock()
		return
	}
	f := math.Exp(0.6 * p.rng.NormFloat64())
	if p.rng.IntN(50) == 0 {
		f *= 10
	}
	p.mu.Unlock()
	time.Sleep(time.Duration(f * float64(2*time.Millisecond)))
	tok.Success()
}

func subCounts(a, b limit.Counts) limit.Counts {
	for i := range a {
		a[i] -= b[i]
	}
	return a
}
