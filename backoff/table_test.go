package backoff

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// TestDistributionTable runs 100,000 seeded Backoff chains per policy with
// its defaults and logs, for some attempts, the 5th, 50th and 95th
// percentiles and the mean of the delay and the mean time spent waiting so
// far: the table in the README. It asserts that the sampled percentiles of
// the policies that ignore prev match their exact quantiles Delay(u = q) to
// within 0.5 % of the support width (a few standard errors of a sample
// quantile at this size), and that decorrelated jitter stays in
// [base, cap].
func TestDistributionTable(t *testing.T) {
	const chains = 100_000
	attempts := []int{0, 1, 2, 3, 4, 6, 8, 12}
	last := attempts[len(attempts)-1]
	t.Logf("%-13s %7s %9s %9s %9s %9s %12s", "policy", "attempt", "p5", "p50", "p95", "mean", "mean waited")
	for _, n := range Names() {
		c := mustConfig(t, Config{Policy: n})
		p := mustNew(t, c)
		r := rand.New(rand.NewPCG(2026, 11))
		samples := make([][]float64, last+1)
		waited := make([]float64, last+1)
		for range chains {
			b, err := NewBackoff(c, r)
			if err != nil {
				t.Fatal(err)
			}
			var total time.Duration
			for k := 0; k <= last; k++ {
				d := b.Next()
				total += d
				samples[k] = append(samples[k], float64(d))
				waited[k] += float64(total)
			}
		}
		for _, k := range attempts {
			s := samples[k]
			slices.Sort(s)
			q := func(f float64) float64 { return s[int(f*float64(len(s)-1))] }
			var sum float64
			for _, x := range s {
				sum += x
			}
			ms := func(x float64) time.Duration { return time.Duration(x).Round(time.Millisecond) }
			t.Logf("%-13s %7d %9v %9v %9v %9v %12v", n, k, ms(q(0.05)), ms(q(0.5)), ms(q(0.95)), ms(sum/chains), ms(waited[k]/chains))
			if n == PolicyDecorrelated {
				if s[0] < float64(c.Base) || s[len(s)-1] > float64(c.Cap) {
					t.Errorf("decorrelated attempt %d: draws [%v, %v] outside [%v, %v]", k, time.Duration(s[0]), time.Duration(s[len(s)-1]), c.Base, c.Cap)
				}
				continue
			}
			lo, hi := Bounds(p, k, 0)
			tol := 0.005*float64(hi-lo) + 1
			for _, f := range []float64{0.05, 0.5, 0.95} {
				if want := float64(p.Delay(k, 0, f)); math.Abs(q(f)-want) > tol {
					t.Errorf("%s attempt %d: sampled p%.0f %v, exact quantile %v", n, k, 100*f, time.Duration(q(f)), time.Duration(want))
				}
			}
		}
	}
}
