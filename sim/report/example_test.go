package report_test

import (
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/corralhq/corral/backoff"
	"github.com/corralhq/corral/scenario"
	"github.com/corralhq/corral/sim"
	"github.com/corralhq/corral/sim/report"
)

func ExampleWriteDir() {
	sc := &scenario.Scenario{
		Name:       "tiny",
		Duration:   30 * time.Second,
		Population: scenario.Population{Devices: 1000, Initial: 1000},
		DNS:        scenario.DNS{Policy: "multivalue"},
		Origins:    []scenario.Origin{{Name: "o", Count: 2, Headroom: 1.5, MaxNewPerSecond: 100}},
		Client:     scenario.Client{Backoff: backoff.Config{Policy: "full"}},
		Traffic:    scenario.Traffic{Disconnects: []scenario.Disconnect{{At: 5 * time.Second, Share: 1}}},
	}
	s, err := sim.New(sc, "")
	if err != nil {
		fmt.Println(err)
		return
	}
	dir, _ := os.MkdirTemp("", "simreport")
	defer os.RemoveAll(dir)
	paths, err := report.WriteDir(dir, sc, []*sim.Result{s.Run(nil)})
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, p := range paths {
		fmt.Println(filepath.Base(p))
	}
	fmt.Println(report.Verdict(s.Result()))
	// Output:
	// result.json
	// report.html
	// tiny: 100 % of connection attempts failed at the worst step (t = 7 s); more than 1 % failed for 4 s; 67 % of all attempts failed over the run. Concentration: o-1 took 100 % of the new streams at t = 6 s; o-1 held up to 100 % of the connections (at t = 7 s); an even share is 50 %. The fullest origin reached 100 % of its connection capacity. P0 devices were without a connection 9.6 s on average; the fleet had not settled at the end (750 of 1000 devices connected).
}
