package main

import (
	"errors"
	"fmt"
	"math"
	"regexp"
	"slices"
	"strconv"
	"time"

	"github.com/corralhq/corral/kraken"
	"github.com/corralhq/corral/scenario"
)

// Inputs are the sim's origin inputs measured from a real fleet by the
// measuring pass (two kraken runs that are not the storms compared).
type Inputs struct {
	// Rates is each origin's admission rate under a herd, in new sessions
	// per second, by node id: the largest rise of the sessions it held
	// over any Window whole seconds after the herd pass's drop, over
	// Window.
	Rates map[string]float64
	// Window is the span the rates were measured over.
	Window time.Duration
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
	if len(in.Rates) == 0 {
		return 0, 0
	}
	for _, r := range in.Rates {
		mean += r
	}
	mean /= float64(len(in.Rates))
	for _, r := range in.Rates {
		spread = max(spread, math.Abs(r-mean)/mean)
	}
	return mean, spread
}

// MeasureRates reads each origin's admission rate from herd, a kraken run
// whose one storm drops a share of the sessions at once and whose
// devices come back faster than the origins take them (a short backoff):
// the largest rise of the sessions an origin held over any window whole
// seconds after the drop (or from the drop itself to the end of its
// window-th second), over that time. The herd must keep the origins busy
// for longer than the window, or the rise measures the herd, not the
// origins: an origin back to 99 % of its final sessions within the window
// is refused.
func MeasureRates(herd *kraken.Result, window int) (map[string]float64, error) {
	if window < 1 {
		return nil, errors.New("calibrate: the rate window must be at least a second")
	}
	if len(herd.Storms) != 1 || herd.Storms[0].Kind != "drop" {
		return nil, errors.New("calibrate: the herd result has no single drop storm")
	}
	storm := herd.Storms[0]
	from := int(storm.AtSeconds)
	if len(herd.HeldByOrigin) == 0 {
		return nil, errors.New("calibrate: the herd result holds no origin's series")
	}
	if from < 1 {
		return nil, errors.New("calibrate: the herd's drop comes in its first second: no second before it")
	}
	rates := map[string]float64{}
	for name, held := range herd.HeldByOrigin {
		if len(held) < from+window {
			return nil, fmt.Errorf("calibrate: the herd's series of %s ends %d s after the drop, within the %d s window: give the herd more devices", name, len(held)-from, window)
		}
		final := held[len(held)-1]
		// From the drop itself: what the origin held just after it (the
		// share the drop left) to the end of the window's last second.
		base := int64(math.Round(float64(held[from-1]) * (1 - storm.Share)))
		end := from + window - 1
		if held[end] >= final-final/100 {
			return nil, fmt.Errorf("calibrate: %s held 99 %% of its final sessions within the %d s window after the drop: the herd ended before it measured the hub (give the herd more devices, or a shorter -window)", name, window)
		}
		best := float64(held[end]-base) / (float64(end+1) - storm.AtSeconds)
		for k := from; k+window < len(held); k++ {
			best = max(best, float64(held[k+window]-held[k])/float64(window))
		}
		rates[name] = best
	}
	return rates, nil
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
	names := make([]string, 0, len(in.Rates))
	for n := range in.Rates {
		names = append(names, n)
	}
	slices.Sort(names)
	var each string
	for _, n := range names {
		each += fmt.Sprintf(" %s %.0f/s", n, in.Rates[n])
	}
	out := src
	for _, kv := range []struct{ key, value string }{
		{"max_new_per_second", fmt.Sprintf("%.1f # measured: the mean over %d origins of the largest rise over %v after a herd (%s; spread %.1f %%)", rate, len(names), in.Window, each[1:], 100*spread)},
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
