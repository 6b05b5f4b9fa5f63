package sim

import (
	"reflect"
	"runtime"
	"testing"
	"time"

	"github.com/corralhq/corral/authdns/answer"
	"github.com/corralhq/corral/scenario"
)

// TestResolversOffIsUnchanged: with dns.resolvers off a run is the run of
// the code before resolver-aware answers, byte for byte (the digests
// TestFeedbackOffIsUnchanged pins, taken before load feedback, which off
// leaves as it was, the adaptive ones again with retry windows; checked
// on amd64), with the block's window, share,
// big_n and big_weighted_subset given or not. On, with a share no
// resolver reaches, it draws as off: the same steps.
func TestResolversOffIsUnchanged(t *testing.T) {
	for _, tc := range []struct {
		policy, mode, digest string
	}{
		{"weighted", "adaptive", "5c0ce29696aae53bd1998e908752a3edc2e21cae58e858f52f93d9dc772e4fba"},
		{"weighted", "errors", "f991d1642ce3f82e6622b43334813a4f88bafdc5fa1903e29b36cb7d09987266"},
		{"multivalue", "adaptive", "831bcf7b322efd3de7f1a283288a32aad0e675ff16518085c9e966f9de4615ba"},
	} {
		t.Run(tc.policy+" "+tc.mode, func(t *testing.T) {
			plain := mustNew(t, fbSurge(tc.policy, tc.mode)).Run(nil)
			sc := fbSurge(tc.policy, tc.mode)
			sc.DNS.Resolvers = scenario.Resolvers{Window: 20 * time.Second, BigShare: 0.002}
			sc.DNS.BigWeightedSubset = tc.policy == "weighted"
			sc.DNS.BigN = 2
			off := mustNew(t, sc).Run(nil)
			if a, b := digest(t, off), digest(t, plain); a != b {
				t.Errorf("resolvers off with a block: digest %s, without: %s", a, b)
			}
			if d := digest(t, plain); runtime.GOARCH == "amd64" && d != tc.digest {
				t.Errorf("resolvers off: digest %s, the code before gave %s", d, tc.digest)
			}
			// 32 resolvers send a share of 1/32 each: none is above
			// half the queries.
			sc = fbSurge(tc.policy, tc.mode)
			sc.DNS.Resolvers.Enabled, sc.DNS.Resolvers.BigShare = true, 0.5
			sc.DNS.BigWeightedSubset = tc.policy == "weighted"
			on := mustNew(t, sc).Run(nil)
			if on.Summary.Resolvers == nil || on.Summary.Resolvers.PeakBig != 0 || on.Summary.Resolvers.Queries[answer.ClassSmall] == 0 {
				t.Fatalf("resolvers on, none big: summary %+v", on.Summary.Resolvers)
			}
			if !reflect.DeepEqual(on.Steps, plain.Steps) {
				t.Errorf("resolvers on with no big resolver: the steps differ from the run without")
			}
		})
	}
}

// TestBigResolverGetsMoreRecords: in a small surge whose 32 resolvers
// each send 1/32 of the queries (one per 10 s TTL), above the default 1 %
// share, resolver-aware answers class them big and their answers hold
// every healthy origin (big_n 0); at a share of one half none is big and
// each answer holds max_answers (1) record of a multivalue set, one of a
// weighted set. The classes are in the step series and the summary, and
// the big answers spread the surge over the origins.
func TestBigResolverGetsMoreRecords(t *testing.T) {
	for _, policy := range []string{"multivalue", "weighted"} {
		t.Run(policy, func(t *testing.T) {
			run := func(share float64) *Result {
				sc := fbSurge(policy, "errors")
				sc.DNS.MaxAnswers = 1
				sc.DNS.Resolvers.Enabled = true
				sc.DNS.Resolvers.BigShare = share
				sc.DNS.BigWeightedSubset = policy == "weighted"
				r := mustNew(t, sc).Run(nil)
				if r.Summary.Resolvers == nil {
					t.Fatal("no resolver summary with dns.resolvers on")
				}
				t.Logf("big share %v: %+v", share, *r.Summary.Resolvers)
				return r
			}
			big, small := answer.ClassBig, answer.ClassSmall
			on, none := run(answer.DefaultBigShare), run(0.5)
			rs := on.Summary.Resolvers
			if rs.Resolvers != 32 || rs.PeakBig != 32 {
				t.Errorf("%d of %d resolvers big at the peak, want all 32", rs.PeakBig, rs.Resolvers)
			}
			if rs.Queries[big] == 0 || rs.Records[big] != 3*rs.Queries[big] {
				t.Errorf("big resolvers: %d records in %d answers, want every one of the 3 origins in each", rs.Records[big], rs.Queries[big])
			}
			if n := on.Steps[60].BigResolvers; n != 32 {
				t.Errorf("step at 60 s: %d big resolvers, want 32", n)
			}
			ns := none.Summary.Resolvers
			if ns.PeakBig != 0 || ns.Queries[small] == 0 || ns.Records[small] != ns.Queries[small] {
				t.Errorf("at a share of one half: %d big at the peak, %d records in %d answers, want none big and one record each", ns.PeakBig, ns.Records[small], ns.Queries[small])
			}
			if a, b := on.Summary.PeakNewShare, none.Summary.PeakNewShare; !(a < b) {
				t.Errorf("busiest origin's share of a step's set-ups: %.3f with big resolvers, %.3f without", a, b)
			}
		})
	}
}

// TestResolverClassesSlide drives the classes as authdns's step does: a
// resolver sending 9 of every 10 queries is big over a 8 s window at a
// share of one half, the other small; once it stops, it stays big while
// the previous window's eighths still hold enough of its queries, and is
// small from the window's fourth eighth, where the other's queries
// outweigh what is left of its own.
func TestResolverClassesSlide(t *testing.T) {
	sc := fbSurge("multivalue", "errors")
	sc.DNS.Resolvers = scenario.Resolvers{Enabled: true, Window: 8 * time.Second, BigShare: 0.5}
	rc := newResolverClasses(sc, 2, 1)
	rc.since = 0
	for s := range 16 {
		rc.advance(s)
		for range 9 {
			rc.query(0)
		}
		rc.query(1)
	}
	rc.advance(16) // a new window: 72 and 8 queries in the previous one
	if rc.class[0] != answer.ClassBig || rc.class[1] != answer.ClassSmall {
		t.Fatalf("classes %v, want big and small", rc.class)
	}
	stopped := -1
	for s := 16; s < 26; s++ {
		rc.advance(s)
		if rc.class[0] == answer.ClassSmall {
			stopped = s
			break
		}
		for range 10 {
			rc.query(1)
		}
	}
	// At 16+p the estimates are 72(8-p)/8 and 8(8-p)/8 + 10p: the first
	// falls to half of the total at p = 4.
	if stopped != 20 {
		t.Fatalf("the silent resolver turned small at step %d, want 20", stopped)
	}
}
