package sim

import (
	"testing"
	"time"

	"github.com/corralhq/corral/scenario"
)

// TestConservation checks after every step, by walking the engine's
// structures, that no device is created or lost, under each backoff
// policy and overload mode, with arrivals, drops and a region loss.
func TestConservation(t *testing.T) {
	for _, mode := range []string{"errors", "adaptive"} {
		for _, policy := range []string{"none", "exponential", "full", "equal", "decorrelated", "grpc"} {
			t.Run(mode+"/"+policy, func(t *testing.T) {
				sc := storm(policy, 2_000_003)
				sc.Duration = 150 * time.Second
				sc.Overload.Mode = mode
				sc.Population.Initial = 1_000_001
				sc.Origins[0].Backlog = 20_000
				sc.Origins = append(sc.Origins, scenario.Origin{Name: "far", Count: 2, Region: "far", MaxConnections: 300_000, MaxNewPerSecond: 5_000})
				sc.Traffic.Arrivals = []scenario.Arrival{{At: 5 * time.Second, Over: 20 * time.Second, Devices: 900_000}}
				sc.Traffic.RegionLoss = []scenario.RegionLoss{{At: 40 * time.Second, Region: "far", For: 30 * time.Second}}
				sc.WithDefaults()
				s := mustNew(t, sc)
				for !s.Done() {
					s.Step()
					c, err := s.Census()
					if err != nil {
						t.Fatalf("step %d: %v", s.now, err)
					}
					if c.Total() != s.Devices() {
						t.Fatalf("step %d: census %+v adds up to %d, want %d", s.now, c, c.Total(), s.Devices())
					}
				}
				r := s.Result()
				if r.Summary.FinalConnected == 0 || r.Summary.Attempts == 0 {
					t.Fatalf("nothing happened: %+v", r.Summary)
				}
			})
		}
	}
}
