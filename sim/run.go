package sim

import (
	"context"
	"fmt"

	"github.com/corralhq/corral/scenario"
)

// Progress is told after each step of each run: the run's index and name,
// the steps done and the steps of the run.
type Progress func(run int, name string, done, total int)

// RunAll runs every variant of sc's sweep (or sc alone), one after the
// other, and returns their results in the sweep's order. It stops early,
// with ctx's error, when ctx is done. progress may be nil.
func RunAll(ctx context.Context, sc *scenario.Scenario, progress Progress) ([]*Result, error) {
	vs, err := sc.Variants()
	if err != nil {
		return nil, fmt.Errorf("sim: %w", err)
	}
	out := make([]*Result, 0, len(vs))
	for i, v := range vs {
		s, err := New(v.Scenario, v.Name)
		if err != nil {
			return nil, err
		}
		for !s.Done() {
			if s.now%64 == 0 && ctx.Err() != nil {
				return nil, fmt.Errorf("sim: %w", ctx.Err())
			}
			s.Step()
			if progress != nil {
				progress(i, v.Name, s.now, s.steps)
			}
		}
		out = append(out, s.Result())
	}
	return out, nil
}
