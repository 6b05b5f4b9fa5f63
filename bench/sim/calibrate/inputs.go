package main

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/corralhq/corral/kraken"
	"github.com/corralhq/corral/scenario"
)

// Inputs are the sim's origin inputs measured from a real fleet by the
// measuring pass (two kraken runs that are not the storms compared, and
// the hubs' own counts read during the herd).
type Inputs struct {
	// Steady is each origin's steady part after the herd pass's drop, by
	// node id, from the hub's own count of the sessions it set up; its
	// Rate is the origin's admission rate (steady.go says why that part
	// and that count).
	Steady map[string]Steady
	// Every is the interval of the hubs' readings Steady was read from.
	Every time.Duration
	// Held is the same herd read from kraken's per-origin held series, a
	// cross-check printed beside the inputs and written nowhere (it lags
	// the hubs by kraken's teardown of the dropped sessions).
	Held map[string]Steady
	// Teardown is each origin's teardown part after the same drop, by
	// node id (teardown.go); nil when it could not be read, and
	// NoTeardown says why.
	Teardown   map[string]Teardown
	NoTeardown string
	// HandshakeLatency is the median time from the start of an attempt
	// (its TCP connect) to its Welcome over the idle pass: a trickle of
	// devices that never find a queue.
	HandshakeLatency time.Duration
	// Backlog is what the origins queue (0: unbounded), set by the caller
	// from what the origins are, not measured: a hub without admission
	// queues every handshake (0); a stand-in that admits at a rate and
	// queues nothing is modelled by one step's set-ups.
	Backlog int64
}

// Rate is the mean of the origins' rates: the sim's origin group is one
// kind of origin. Spread is the largest relative distance of one origin's
// rate from it.
func (in Inputs) Rate() (mean, spread float64) {
	if len(in.Steady) == 0 {
		return 0, 0
	}
	for _, s := range in.Steady {
		mean += s.Rate()
	}
	mean /= float64(len(in.Steady))
	for _, s := range in.Steady {
		spread = max(spread, math.Abs(s.Rate()-mean)/mean)
	}
	return mean, spread
}

// TeardownRate is the mean of the origins' teardown rates when doing
// nothing else (Teardown.Alone at each one's steady rate), and the
// largest relative distance of one from it; 0 when none was read.
func (in Inputs) TeardownRate() (mean, spread float64) {
	if len(in.Teardown) == 0 {
		return 0, 0
	}
	alone := map[string]float64{}
	for n, td := range in.Teardown {
		alone[n] = td.Alone(in.Steady[n].Rate())
		mean += alone[n]
	}
	mean /= float64(len(alone))
	for _, a := range alone {
		spread = max(spread, math.Abs(a-mean)/mean)
	}
	return mean, spread
}

// TeardownLine says what the teardown reading was, origin by origin
// ("hub-1 cut 16592, 2098/s over 0.48-6.81 s with 411 set-ups/s
// meanwhile: 2209/s alone, ..."), or why there is none.
func (in Inputs) TeardownLine() string {
	if len(in.Teardown) == 0 {
		return "not measured: " + in.NoTeardown
	}
	var b strings.Builder
	mean, spread := in.TeardownRate()
	fmt.Fprintf(&b, "%.1f sessions ended/s per hub alone (spread %.1f %%: ", mean, 100*spread)
	for i, n := range slices.Sorted(maps.Keys(in.Teardown)) {
		td := in.Teardown[n]
		if i > 0 {
			b.WriteString(", ")
		}
		d := (td.To - td.From).Seconds()
		fmt.Fprintf(&b, "%s cut %d, %.0f/s over %.2f-%.2f s with %.0f set-ups/s meanwhile: %.0f/s alone", n, td.Cut, td.Observed(), td.From.Seconds(), td.To.Seconds(), td.SetUp/d, td.Alone(in.Steady[n].Rate()))
	}
	b.WriteString(")")
	return b.String()
}

// Each is the origins' rates and steady parts in node-id order, as the
// calibrated file and the inputs line print them: "hub-1 2480/s over
// 0.31-5.68 s, ...".
func (in Inputs) Each() string { return each(in.Steady, nil) }

// CrossCheck is kraken's held series' reading of the same herd, origin by
// origin, beside the hubs' own count of what each took back: "hub-1 took
// 16650 back (its own count 16652), 5575/s over 8.06-10.47 s, ...".
func (in Inputs) CrossCheck() string {
	if len(in.Held) == 0 {
		return "none (no origin's held series reached nine tenths)"
	}
	return each(in.Held, in.Steady)
}

func each(parts, own map[string]Steady) string {
	var b strings.Builder
	for i, n := range slices.Sorted(maps.Keys(parts)) {
		s := parts[n]
		if i > 0 {
			b.WriteString(", ")
		}
		if own == nil {
			fmt.Fprintf(&b, "%s %.0f/s over %.2f-%.2f s", n, s.Rate(), s.From.Seconds(), s.To.Seconds())
			continue
		}
		mine := "none"
		if o, ok := own[n]; ok {
			mine = strconv.FormatInt(o.Took, 10)
		}
		fmt.Fprintf(&b, "%s took %d back (its own count %s), %.0f/s over %.2f-%.2f s", n, s.Took, mine, s.Rate(), s.From.Seconds(), s.To.Seconds())
	}
	return b.String()
}

// MeasureLatency reads the handshake latency from idle, a kraken run of a
// trickle of devices: the median of its Welcome latencies
// (kraken.Histogram.Quantile takes a percentile: 50, not 0.5).
func MeasureLatency(idle *kraken.Result) (time.Duration, error) {
	h := idle.Latency.Welcome
	if h == nil || h.Count() == 0 {
		return 0, errors.New("calibrate: the idle result has no Welcome")
	}
	return h.Quantile(50), nil
}

var (
	seedLine = regexp.MustCompile(`(?m)^seed:.*$`)
	fields   = map[string]*regexp.Regexp{}
)

func field(key string) *regexp.Regexp {
	if re, ok := fields[key]; ok {
		return re
	}
	re := regexp.MustCompile(`(?m)^(\s+` + key + `:\s*)\S+\s*$`)
	fields[key] = re
	return re
}

// teardownValue is the teardown_per_second line's value: the measured
// rate, or, when none was read, why, with out true: the key is then
// commented out (ending a session is free in the sim).
func teardownValue(in Inputs) (string, bool) {
	mean, spread := in.TeardownRate()
	if mean <= 0 {
		return "not measured (ending a session is free): " + in.NoTeardown, true
	}
	return fmt.Sprintf("%.1f # measured: the mean over %d origins of the rate each ends sessions at alone, from its open sessions less its Welcomes since the drop (read every %v), a tenth to nine tenths of what the drop cut, over 1 - its set-ups meanwhile / its steady rate (spread %.1f %%)", mean, len(in.Teardown), in.Every, 100*spread), false
}

// Apply writes in into the scenario text src (a file with one origin
// group whose max_new_per_second, handshake_latency, backlog and
// teardown_per_second keys are each on a line of their own) at seed, and
// returns the new text, checked by the scenario decoder. The file's comments stay; the lines changed say
// where their values come from.
func Apply(name string, src []byte, in Inputs, seed uint64) ([]byte, error) {
	rate, spread := in.Rate()
	if rate <= 0 {
		return nil, errors.New("calibrate: no measured rate to write")
	}
	if in.HandshakeLatency <= 0 {
		return nil, errors.New("calibrate: no measured handshake latency to write")
	}
	out := src
	td, tdOut := teardownValue(in)
	for _, kv := range []struct {
		key, value string
		out        bool // comment the line out, value saying why
	}{
		{"max_new_per_second", fmt.Sprintf("%.1f # measured: the mean over %d origins of each one's rate over the steady part of a herd, from its own count of the sessions it set up (read every %v), a tenth to nine tenths of what it took back, times after the drop (%s; spread %.1f %%)", rate, len(in.Steady), in.Every, in.Each(), 100*spread), false},
		{"handshake_latency", fmt.Sprintf("%v # measured: the median Welcome latency of an idle trickle", in.HandshakeLatency.Round(10*time.Microsecond)), false},
		{"backlog", strconv.FormatInt(in.Backlog, 10) + " # what the origins queue (0: unbounded), from what they are", false},
		{"teardown_per_second", td, tdOut},
	} {
		re := field(kv.key)
		if n := len(re.FindAllIndex(out, -1)); n != 1 {
			return nil, fmt.Errorf("calibrate: %s has %d lines %q, want one (one origin group, a key per line)", name, n, kv.key+":")
		}
		if kv.out {
			out = regexp.MustCompile(`(?m)^([ \t]+)`+kv.key+`:.*$`).ReplaceAll(out, []byte("${1}# "+kv.key+" "+kv.value))
			continue
		}
		out = re.ReplaceAll(out, []byte("${1}"+kv.value))
	}
	if !seedLine.Match(out) {
		return nil, fmt.Errorf("calibrate: %s has no seed line", name)
	}
	out = seedLine.ReplaceAll(out, []byte("seed: "+strconv.FormatUint(seed, 10)))
	if _, err := scenario.Decode(name, out); err != nil {
		return nil, fmt.Errorf("calibrate: the calibrated file does not decode: %w", err)
	}
	return out, nil
}
