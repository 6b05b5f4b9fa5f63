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
	paths, err := report.WriteDir(dir, []*sim.Result{s.Run(nil)})
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, p := range paths {
		if filepath.Ext(p) != ".png" { // every chart is also written as PNG
			fmt.Println(filepath.Base(p))
		}
	}
	// Output:
	// result.json
	// run01-base-connected.svg
	// run01-base-attempts.svg
	// run01-base-errors.svg
	// run01-base-5xx.svg
	// run01-base-origins.svg
	// report.html
}
