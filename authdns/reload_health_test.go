package authdns

import (
	"slices"
	"testing"

	"github.com/miekg/dns"
)

// healthZone is a multivalue set with one value per check name, each value
// 10.0.0.<i+1> checked by names[i].
func healthZone(names ...string) string {
	checks, values := checkedSet(names...)
	return `
listen: 127.0.0.1:0
rrl: {enabled: false}
health:
  checks:
` + checks + `
zones:
  - origin: corral.test
    ns: [ns1.corral.test]
    records:
      - name: multi
        type: A
        policy: multivalue
        values:
` + values
}

// TestReloadSwapsHealth checks that the health the records resolve when
// their zone is compiled follows the checks across reloads: a check a
// reload adds (compiled before the checker knows it) answers by its state,
// a kept check keeps its state, and records follow the checks of the
// zones now served.
func TestReloadSwapsHealth(t *testing.T) {
	s, err := New(decodeConfig(t, healthZone("a", "b")), Options{})
	if err != nil {
		t.Fatal(err)
	}
	answers := func() []string {
		r, _ := handleRaw(t, s, mkQuery("multi.corral.test", dns.TypeA, nil), false)
		got := answerData(r)
		slices.Sort(got)
		return got
	}
	expect := func(step string, want ...string) {
		t.Helper()
		if got := answers(); !slices.Equal(got, want) {
			t.Fatalf("%s: answered %v, want %v", step, got, want)
		}
	}
	expect("all healthy", "10.0.0.1", "10.0.0.2")
	if err := s.Checker().Force("b", false); err != nil {
		t.Fatal(err)
	}
	expect("b down", "10.0.0.1")

	// c is new: the zones resolve it before the checks are updated.
	if err := s.Reload(decodeConfig(t, healthZone("a", "b", "c"))); err != nil {
		t.Fatal(err)
	}
	expect("reload adding c (b kept, still down)", "10.0.0.1", "10.0.0.3")
	if err := s.Checker().Force("c", false); err != nil {
		t.Fatal(err)
	}
	expect("c down", "10.0.0.1")
	if err := s.Checker().Force("a", false); err != nil {
		t.Fatal(err)
	}
	if got := answers(); len(got) != 3 {
		t.Fatalf("every check down: answered %v, want all 3 (fail open)", got)
	}

	// The checks swap names: 10.0.0.1 now answers by c (down), 10.0.0.3
	// by a new check d (healthy).
	if err := s.Reload(decodeConfig(t, healthZone("c", "b", "d"))); err != nil {
		t.Fatal(err)
	}
	expect("reload renaming the checks", "10.0.0.3")
	if err := s.Checker().Force("c", true); err != nil {
		t.Fatal(err)
	}
	expect("c up", "10.0.0.1", "10.0.0.3")

	// A reload that fails leaves the zones and their health alone.
	bad := decodeConfig(t, healthZone("c", "b", "d"))
	bad.Zones[0].Records[0].Values[2].Check = "nope"
	if err := s.Reload(bad); err == nil {
		t.Fatal("a reload naming an unknown check was accepted")
	}
	expect("after a failed reload", "10.0.0.1", "10.0.0.3")
}
