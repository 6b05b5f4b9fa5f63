package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/vbauerster/mpb/v8"
	"github.com/vbauerster/mpb/v8/decor"

	"github.com/corralhq/corral/internal/logging"
	"github.com/corralhq/corral/scenario"
	"github.com/corralhq/corral/scenarios"
	"github.com/corralhq/corral/sim"
	simreport "github.com/corralhq/corral/sim/report"
)

// simFlags are the flags of `corral sim`.
type simFlags struct {
	asJSON  bool
	wide    bool
	out     string
	scale   float64
	seed    uint64
	every   time.Duration
	noSteps bool
}

func newSimCmd(g *globals) *cobra.Command {
	var f simFlags
	cmd := &cobra.Command{
		Use:   "sim [SCENARIO.yaml | NAME]",
		Short: "Simulate a fleet of devices through a scenario (cohorts, real policy code)",
		Long: `sim runs a scenario file on the cohort simulator: devices grouped by state,
priority, tenant and point of presence, on the real backoff, DNS answer,
limit and shard code. Every variant of the file's sweep runs in turn.

With no argument it lists the scenarios shipped with corral (built into
the binary); NAME runs one of them, a path runs that file (a file that
exists wins over a shipped name).

It prints a summary table that fits 100 columns (--wide: every column),
with --every each run's series, or with --json {scenario, runs:
[{scenario, variant, seed, devices, step_seconds, priorities, origins,
causes, summary, steps}]}. --out DIR also writes result.json and
report.html: what was simulated, a verdict per run, the table with its
columns explained, and charts, in one file that opens without a network.
A file with sim.draws: N runs each variant at N seeds (seed, seed+1, ...):
the table then opens with each variant's median and worst over its draws
and how many draws had failures, the rest shows each variant's median
draw, and --json keeps the series of the median draws only.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return listScenarios(g.stdout)
			}
			return runSim(cmd, g, args[0], f)
		},
	}
	fl := cmd.Flags()
	fl.BoolVar(&f.asJSON, "json", false, "print the runs as JSON")
	fl.BoolVar(&f.wide, "wide", false, "print every column of the summary table (wider than 100 columns)")
	fl.StringVar(&f.out, "out", "", "write result.json and report.html (verdicts, table, charts) into this directory")
	fl.Float64Var(&f.scale, "scale", 0, "population factor in (0, 1], overriding the file's scale")
	fl.Uint64Var(&f.seed, "seed", 0, "seed, overriding the file's seed")
	fl.DurationVar(&f.every, "every", 0, "also print each run's series, one row per this much event time")
	fl.BoolVar(&f.noSteps, "no-steps", false, "leave the per-step series out of --json")
	return cmd
}

func runSim(cmd *cobra.Command, g *globals, path string, f simFlags) error {
	sc, err := loadScenario(path)
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
	simreport.KeepMedianSteps(runs) // a scenario of many draws: the series of the charted one
	if f.out != "" {
		paths, err := simreport.WriteDir(f.out, sc, runs)
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
	return printSim(g.stdout, runs, f.every, f.wide)
}

// loadScenario reads the scenario file at path or, when there is no such
// file, the shipped scenario of that name.
func loadScenario(path string) (*scenario.Scenario, error) {
	if _, err := os.Stat(path); err != nil && errors.Is(err, fs.ErrNotExist) {
		if data, ok := scenarios.File(path); ok {
			return scenario.Decode(path+" (built in)", data)
		}
		return nil, fmt.Errorf("scenario: %s: no such file, and no shipped scenario of that name (corral sim lists them)", path)
	}
	return scenario.Load(path)
}

// listScenarios prints the shipped scenarios, each with its description,
// wrapped to 100 columns. A name is written as the path scenarios/NAME.yaml
// when that file is under the working directory.
func listScenarios(w io.Writer) error {
	var b strings.Builder
	b.WriteString("Scenarios shipped with corral (corral sim NAME runs one; corral sim FILE runs a file):\n\n")
	names := scenarios.Names()
	label := make([]string, len(names))
	wide := 0
	for i, n := range names {
		label[i] = n
		if p := filepath.Join("scenarios", n+".yaml"); fileExists(p) {
			label[i] = p
		}
		wide = max(wide, len(label[i]))
	}
	for i, n := range names {
		desc := ""
		if data, ok := scenarios.File(n); ok {
			if sc, err := scenario.Decode(n, data); err == nil {
				desc = sc.Description
			} else {
				desc = "(does not load: " + err.Error() + ")"
			}
		}
		indent := strings.Repeat(" ", 2+wide+2)
		lines := wrap(desc, 100-len(indent))
		if len(lines) == 0 {
			lines = []string{""}
		}
		fmt.Fprintf(&b, "  %-*s  %s\n", wide, label[i], lines[0])
		for _, l := range lines[1:] {
			b.WriteString(indent + l + "\n")
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func fileExists(p string) bool {
	st, err := os.Stat(p)
	return err == nil && !st.IsDir()
}

// wrap cuts text into lines of at most width characters at spaces (a
// longer word gets a line of its own).
func wrap(text string, width int) []string {
	var lines []string
	line := ""
	for _, word := range strings.Fields(text) {
		switch {
		case line == "":
			line = word
		case len(line)+1+len(word) <= width:
			line += " " + word
		default:
			lines = append(lines, line)
			line = word
		}
	}
	if line != "" {
		lines = append(lines, line)
	}
	return lines
}

func printSim(w io.Writer, runs []*sim.Result, every time.Duration, wide bool) error {
	if groups := simreport.GroupDraws(runs); simreport.Drawn(groups) {
		// Each variant ran at several seeds: its median and worst first,
		// then the median draw of each in the usual table.
		if err := simreport.DrawsTable(groups).Write(w); err != nil {
			return err
		}
		fmt.Fprintln(w)
		runs = simreport.Medians(groups)
		t := simreport.SummaryTable(runs, wide)
		t.Title = "median draw of each variant"
		if err := t.Write(w); err != nil {
			return err
		}
	} else if err := simreport.SummaryTable(runs, wide).Write(w); err != nil {
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

// progressBars draws one bar per run on w (runs go on in parallel; sim
// calls the progress function one call at a time).
func progressBars(w io.Writer) (*mpb.Progress, sim.Progress) {
	p := mpb.New(mpb.WithOutput(w), mpb.WithWidth(40))
	bars := map[int]*mpb.Bar{}
	return p, func(run int, name string, done, total int) {
		bar := bars[run]
		if bar == nil {
			if name == "" {
				name = "run"
			}
			bar = p.AddBar(int64(total), mpb.PrependDecorators(decor.Name(name, decor.WCSyncSpaceR)),
				mpb.AppendDecorators(decor.CountersNoUnit("%d/%d steps"), decor.Elapsed(decor.ET_STYLE_GO, decor.WCSyncSpace)))
			bars[run] = bar
		}
		bar.SetCurrent(int64(done))
	}
}
