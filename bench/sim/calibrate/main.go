// Command calibrate is the Go half of bench/sim/calibrate.sh: it turns a
// measuring pass of kraken against a real fleet into the sim's origin
// inputs, and sets the sim's figures of a storm beside kraken's (issue
// 15, "Calibration against real storms").
//
//	calibrate sample [-every 100ms] -out opens.json hub-1=http://127.0.1.1:7409/metrics ...
//	calibrate inputs -scenario scenarios/calibrate.yaml -herd herd.json -opens opens.json -idle idle.json \
//	    [-backlog 0] -seed 1 -out calibrated.yaml
//	calibrate compare -scenario calibrated.yaml -seeds 1,2,3 kraken-1.json kraken-2.json kraken-3.json
//
// sample reads each hub's metrics page every -every (its count of the
// sessions it set up, its Welcomes, and its open sessions) until it is
// interrupted (SIGINT or SIGTERM), and writes the readings: the script
// runs it beside the herd pass.
//
// inputs reads each origin's admission rate from the hubs' readings over
// the herd pass (a kraken run whose drop is followed by a short backoff,
// so the devices come back faster than the hubs take them: each hub's
// rate over the steady part of its return, from a tenth to nine tenths of
// the sessions it set up after the drop, as steady.go argues; kraken's
// per-origin held series of the same herd is printed beside it as a
// cross-check) and the handshake latency from the idle pass (a trickle of
// devices: the median Welcome latency), and writes them into the
// scenario's origin fields at -seed (the file's comments kept). The
// backlog is not measured: it says what the origins are (-backlog 0: a
// hub without admission queues every handshake).
//
// compare runs the calibrated file in the simulator at every seed of
// -seeds (the kraken results in the same order, each of a run of the same
// file at that seed), prints each run's figures and the means side by
// side with their ratio (target: within 10 %), and lists any failure of
// kraken's runs the sim does not account for. It exits 1 when a figure
// is off target or a failure is unexplained.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"net/url"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/corralhq/corral/kraken"
	"github.com/corralhq/corral/scenario"
	"github.com/corralhq/corral/sim"
)

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, err)
		if errors.Is(err, errOffTarget) {
			os.Exit(1)
		}
		os.Exit(2)
	}
}

var errOffTarget = errors.New("calibrate: off target")

func run(args []string, out io.Writer) error {
	if len(args) == 0 {
		return errors.New("calibrate: want a command: sample, inputs or compare")
	}
	switch args[0] {
	case "sample":
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		defer stop()
		return sampleCmd(ctx, args[1:], out)
	case "inputs":
		return inputsCmd(args[1:], out)
	case "compare":
		return compareCmd(args[1:], out)
	}
	return fmt.Errorf("calibrate: unknown command %q (want sample, inputs or compare)", args[0])
}

func readKraken(path string) (*kraken.Result, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("calibrate: %w", err)
	}
	var r kraken.Result
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("calibrate: %s: %w", path, err)
	}
	return &r, nil
}

func inputsCmd(args []string, out io.Writer) error {
	fs := flag.NewFlagSet("calibrate inputs", flag.ContinueOnError)
	path := fs.String("scenario", "scenarios/calibrate.yaml", "the scenario file to calibrate")
	herdPath := fs.String("herd", "", "the herd pass's kraken result (JSON)")
	opensPath := fs.String("opens", "", "the hubs' readings over the herd pass (JSON, from calibrate sample)")
	idlePath := fs.String("idle", "", "the idle pass's kraken result (JSON)")
	backlog := fs.Int64("backlog", 0, "what the origins queue (0: unbounded, a hub without admission)")
	seed := fs.Uint64("seed", 1, "the seed written into the file")
	dst := fs.String("out", "", "the calibrated file to write")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *herdPath == "" || *opensPath == "" || *idlePath == "" || *dst == "" {
		return errors.New("calibrate inputs: -herd, -opens, -idle and -out are required")
	}
	herd, err := readKraken(*herdPath)
	if err != nil {
		return err
	}
	opens, err := readSamples(*opensPath)
	if err != nil {
		return err
	}
	idle, err := readKraken(*idlePath)
	if err != nil {
		return err
	}
	in, err := Measure(herd, opens, idle)
	if err != nil {
		return err
	}
	in.Backlog = *backlog
	src, err := os.ReadFile(*path)
	if err != nil {
		return fmt.Errorf("calibrate: %w", err)
	}
	b, err := Apply(*path, src, in, *seed)
	if err != nil {
		return err
	}
	if err := os.WriteFile(*dst, b, 0o644); err != nil {
		return fmt.Errorf("calibrate: %w", err)
	}
	rate, spread := in.Rate()
	fmt.Fprintf(out, "inputs: %.1f new sessions/s per hub (spread %.1f %%: %s after the drop, from each hub's count of sessions set up, read every %v), handshake latency %v (median of %d Welcomes), backlog %d -> %s\n",
		rate, 100*spread, in.Each(), in.Every, in.HandshakeLatency, idle.Latency.Welcome.Count(), in.Backlog, *dst)
	fmt.Fprintf(out, "inputs: teardown %s\n", in.TeardownLine())
	fmt.Fprintf(out, "cross-check, kraken's held series of the herd (it counts a dropped session until kraken has handled its close): %s after kraken's drop\n", in.CrossCheck())
	return nil
}

// Measure is the measuring pass: the rates from the hubs' readings opens
// over the herd (herd's one drop storm gives its share), kraken's held
// series of herd as the cross-check, the latency from idle.
func Measure(herd *kraken.Result, opens *Samples, idle *kraken.Result) (Inputs, error) {
	if len(herd.Storms) != 1 || herd.Storms[0].Kind != "drop" {
		return Inputs{}, errors.New("calibrate: the herd result has no single drop storm")
	}
	steady, err := MeasureRates(opens, herd.Storms[0].Share)
	if err != nil {
		return Inputs{}, err
	}
	held, err := KrakenHeld(herd)
	if err != nil {
		return Inputs{}, err
	}
	lat, err := MeasureLatency(idle)
	if err != nil {
		return Inputs{}, err
	}
	in := Inputs{Steady: steady, Every: opens.Every, Held: held, HandshakeLatency: lat}
	// A teardown too quick for the readings (a small herd) is not an
	// error: the file then says why it has no teardown rate.
	if td, after, err := MeasureTeardowns(opens, herd.Storms[0].Share, steady); err != nil {
		in.NoTeardown = err.Error()
	} else {
		in.Teardown, in.Steady = td, after
	}
	return in, nil
}

func readSamples(path string) (*Samples, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("calibrate: %w", err)
	}
	var s Samples
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, fmt.Errorf("calibrate: %s: %w", path, err)
	}
	return &s, nil
}

// sampleCmd reads the hubs named NAME=URL every -every until ctx ends,
// then writes the readings to -out and how many of each hub's succeeded
// to out.
func sampleCmd(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("calibrate sample", flag.ContinueOnError)
	every := fs.Duration("every", 100*time.Millisecond, "the interval between readings")
	dst := fs.String("out", "", "the readings to write (JSON)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *dst == "" || fs.NArg() == 0 {
		return errors.New("calibrate sample: want -out and at least one hub NAME=URL")
	}
	if *every <= 0 {
		return fmt.Errorf("calibrate sample: -every %v: want a positive interval", *every)
	}
	sm := Sampler{Every: *every, Sources: map[string]Source{}}
	for _, a := range fs.Args() {
		name, u, ok := strings.Cut(a, "=")
		if !ok || name == "" {
			return fmt.Errorf("calibrate sample: %q: want a hub as NAME=URL (its node id and its metrics page)", a)
		}
		if p, err := url.Parse(u); err != nil || (p.Scheme != "http" && p.Scheme != "https") || p.Host == "" {
			return fmt.Errorf("calibrate sample: %s: %q is not an http(s) URL", name, u)
		}
		if _, dup := sm.Sources[name]; dup {
			return fmt.Errorf("calibrate sample: hub %s named twice", name)
		}
		sm.Sources[name] = HTTPSource{URL: u}
	}
	res, err := sm.Run(ctx)
	if err != nil {
		return err
	}
	b, err := json.Marshal(res)
	if err != nil {
		return fmt.Errorf("calibrate: %w", err)
	}
	if err := os.WriteFile(*dst, b, 0o644); err != nil {
		return fmt.Errorf("calibrate: %w", err)
	}
	var each []string
	for _, name := range slices.Sorted(maps.Keys(res.Hubs)) {
		each = append(each, fmt.Sprintf("%s %d (%d failed)", name, len(res.Hubs[name]), res.Failed[name]))
	}
	fmt.Fprintf(out, "the hubs' metrics read every %v: %s\n", res.Every, strings.Join(each, ", "))
	return nil
}

func compareCmd(args []string, out io.Writer) error {
	fs := flag.NewFlagSet("calibrate compare", flag.ContinueOnError)
	path := fs.String("scenario", "", "the calibrated scenario file")
	seedList := fs.String("seeds", "1", "the seeds, comma-separated, of the kraken results in order")
	if err := fs.Parse(args); err != nil {
		return err
	}
	var seeds []uint64
	for _, f := range strings.Split(*seedList, ",") {
		s, err := strconv.ParseUint(strings.TrimSpace(f), 10, 64)
		if err != nil {
			return fmt.Errorf("calibrate compare: -seeds: %q is not a seed", f)
		}
		seeds = append(seeds, s)
	}
	if fs.NArg() != len(seeds) {
		return fmt.Errorf("calibrate compare: %d seeds and %d kraken results: want one result per seed", len(seeds), fs.NArg())
	}
	sc, err := scenario.Load(*path)
	if err != nil {
		return err
	}
	var ks []*kraken.Result
	for _, p := range fs.Args() {
		k, err := readKraken(p)
		if err != nil {
			return err
		}
		ks = append(ks, k)
	}
	rows, unexplained, err := Calibrate(context.Background(), sc, seeds, ks, out)
	if err != nil {
		return err
	}
	if err := Print(out, rows); err != nil {
		return err
	}
	for _, u := range unexplained {
		fmt.Fprintln(out, "unexplained:", u)
	}
	for _, r := range rows {
		if !r.Within {
			return errOffTarget
		}
	}
	if len(unexplained) > 0 {
		return errOffTarget
	}
	return nil
}

// Calibrate runs sc in the simulator at each seed, reads the figures of
// each run and of kraken's result of the same seed (ks[i] is seeds[i]'s),
// writes a line per run to log, and returns the means side by side and
// the failures the sim does not account for.
func Calibrate(ctx context.Context, sc *scenario.Scenario, seeds []uint64, ks []*kraken.Result, log io.Writer) ([]Row, []string, error) {
	if len(sc.Traffic.Disconnects) != 1 {
		return nil, nil, errors.New("calibrate: the scenario needs exactly one drop (traffic.disconnects)")
	}
	dropAt := sc.Traffic.Disconnects[0].At
	var kf, sf []Figures
	for i, seed := range seeds {
		c := *sc
		c.Seed = seed
		c.Sweep = scenario.Sweep{}
		c.Sim.Draws = 1
		res, err := sim.RunAll(ctx, &c, nil)
		if err != nil {
			return nil, nil, err
		}
		if len(res) != 1 {
			return nil, nil, fmt.Errorf("calibrate: the sim ran %d variants, want one", len(res))
		}
		s, err := FromSim(res[0], dropAt)
		if err != nil {
			return nil, nil, err
		}
		k, err := FromKraken(ks[i])
		if err != nil {
			return nil, nil, err
		}
		fmt.Fprintln(log, Line(fmt.Sprintf("seed %d kraken", seed), k))
		fmt.Fprintln(log, Line(fmt.Sprintf("seed %d sim   ", seed), s))
		kf, sf = append(kf, k), append(sf, s)
	}
	km, sm := Mean(kf), Mean(sf)
	return Compare(km, sm), Unexplained(km, sm), nil
}
