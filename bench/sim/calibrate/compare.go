package main

import (
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

// Target is the largest relative distance of a sim figure from kraken's
// that the comparison calls within target (issue 15: within 10 %).
const Target = 0.10

// Row is one figure of the comparison, side by side.
type Row struct {
	// Figure names what is compared; Unit how its values print ("%",
	// "s", "" for a count or a ratio).
	Figure string
	Unit   string
	// Kraken and Sim are the two values; Ratio is Sim over Kraken (1 when
	// both are 0, +Inf when only Kraken's is 0).
	Kraken, Sim, Ratio float64
	// Within is whether Ratio is within Target of 1.
	Within bool
}

func row(figure, unit string, k, s float64) Row {
	r := Row{Figure: figure, Unit: unit, Kraken: k, Sim: s}
	switch {
	case k == 0 && s == 0:
		r.Ratio = 1
	case k == 0:
		r.Ratio = math.Inf(1)
	default:
		r.Ratio = s / k
	}
	r.Within = math.Abs(r.Ratio-1) <= Target+1e-9
	return r
}

// Compare sets the sim's figures beside kraken's: every origin's share of
// the sessions, the peak error rate, the time to 99 % back and the
// attempts per device.
func Compare(k, s Figures) []Row {
	names := make([]string, 0, len(k.Share))
	for n := range k.Share {
		names = append(names, n)
	}
	for n := range s.Share {
		if _, ok := k.Share[n]; !ok {
			names = append(names, n)
		}
	}
	slices.Sort(names)
	var rows []Row
	for _, n := range names {
		rows = append(rows, row("share of sessions, "+n, "%", k.Share[n], s.Share[n]))
	}
	back := func(d time.Duration) float64 {
		if d < 0 {
			return math.Inf(1) // never
		}
		return d.Seconds()
	}
	rows = append(rows,
		row("peak error rate", "%", k.PeakErrorRate, s.PeakErrorRate),
		row("time to 99 % back", "s", back(k.Back99), back(s.Back99)),
		row("attempts per device", "", k.AttemptsPerDevice, s.AttemptsPerDevice),
	)
	return rows
}

// Unexplained lists the failures of kraken's run the sim does not
// account for: a kind the sim does not model, or a kind one side has and
// the other not.
func Unexplained(k, s Figures) []string {
	var out []string
	kinds := map[string]bool{}
	for kind := range k.Failures {
		kinds[kind] = true
	}
	for kind := range s.Failures {
		kinds[kind] = true
	}
	sorted := make([]string, 0, len(kinds))
	for kind := range kinds {
		sorted = append(sorted, kind)
	}
	slices.Sort(sorted)
	for _, kind := range sorted {
		kn, sn := k.Failures[kind], s.Failures[kind]
		switch {
		case kind != "refused" && kind != "timeout" && kind != "down":
			out = append(out, fmt.Sprintf("kraken's %d failures %s: a kind the sim does not model", kn, kind))
		case kn > 0 && sn == 0:
			out = append(out, fmt.Sprintf("kraken counts %d failures %s, the sim none", kn, kind))
		case sn > 0 && kn == 0:
			out = append(out, fmt.Sprintf("the sim counts %d failures %s, kraken none", sn, kind))
		}
	}
	return out
}

func value(v float64, unit string) string {
	switch {
	case math.IsInf(v, 1):
		return "never"
	case unit == "%":
		return fmt.Sprintf("%.2f %%", 100*v)
	case unit == "s":
		return fmt.Sprintf("%.2f s", v)
	}
	return fmt.Sprintf("%.3f", v)
}

// Print writes rows as a table: the figure, kraken's value, the sim's,
// the ratio and whether it is within target.
func Print(w io.Writer, rows []Row) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "figure\tkraken\tsim\tsim/kraken\twithin 10 %")
	for _, r := range rows {
		ratio := "-"
		if !math.IsInf(r.Ratio, 0) && !math.IsNaN(r.Ratio) {
			ratio = fmt.Sprintf("%.3f", r.Ratio)
		}
		ok := "yes"
		if !r.Within {
			ok = "NO"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", r.Figure, value(r.Kraken, r.Unit), value(r.Sim, r.Unit), ratio, ok)
	}
	return tw.Flush()
}

// Line is one run's figures on one line, for the per-seed listing.
func Line(label string, f Figures) string {
	var kinds []string
	for k, v := range f.Failures {
		kinds = append(kinds, fmt.Sprintf("%s %d", k, v))
	}
	slices.Sort(kinds)
	back := "never"
	if f.Back99 >= 0 {
		back = fmt.Sprintf("%.2f s", f.Back99.Seconds())
	}
	return fmt.Sprintf("%s: dropped %d, 99 %% back %s, peak errors %.2f %%, %.3f attempts per device, %d failed from the drop [%s]",
		label, f.Dropped, back, 100*f.PeakErrorRate, f.AttemptsPerDevice, f.Failed, strings.Join(kinds, ", "))
}
