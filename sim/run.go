package sim

import (
	"context"
	"fmt"
	"strings"

	"github.com/corralhq/corral/scenario"
)

// Progress is told after each step of each run: the run's index and name
// (with its seed when the scenario draws several), the steps done and the
// steps of the run.
type Progress func(run int, name string, done, total int)

// RunAll runs every variant of sc's sweep (or sc alone), one after the
// other, each sc.Sim.Draws times at the seeds sc.Seed, sc.Seed+1, ...,
// and returns their results in the sweep's order, a variant's draws
// together in seed order (Result.Draw and Result.Draws number them). It
// stops early, with ctx's error, when ctx is done. progress may be nil.
func RunAll(ctx context.Context, sc *scenario.Scenario, progress Progress) ([]*Result, error) {
	vs, err := sc.Variants()
	if err != nil {
		return nil, fmt.Errorf("sim: %w", err)
	}
	draws := max(1, sc.Sim.Draws)
	out := make([]*Result, 0, len(vs)*draws)
	for _, v := range vs {
		for d := range draws {
			one := *v.Scenario
			one.Seed = v.Scenario.Seed + uint64(d)
			name := v.Name
			if draws > 1 {
				name = strings.TrimSpace(fmt.Sprintf("%s seed %d", v.Name, one.Seed))
			}
			s, err := New(&one, v.Name)
			if err != nil {
				return nil, err
			}
			run := len(out)
			for !s.Done() {
				if s.now%64 == 0 && ctx.Err() != nil {
					return nil, fmt.Errorf("sim: %w", ctx.Err())
				}
				s.Step()
				if progress != nil {
					progress(run, name, s.now, s.steps)
				}
			}
			r := s.Result()
			if draws > 1 {
				r.Draw, r.Draws = d+1, draws
			}
			out = append(out, r)
		}
	}
	return out, nil
}
