package scenario

import (
	"strings"
	"testing"
	"time"

	"github.com/corralhq/corral/authdns/answer"
)

// withDNS returns the file f with lines added to its dns section.
func withDNS(f, lines string) string {
	return strings.Replace(f, "dns:\n", "dns:\n"+lines, 1)
}

// TestResolversDefaultsAreAuthdns: dns.resolvers left out takes authdns's
// defaults (answer.DefaultClassWindow, answer.DefaultBigShare,
// answer.DefaultAudienceHalfLife) and is off, audience too;
// big_n and big_weighted_subset are 0 and false.
func TestResolversDefaultsAreAuthdns(t *testing.T) {
	s, err := Decode("t.yaml", []byte(minimal))
	if err != nil {
		t.Fatal(err)
	}
	want := Resolvers{Window: answer.DefaultClassWindow, BigShare: answer.DefaultBigShare, HalfLife: answer.DefaultAudienceHalfLife}
	if s.DNS.Resolvers != want || s.DNS.BigN != 0 || s.DNS.BigWeightedSubset {
		t.Fatalf("dns.resolvers %+v, big_n %d, big_weighted_subset %v; want %+v, 0, false", s.DNS.Resolvers, s.DNS.BigN, s.DNS.BigWeightedSubset, want)
	}
	s, err = Decode("t.yaml", []byte(withDNS(minimal, "  resolvers: {enabled: true, window: 30s}\n  big_n: 8\n")))
	if err != nil {
		t.Fatal(err)
	}
	want.Enabled, want.Window = true, 30*time.Second
	if s.DNS.Resolvers != want || s.DNS.BigN != 8 {
		t.Fatalf("dns.resolvers %+v, big_n %d; want %+v, 8", s.DNS.Resolvers, s.DNS.BigN, want)
	}
}

// TestResolversConfigErrors: each bad resolver-aware answers setting is
// refused with the key's line and path.
func TestResolversConfigErrors(t *testing.T) {
	weighted := strings.Replace(minimal, "policy: multivalue", "policy: weighted", 1)
	for _, tc := range []struct {
		name, file string
		want       []string
	}{
		{"an explicit 0 window", withDNS(minimal, "  resolvers: {enabled: true, window: 0s}\n"), []string{"dns.resolvers.window", "0 is not usable", "default (1m0s)"}},
		{"a window below authdns's least", withDNS(minimal, "  resolvers: {enabled: true, window: 1ms}\n"), []string{"dns.resolvers.window", "at least 8ms"}},
		{"an explicit 0 share", withDNS(minimal, "  resolvers: {enabled: true, big_share: 0}\n"), []string{"dns.resolvers.big_share", "default (0.01)"}},
		{"a share of 1", withDNS(minimal, "  resolvers: {enabled: true, big_share: 1}\n"), []string{"dns.resolvers.big_share", "below 1, got 1"}},
		{"a negative big_n", withDNS(minimal, "  resolvers: {enabled: true}\n  big_n: -1\n"), []string{"dns.big_n", "must not be negative"}},
		{"big_n below max_answers", withDNS(minimal, "  resolvers: {enabled: true}\n  big_n: 3\n"), []string{"dns.big_n", "big n 3 is below n 8", "policy multivalue"}},
		{"big_n for weighted without the subset", withDNS(weighted, "  resolvers: {enabled: true}\n  big_n: 3\n"), []string{"dns.policy", "unless dns.big_weighted_subset is true"}},
		{"big_weighted_subset without weighted", withDNS(minimal, "  resolvers: {enabled: true}\n  big_weighted_subset: true\n"), []string{"dns.big_weighted_subset", "weighted policy only"}},
		{"a policy that answers every resolver alike", withDNS(strings.Replace(minimal, "policy: multivalue", "policy: simple", 1), "  resolvers: {enabled: true}\n"), []string{"dns.policy", "simple policy answers every resolver alike"}},
		{"keys while off", withDNS(minimal, "  resolvers: {window: 30s}\n  big_n: 9\n"), []string{"dns.resolvers.enabled", "is off while dns sets resolvers.window, big_n"}},
		{"an explicit 0 half-life", withDNS(minimal, "  resolvers: {enabled: true, audience: true, half_life: 0s}\n  feedback: {enabled: true}\n"), []string{"dns.resolvers.half_life", "0 is not usable", "default (1m0s)"}},
		{"a negative half-life", withDNS(minimal, "  resolvers: {enabled: true, audience: true, half_life: -1s}\n  feedback: {enabled: true}\n"), []string{"dns.resolvers.half_life", "must be positive"}},
		{"a half-life without audience", withDNS(minimal, "  resolvers: {enabled: true, half_life: 10s}\n"), []string{"dns.resolvers.half_life", "only with dns.resolvers.audience"}},
		{"audience without feedback", withDNS(minimal, "  resolvers: {enabled: true, audience: true}\n"), []string{"dns.resolvers.audience", "dns.feedback is never on"}},
		{"a session age without audience", strings.Replace(withDNS(minimal, "  resolvers: {enabled: true}\n"), "population:\n", "population:\n  session_age: 1h\n", 1), []string{"population.session_age", "only with dns.resolvers.audience"}},
		{"a negative session age", strings.Replace(withDNS(minimal, "  resolvers: {enabled: true, audience: true}\n  feedback: {enabled: true}\n"), "population:\n", "population:\n  session_age: -1h\n", 1), []string{"population.session_age", "must not be negative"}},
		{"a swept policy that answers alike", withDNS(minimal, "  resolvers: {enabled: true}\n") + "sweep:\n  dns_policy: [multivalue, failover]\n", []string{"sweep.dns_policy[1]", "failover policy answers every resolver alike"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Decode("t.yaml", []byte(tc.file))
			if err == nil {
				t.Fatalf("accepted:\n%s", tc.file)
			}
			for _, w := range append(tc.want, "t.yaml:") {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
		})
	}
}

// TestResolversSweep: sweep.dns_resolvers runs the file with
// resolver-aware answers off and on, named by the variant, with the
// block's settings in both; a swept policy that does not read
// big_weighted_subset runs without it.
func TestResolversSweep(t *testing.T) {
	f := withDNS(minimal, "  resolvers: {big_share: 0.2}\n  big_weighted_subset: true\n") + "sweep:\n  dns_policy: [weighted, multivalue]\n  dns_resolvers: [false, true]\n"
	s, err := Decode("t.yaml", []byte(f))
	if err != nil {
		t.Fatal(err)
	}
	vs, err := s.Variants()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, v := range vs {
		names = append(names, v.Name)
		d := v.Scenario.DNS
		if on := strings.Contains(v.Name, "resolvers=on"); d.Resolvers.Enabled != on || d.Resolvers.BigShare != 0.2 {
			t.Errorf("%s: dns.resolvers %+v", v.Name, d.Resolvers)
		}
		if d.BigWeightedSubset != (d.Policy == "weighted") {
			t.Errorf("%s: big_weighted_subset %v", v.Name, d.BigWeightedSubset)
		}
	}
	if got, want := strings.Join(names, ", "), "dns=weighted resolvers=off, dns=weighted resolvers=on, dns=multivalue resolvers=off, dns=multivalue resolvers=on"; got != want {
		t.Errorf("variants %s, want %s", got, want)
	}
}
