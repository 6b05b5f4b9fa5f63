package report

import (
	"fmt"
	"math"
	"slices"
	"strings"

	table "github.com/corralhq/corral/internal/report"
	"github.com/corralhq/corral/sim"
)

// Draws is one variant's runs over the seeds of the scenario's sim.draws
// (one run when it draws once): what routing by random draws gives as a
// distribution, not as one lucky or unlucky draw.
type Draws struct {
	// Variant is the sweep combination ("" without a sweep).
	Variant string
	// Runs are the draws in seed order.
	Runs []*sim.Result
	// Failing is the number of draws in which at least one connection
	// attempt failed.
	Failing int
	// The key figures over the draws: the failed share of attempts at the
	// worst step (Summary.AttemptErrorPeak), the seconds above 1 %
	// (AttemptErrorSeconds), the busiest origin's share of a step's new
	// streams (PeakNewShare) and the time to settle (TimeToSettle, with
	// "never" counted as longer than any time).
	AttemptFailPeak, FailingSeconds, NewShare, Settle Spread
	// Median is the median draw, the one the report's comparison and
	// charts show: of the draws ordered by failed attempts over the run
	// (then by seed), the middle one (the lower middle for an even
	// count). Worst is the last of that order.
	Median, Worst *sim.Result
}

// Spread is one figure over a variant's draws. Median is the middle draw's
// value once the values are sorted (the lower of the two middle ones for
// an even count: always a value one draw gave); Worst the highest; Min
// and Max the range over the draws with failures (0 without any).
type Spread struct {
	Median, Worst float64
	Min, Max      float64
}

// GroupDraws groups runs as sim.RunAll returns them: consecutive runs of
// the same variant numbered by Result.Draw form one Draws; a run drawn
// once is a Draws of its own.
func GroupDraws(rs []*sim.Result) []Draws {
	var out []Draws
	for i := 0; i < len(rs); {
		j := i + 1
		if rs[i].Draws > 1 {
			for j < len(rs) && rs[j].Draws == rs[i].Draws && rs[j].Variant == rs[i].Variant && rs[j].Scenario == rs[i].Scenario && rs[j].Draw > rs[j-1].Draw {
				j++
			}
		}
		out = append(out, newDraws(rs[i:j]))
		i = j
	}
	return out
}

func newDraws(rs []*sim.Result) Draws {
	d := Draws{Variant: rs[0].Variant, Runs: rs}
	failing := func(r *sim.Result) bool { return r.Summary.AttemptErrors > 0 }
	for _, r := range rs {
		if failing(r) {
			d.Failing++
		}
	}
	spread := func(of func(*sim.Result) float64) Spread {
		var all, bad []float64
		for _, r := range rs {
			all = append(all, of(r))
			if failing(r) {
				bad = append(bad, of(r))
			}
		}
		slices.Sort(all)
		s := Spread{Median: all[(len(all)-1)/2], Worst: all[len(all)-1]}
		if len(bad) > 0 {
			s.Min, s.Max = slices.Min(bad), slices.Max(bad)
		}
		return s
	}
	d.AttemptFailPeak = spread(func(r *sim.Result) float64 { return r.Summary.AttemptErrorPeak })
	d.FailingSeconds = spread(func(r *sim.Result) float64 { return r.Summary.AttemptErrorSeconds })
	d.NewShare = spread(func(r *sim.Result) float64 { return r.Summary.PeakNewShare })
	d.Settle = spread(func(r *sim.Result) float64 { return settleOrder(r.Summary.TimeToSettle) })
	order := slices.Clone(rs)
	slices.SortStableFunc(order, func(a, b *sim.Result) int {
		if c := compareInt(a.Summary.AttemptErrors, b.Summary.AttemptErrors); c != 0 {
			return c
		}
		return compareInt(int64(a.Seed), int64(b.Seed))
	})
	d.Median, d.Worst = order[(len(order)-1)/2], order[len(order)-1]
	return d
}

// settleOrder maps "never" (-1) past every time, so it sorts last.
func settleOrder(s float64) float64 {
	if s < 0 {
		return math.Inf(1)
	}
	return s
}

func settleCell(s float64) string {
	if math.IsInf(s, 1) {
		return "never"
	}
	return settle(s)
}

func compareInt(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// Drawn reports whether any of ds holds more than one draw.
func Drawn(ds []Draws) bool {
	for _, d := range ds {
		if len(d.Runs) > 1 {
			return true
		}
	}
	return false
}

// Medians returns the median draw of each of ds.
func Medians(ds []Draws) []*sim.Result {
	out := make([]*sim.Result, len(ds))
	for i, d := range ds {
		out[i] = d.Median
	}
	return out
}

// DrawsTable returns two rows per variant, the median and the worst over
// its draws of the failed share of attempts at the worst step, the
// seconds above 1 %, the busiest origin's share of new streams and the
// time to settle, with the draws that had failures ("8 of 10"). It fits
// 100 columns.
func DrawsTable(ds []Draws) *table.Table {
	rs := Medians(ds)
	head, labels := variantLabels(rs)
	t := &table.Table{
		Header: []string{head, "over draws", "draws failing", "att fail", "fail s", "top new", "settle s"},
		Right:  []int{2, 3, 4, 5, 6},
	}
	if len(rs) > 0 {
		t.Title = fmt.Sprintf("scenario %s: each variant over its draws (seeds)", rs[0].Scenario)
	}
	for i, d := range ds {
		n := len(d.Runs)
		t.Add(labels[i], fmt.Sprintf("median of %d", n), fmt.Sprintf("%d of %d", d.Failing, n),
			pct(d.AttemptFailPeak.Median), fmt.Sprintf("%.0f", d.FailingSeconds.Median), pct(d.NewShare.Median), settleCell(d.Settle.Median))
		t.Add("", "worst", "", pct(d.AttemptFailPeak.Worst), fmt.Sprintf("%.0f", d.FailingSeconds.Worst), pct(d.NewShare.Worst), settleCell(d.Settle.Worst))
	}
	return t
}

// DrawsVerdict is one paragraph on a variant over its draws, computed from
// them: in how many draws attempts failed and, over those, the range of
// the failed share at the worst step and of the seconds above 1 %; the
// busiest origin's share of new streams; then the verdict of the median
// draw (Verdict).
func DrawsVerdict(d Draws) string {
	n := len(d.Runs)
	if n == 1 {
		return Verdict(d.Runs[0])
	}
	name := d.Variant
	if name == "" {
		name = d.Runs[0].Scenario
	}
	seeds := fmt.Sprintf("seeds %d to %d", d.Runs[0].Seed, d.Runs[n-1].Seed)
	even := ""
	if o := len(d.Runs[0].Origins); o > 1 {
		even = fmt.Sprintf(" (an even share is %s)", pctWords(1/float64(o)))
	}
	var b strings.Builder
	if d.Failing == 0 {
		fmt.Fprintf(&b, "%s: no connection attempt failed in any of the %d draws (%s); the busiest origin took at most %s of a step's new streams%s.",
			name, n, seeds, pctWords(d.NewShare.Worst), even)
	} else {
		fmt.Fprintf(&b, "%s: connection attempts failed in %d of %d draws (%s): in those, %s of the attempts failed at the worst step",
			name, d.Failing, n, seeds, span(d.AttemptFailPeak, pctWords, "%"))
		if d.FailingSeconds.Max > 0 {
			fmt.Fprintf(&b, " and more than 1 %% failed for %s", span(d.FailingSeconds, dur, "s"))
		}
		never := 0
		for _, r := range d.Runs {
			if r.Summary.TimeToSettle < 0 {
				never++
			}
		}
		if never > 0 {
			fmt.Fprintf(&b, "; %d of the %d draws had not settled at the end", never, n)
		}
		fmt.Fprintf(&b, "; the busiest origin took up to %s of a step's new streams%s", pctWords(d.NewShare.Worst), even)
		switch d.Failing {
		case n:
		case n - 1:
			b.WriteString(". In the other draw no attempt failed")
		default:
			fmt.Fprintf(&b, ". In the other %d draws no attempt failed", n-d.Failing)
		}
		fmt.Fprintf(&b, ". The worst draw (seed %d) had %s failed attempts.", d.Worst.Seed, count(d.Worst.Summary.AttemptErrors))
	}
	fmt.Fprintf(&b, " Median draw (seed %d), %s", d.Median.Seed, Verdict(d.Median))
	return b.String()
}

// span writes a range of s's failing draws, "94-100 %" or "32-96 s" when
// both ends carry the same unit, "100 %" when they are equal.
func span(s Spread, format func(float64) string, unit string) string {
	lo, hi := format(s.Min), format(s.Max)
	if lo == hi {
		return hi
	}
	if suffix := " " + unit; strings.HasSuffix(lo, suffix) && strings.HasSuffix(hi, suffix) && !strings.Contains(strings.TrimSuffix(lo, suffix), " ") {
		return strings.TrimSuffix(lo, suffix) + "-" + hi
	}
	return lo + " to " + hi
}

// KeepMedianSteps drops the per-step series of every draw but each
// variant's median one (the one the report charts), so that a result of
// many draws stays the size of one draw per variant; every draw keeps its
// summary. Runs drawn once are left as they are.
func KeepMedianSteps(rs []*sim.Result) {
	for _, d := range GroupDraws(rs) {
		for _, r := range d.Runs {
			if r != d.Median {
				r.Steps = nil
			}
		}
	}
}
