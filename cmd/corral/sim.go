package main

import (
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"
	"github.com/vbauerster/mpb/v8"
	"github.com/vbauerster/mpb/v8/decor"

	"github.com/corralhq/corral/internal/logging"
	"github.com/corralhq/corral/scenario"
	"github.com/corralhq/corral/sim"
	simreport "github.com/corralhq/corral/sim/report"
)

// simFlags are the flags of `corral sim`.
type simFlags struct {
	asJSON  bool
	out     string
	scale   float64
	seed    uint64
	every   time.Duration
	noSteps bool
}

func newSimCmd(g *globals) *cobra.Command {
	var f simFlags
	cmd := &cobra.Command{
		Use:   "sim SCENARIO.yaml",
		Short: "Simulate a fleet of devices through a scenario (cohorts, real policy code)",
		Long: `sim runs a scenario file on the cohort simulator: devices grouped by state,
priority, tenant and point of presence, on the real backoff, DNS answer,
limit and shard code. Every variant of the file's sweep runs in turn.

It prints a summary table (and, with --every, the series), or with --json
{scenario, runs: [{scenario, variant, seed, devices, step_seconds,
priorities, origins, causes, summary, steps}]}. --out DIR also writes
result.json, PNG and SVG charts and report.html.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runSim(cmd, g, args[0], f)
		},
	}
	fl := cmd.Flags()
	fl.BoolVar(&f.asJSON, "json", false, "print the runs as JSON")
	fl.StringVar(&f.out, "out", "", "write result.json, charts (PNG, SVG) and report.html into this directory")
	fl.Float64Var(&f.scale, "scale", 0, "population factor in (0, 1], overriding the file's scale")
	fl.Uint64Var(&f.seed, "seed", 0, "seed, overriding the file's seed")
	fl.DurationVar(&f.every, "every", 0, "also print each run's series, one row per this much event time")
	fl.BoolVar(&f.noSteps, "no-steps", false, "leave the per-step series out of --json")
	return cmd
}

func runSim(cmd *cobra.Command, g *globals, path string, f simFlags) error {
	sc, err := scenario.Load(path)
	if err != nil {
		return err
	}
	if f.scale != 0 {
		sc.Scale = f.scale
	}
	if f.seed != 0 {
		sc.Seed = f.seed
	}
	if err := sc.Validate(); err != nil {
		return fmt.Errorf("scenario: %s: %w", path, err)
	}
	var progress sim.Progress
	var bars *mpb.Progress
	if logging.IsTerminal(g.stderr) {
		bars, progress = progressBars(g.stderr)
	}
	runs, err := sim.RunAll(cmd.Context(), sc, progress)
	if bars != nil {
		bars.Shutdown()
	}
	if err != nil {
		return err
	}
	if f.out != "" {
		paths, err := simreport.WriteDir(f.out, runs)
		if err != nil {
			return err
		}
		fmt.Fprintf(g.stderr, "sim: wrote %d files to %s (report.html)\n", len(paths), f.out)
	}
	if f.asJSON {
		if f.noSteps {
			for _, r := range runs {
				r.Steps = nil
			}
		}
		return simreport.JSON(g.stdout, runs)
	}
	return printSim(g.stdout, runs, f.every)
}

func printSim(w io.Writer, runs []*sim.Result, every time.Duration) error {
	if err := simreport.SummaryTable(runs).Write(w); err != nil {
		return err
	}
	if t := simreport.TenantTable(runs); t != nil {
		fmt.Fprintln(w)
		if err := t.Write(w); err != nil {
			return err
		}
	}
	if every > 0 {
		for _, r := range runs {
			fmt.Fprintln(w)
			if err := simreport.SeriesTable(r, every).Write(w); err != nil {
				return err
			}
		}
	}
	return nil
}

// progressBars draws one bar per run on w.
func progressBars(w io.Writer) (*mpb.Progress, sim.Progress) {
	p := mpb.New(mpb.WithOutput(w), mpb.WithWidth(40))
	var bar *mpb.Bar
	current := -1
	return p, func(run int, name string, done, total int) {
		if run != current {
			current = run
			if name == "" {
				name = "run"
			}
			bar = p.AddBar(int64(total), mpb.PrependDecorators(decor.Name(name, decor.WCSyncSpaceR)),
				mpb.AppendDecorators(decor.CountersNoUnit("%d/%d steps"), decor.Elapsed(decor.ET_STYLE_GO, decor.WCSyncSpace)))
		}
		bar.SetCurrent(int64(done))
	}
}
