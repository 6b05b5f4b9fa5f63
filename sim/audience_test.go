package sim

import (
	"context"
	"math"
	"testing"

	"github.com/corralhq/corral/authdns/answer"
	"github.com/corralhq/corral/scenario"
)

// TestResolverAwareBringsWeightedToMultivalue runs the shipped
// scenarios/cdn-resolvers.yaml as it ships (121 M devices, its 5 draws
// of each variant): with resolver-aware answers on, weighted fails no
// attempt at peak beyond 1 % in any draw, as multi-value does not;
// without them weighted (load feedback on in both) fails at least half
// of the attempts at peak in its median draw.
func TestResolverAwareBringsWeightedToMultivalue(t *testing.T) {
	sc, err := scenario.Load("../scenarios/cdn-resolvers.yaml")
	if err != nil {
		t.Fatal(err)
	}
	runs, err := RunAll(context.Background(), sc, nil)
	if err != nil {
		t.Fatal(err)
	}
	worst, failing := map[string]float64{}, map[string]int{}
	for _, r := range runs {
		p := r.Summary.AttemptErrorPeak
		worst[r.Variant] = max(worst[r.Variant], p)
		if p > 0.01 {
			failing[r.Variant]++
		}
		t.Logf("%s seed %d: attempt errors at peak %.3f, resolvers %+v", r.Variant, r.Seed, p, r.Summary.Resolvers)
	}
	for _, v := range []string{"dns=weighted resolvers=on", "dns=multivalue resolvers=off", "dns=multivalue resolvers=on"} {
		if worst[v] > 0.01 {
			t.Errorf("%s: worst draw's attempt errors at peak %.3f, want at most 1 %%", v, worst[v])
		}
	}
	if v := "dns=weighted resolvers=off"; failing[v] < 3 {
		t.Errorf("%s: %d of 5 draws above 1 %% at peak, want most (the surge the feature exists for)", v, failing[v])
	}
}

// TestAudienceFindsTheResolversThatSpeakForMany: in cdn-resolvers's
// weighted run, at each of its 5 seeds, the replay of the day before the
// event classes big every resolver above the 1 % share of the audience
// (the busiest eight PoPs' two each, 1.1 to 16.9 %), though none sends
// more than 1/120 of the queries; the estimates of those above 2 % are
// within 10 % of their audience; and no more than 24 of the 120 are big.
func TestAudienceFindsTheResolversThatSpeakForMany(t *testing.T) {
	sc, err := scenario.Load("../scenarios/cdn-resolvers.yaml")
	if err != nil {
		t.Fatal(err)
	}
	sc.Sweep = scenario.Sweep{}
	sc.DNS.Policy, sc.DNS.Resolvers.Enabled = "weighted", true
	for seed := uint64(1); seed <= 5; seed++ {
		sc.Seed = seed
		s := mustNew(t, sc)
		aud := s.dns.audience
		rate := renewals(sc, s.dns)
		sum := 0.0
		for _, r := range rate {
			sum += r
		}
		big, want := 0, 0
		for i, r := range rate {
			share, est := r/sum, aud.aud.Est[i]/aud.aud.Total
			c := aud.of(i)
			if c == answer.ClassBig {
				big++
			}
			if share > sc.DNS.Resolvers.BigShare {
				want++
				if c != answer.ClassBig {
					t.Errorf("seed %d: resolver %d speaks for %.2f %% of the audience (estimated %.2f %%) and is %v at the start", seed, i, 100*share, 100*est, c)
				}
			}
			if share > 2*sc.DNS.Resolvers.BigShare && math.Abs(est-share) > 0.1*share {
				t.Errorf("seed %d: resolver %d speaks for %.2f %% of the audience, estimated %.2f %%", seed, i, 100*share, 100*est)
			}
		}
		if want != 16 {
			t.Errorf("seed %d: %d resolvers above 1 %% of the audience, want the top 8 PoPs' 16", seed, want)
		}
		if big > 24 {
			t.Errorf("seed %d: %d of %d resolvers big: the small ones are not parted from the big", seed, big, len(rate))
		}
		t.Logf("seed %d: %d of %d resolvers big at the start (%d above 1 %% of the audience)", seed, big, len(rate), want)
	}
}
