package kraken

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"
)

// The live view. On a terminal (Config.Live) the progress is a small
// table redrawn in place every ProgressEvery: the run's clock, what is
// held, attempts and failures by priority, the sessions of each origin
// and their share, and each storm with its devices back. Otherwise it is
// one plain line per period (progressLine), which logs and CI keep.

// progressLine is the plain progress line (rec.mu held).
func (r *runner) progressLine(now time.Time, phase string) string {
	res := r.rec.res
	var fails int64
	for _, c := range res.Failures {
		fails += c.Total()
	}
	return fmt.Sprintf("kraken: %s held %d/%d attempts %d failures %d recovering %d published %d delivered %d",
		r.clock(now, phase), r.held.Load(), len(r.devices), res.Attempts, fails, r.recovering.Load(),
		res.Messages.Published.Total(), res.Messages.Delivered.Total())
}

// liveTable is the table of the live view (rec.mu held).
func (r *runner) liveTable(now time.Time, phase string) []string {
	res := r.rec.res
	lines := []string{fmt.Sprintf("kraken %s  %s of %s  held %d/%d  recovering %d",
		r.pl.name, r.clock(now, phase), r.pl.duration, r.held.Load(), len(r.devices), r.recovering.Load())}
	rate := int64(0)
	if n := len(res.AttemptsPerSecond); n > 1 {
		rate = res.AttemptsPerSecond[n-2] // the last whole second
	}
	lines = append(lines, fmt.Sprintf("attempts %d (%d/s)  published %d  delivered %d  P0 expected %d",
		res.Attempts, rate, res.Messages.Published.Total(), res.Messages.Delivered.Total(), res.Messages.P0Expected))
	lines = append(lines, fmt.Sprintf("%-9s %10s %10s %12s", "priority", "welcomes", "failures", "disconnects"))
	for _, p := range priorityLabels {
		var w, f, d int64
		for _, c := range res.Welcomes {
			w += c[p]
		}
		for _, c := range res.Failures {
			f += c[p]
		}
		for _, c := range res.Disconnects {
			d += c[p]
		}
		lines = append(lines, fmt.Sprintf("%-9s %10d %10d %12d", p, w, f, d))
	}
	held := r.heldByOrigin()
	nodes := slices.Sorted(maps.Keys(held))
	var total int64
	for _, n := range held {
		total += n
	}
	lines = append(lines, fmt.Sprintf("%-20s %8s %7s", "origin", "held", "share"))
	for _, n := range nodes {
		share := 0.0
		if total > 0 {
			share = 100 * float64(held[n]) / float64(total)
		}
		lines = append(lines, fmt.Sprintf("%-20s %8d %6.1f%%", cut(n, 20), held[n], share))
	}
	if len(res.Storms) > 0 {
		lines = append(lines, fmt.Sprintf("%-11s %8s %8s %8s  %s", "storm", "at", "dropped", "back", "error"))
		for _, s := range res.Storms {
			lines = append(lines, fmt.Sprintf("%-11s %7.1fs %8d %8d  %s", s.Kind, s.AtSeconds, s.Dropped, s.Back, cut(s.Error, 40)))
		}
	}
	return lines
}

func cut(s string, n int) string {
	if len(s) > n {
		return s[:n-1] + "~"
	}
	return s
}

// progress writes the progress: a line, or the live table redrawn over
// the previous one.
func (r *runner) progress(now time.Time, phase string) {
	if r.cfg.Progress == nil {
		return
	}
	r.rec.mu.Lock()
	if !r.cfg.Live {
		line := r.progressLine(now, phase)
		r.rec.mu.Unlock()
		fmt.Fprintln(r.cfg.Progress, line)
		return
	}
	lines := r.liveTable(now, phase)
	r.rec.mu.Unlock()
	var b strings.Builder
	if r.liveLines > 0 {
		fmt.Fprintf(&b, "\x1b[%dA", r.liveLines) // up to the table's first line
	}
	for _, l := range lines {
		b.WriteString("\x1b[2K") // clear the line
		b.WriteString(l)
		b.WriteByte('\n')
	}
	b.WriteString("\x1b[J") // and whatever a longer table left below
	r.liveLines = len(lines)
	fmt.Fprint(r.cfg.Progress, b.String())
}
