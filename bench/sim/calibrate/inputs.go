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

// Apply writes in into the scenario text src (a file with one origin
// group whose max_new_per_second, handshake_latency and backlog keys are
// each on a line of their own) at seed, and returns the new text, checked
// by the scenario decoder. The file's comments stay; the lines changed say
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
	for _, kv := range []struct{ key, value string }{
		{"max_new_per_second", fmt.Sprintf("%.1f # measured: the mean over %d origins of each one's rate over the steady part of a herd, from its own count of the sessions it set up (read every %v), a tenth to nine tenths of what it took back, times after the drop (%s; spread %.1f %%)", rate, len(in.Steady), in.Every, in.Each(), 100*spread)},
		{"handshake_latency", fmt.Sprintf("%v # measured: the median Welcome latency of an idle trickle", in.HandshakeLatency.Round(10*time.Microsecond))},
		{"backlog", strconv.FormatInt(in.Backlog, 10) + " # what the origins queue (0: unbounded), from what they are"},
	} {
		re := field(kv.key)
		if n := len(re.FindAllIndex(out, -1)); n != 1 {
			return nil, fmt.Errorf("calibrate: %s has %d lines %q, want one (one origin group, a key per line)", name, n, kv.key+":")
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
