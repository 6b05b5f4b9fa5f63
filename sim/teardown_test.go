package sim

import (
	"math"
	"testing"
	"time"

	"github.com/corralhq/corral/backoff"
	"github.com/corralhq/corral/scenario"
)

// herdBack is 10,000 devices held on one origin that takes 1,000 new
// sessions per second, all dropped at 5 s and back within 100 ms (faster
// than the origin takes them), with the origin's teardown rate td (0:
// free). It returns the seconds from the drop until 99 % are back.
func herdBack(t *testing.T, td float64) float64 {
	t.Helper()
	sc := &scenario.Scenario{
		Name:       "teardown",
		Duration:   60 * time.Second,
		Step:       100 * time.Millisecond,
		Population: scenario.Population{Devices: 10_000, Initial: 10_000},
		DNS:        scenario.DNS{Policy: "multivalue"},
		Origins: []scenario.Origin{{Name: "hub", Headroom: 2, MaxNewPerSecond: 1000,
			HandshakeLatency: time.Millisecond, TeardownPerSecond: td}},
		Client:  scenario.Client{Backoff: backoff.Config{Policy: "full", Base: 100 * time.Millisecond, Cap: 100 * time.Millisecond}, ConnectTimeout: time.Minute},
		Traffic: scenario.Traffic{Disconnects: []scenario.Disconnect{{At: 5 * time.Second, Share: 1}}},
	}
	sc.WithDefaults()
	if err := sc.Validate(); err != nil {
		t.Fatal(err)
	}
	r := mustNew(t, sc).Run(nil)
	for _, s := range r.Steps {
		if s.T > 5 && s.Connected >= 9_900 {
			return s.T + 0.1 - 5
		}
	}
	t.Fatalf("teardown %v: 99 %% never back", td)
	return 0
}

// TestTeardownDelaysTheReturn: a session that ends costs its origin
// 1/teardown_per_second in the handshake queue, ahead of the attempts that
// come after, so 10,000 sessions torn down at 5,000 a second put the
// return 2 s later than a free teardown (9.9 s for 99 % at 1,000 a
// second); an origin that crashes tears nothing down.
func TestTeardownDelaysTheReturn(t *testing.T) {
	free := herdBack(t, 0)
	paid := herdBack(t, 5000)
	if math.Abs(free-9.9) > 0.25 {
		t.Errorf("free teardown: 99 %% back after %.2f s, want about 9.9 s (9,900 at 1,000/s)", free)
	}
	if d := paid - free; math.Abs(d-2) > 0.25 {
		t.Errorf("teardown at 5,000/s: 99 %% back %.2f s later than free (%.2f against %.2f s), want 2 s (10,000 / 5,000)", d, paid, free)
	}
}
