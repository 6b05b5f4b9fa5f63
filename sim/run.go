package sim

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"

	"github.com/corralhq/corral/scenario"
)

// Progress is told after each step of each run: the run's index (its
// place in RunAll's results) and name (with its seed when the scenario
// draws several), the steps done and the steps of the run. RunAll calls
// it from one goroutine at a time, the steps of runs in parallel
// interleaved.
type Progress func(run int, name string, done, total int)

// RunAll runs every variant of sc's sweep (or sc alone), each
// sc.Sim.Draws times at the seeds sc.Seed, sc.Seed+1, ..., and returns
// their results in the sweep's order, a variant's draws together in seed
// order (Result.Draw and Result.Draws number them). Runs go on in
// parallel on up to GOMAXPROCS goroutines (each run is deterministic on
// its own). It stops early, with ctx's error, when ctx is done. progress
// may be nil.
func RunAll(ctx context.Context, sc *scenario.Scenario, progress Progress) ([]*Result, error) {
	vs, err := sc.Variants()
	if err != nil {
		return nil, fmt.Errorf("sim: %w", err)
	}
	draws := max(1, sc.Sim.Draws)
	type job struct {
		sc   scenario.Scenario
		name string // the variant's, as the result labels it
		bar  string // with the seed, for progress
		draw int
	}
	var jobs []job
	for _, v := range vs {
		v.Scenario.WithDefaults() // once, before the runs share its slices
		for d := range draws {
			j := job{sc: *v.Scenario, name: v.Name, bar: v.Name, draw: d + 1}
			j.sc.Seed = v.Scenario.Seed + uint64(d)
			if draws > 1 {
				j.bar = strings.TrimSpace(fmt.Sprintf("%s seed %d", v.Name, j.sc.Seed))
			}
			jobs = append(jobs, j)
		}
	}
	out := make([]*Result, len(jobs))
	errs := make([]error, len(jobs))
	var mu sync.Mutex // serialises progress and hands out jobs
	next := 0
	var wg sync.WaitGroup
	for range min(runtime.GOMAXPROCS(0), len(jobs)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				mu.Lock()
				i := next
				next++
				mu.Unlock()
				if i >= len(jobs) || ctx.Err() != nil {
					return
				}
				j := &jobs[i]
				s, err := New(&j.sc, j.name)
				if err != nil {
					errs[i] = err
					return
				}
				for !s.Done() {
					if s.now%64 == 0 && ctx.Err() != nil {
						return
					}
					s.Step()
					if progress != nil {
						mu.Lock()
						progress(i, j.bar, s.now, s.steps)
						mu.Unlock()
					}
				}
				r := s.Result()
				if draws > 1 {
					r.Draw, r.Draws = j.draw, draws
				}
				out[i] = r
			}
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	if ctx.Err() != nil {
		return nil, fmt.Errorf("sim: %w", ctx.Err())
	}
	return out, nil
}
