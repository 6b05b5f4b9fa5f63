package shard

import (
	"fmt"
	"slices"
	"testing"
)

// downSet is a Health with an explicit set of failed workers.
type downSet map[int]bool

func (d downSet) Healthy(w int) bool { return !d[w] }

var _ Health = downSet(nil)

func TestPickFrom(t *testing.T) {
	hand := []int{10, 20, 30, 40}
	spill := []int{50, 60}
	for _, tc := range []struct {
		name       string
		down       downSet
		minHealthy int
		want       []int
		status     Status
		spilled    int
	}{
		{name: "all healthy keeps hand order", down: nil, minHealthy: 1, want: []int{10, 20, 30, 40}, status: StatusHealthy},
		{name: "first member down falls back in order", down: downSet{10: true}, minHealthy: 1, want: []int{20, 30, 40}, status: StatusHealthy},
		{name: "one healthy meets min 1", down: downSet{10: true, 20: true, 40: true}, minHealthy: 1, want: []int{30}, status: StatusHealthy},
		{name: "below min 2 spills one", down: downSet{10: true, 20: true, 40: true}, minHealthy: 2, want: []int{30, 50}, status: StatusSpilled, spilled: 1},
		{name: "spill skips its down workers", down: downSet{10: true, 20: true, 40: true, 50: true}, minHealthy: 2, want: []int{30, 60}, status: StatusSpilled, spilled: 1},
		{name: "whole hand down spills", down: downSet{10: true, 20: true, 30: true, 40: true}, minHealthy: 1, want: []int{50}, status: StatusSpilled, spilled: 1},
		{name: "spill is bounded: degraded", down: downSet{10: true, 20: true, 30: true, 50: true, 60: true}, minHealthy: 3, want: []int{40}, status: StatusDegraded},
		{name: "hand and spill down fail open", down: downSet{10: true, 20: true, 30: true, 40: true, 50: true, 60: true}, minHealthy: 1, want: []int{10, 20, 30, 40}, status: StatusFailOpen},
		{name: "zero min means one", down: downSet{10: true}, minHealthy: 0, want: []int{20, 30, 40}, status: StatusHealthy},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := PickFrom(make([]int, 0, 6), hand, spill, tc.minHealthy, tc.down)
			if !slices.Equal(c.Workers, tc.want) || c.Status != tc.status || c.Spilled != tc.spilled {
				t.Fatalf("got %v %s spilled %d, want %v %s spilled %d", c.Workers, c.Status, c.Spilled, tc.want, tc.status, tc.spilled)
			}
		})
	}
}

// TestDealerPick checks the dealer's pick against PickFrom over its own
// hand and spill, for many tenants and a fleet with a quarter down, and
// that a tenant whose hand and spill are all down fails open to its hand.
func TestDealerPick(t *testing.T) {
	d, err := NewDealer(DealerConfig{Secret: testSecret, Workers: 64, HandSize: 4, Spill: 3, MinHealthy: 2})
	if err != nil {
		t.Fatal(err)
	}
	down := downSet{}
	for w := range 16 {
		down[w*4] = true
	}
	seen := map[Status]int{}
	for i := range 5000 {
		id := fmt.Sprintf("t%d", i)
		got := d.Pick(nil, id, down)
		want := PickFrom(nil, d.Hand(nil, id), d.Spill(nil, id), 2, down)
		if !slices.Equal(got.Workers, want.Workers) || got.Status != want.Status || got.Spilled != want.Spilled {
			t.Fatalf("%s: Pick %+v, PickFrom %+v", id, got, want)
		}
		for _, w := range got.Workers {
			if down[w] && got.Status != StatusFailOpen {
				t.Fatalf("%s: picked down worker %d in %+v", id, w, got)
			}
		}
		seen[got.Status]++
	}
	if seen[StatusHealthy] == 0 || seen[StatusSpilled] == 0 {
		t.Fatalf("statuses seen %v: want healthy and spilled picks", seen)
	}
	id := "victim"
	all := downSet{}
	for _, w := range append(d.Hand(nil, id), d.Spill(nil, id)...) {
		all[w] = true
	}
	c := d.Pick(nil, id, all)
	if c.Status != StatusFailOpen || !slices.Equal(c.Workers, d.Hand(nil, id)) {
		t.Fatalf("all down: %+v, want fail-open to hand %v", c, d.Hand(nil, id))
	}
}

// TestPickFunc checks that PickFunc and PickFromFunc choose exactly what
// Pick and PickFrom choose under the same health, over many tenants with a
// quarter of the fleet down, and under a fleet with a whole hand down.
func TestPickFunc(t *testing.T) {
	d, err := NewDealer(DealerConfig{Secret: testSecret, Workers: 64, HandSize: 4, Spill: 3, MinHealthy: 2})
	if err != nil {
		t.Fatal(err)
	}
	down := downSet{}
	for w := range 16 {
		down[w*4+1] = true
	}
	healthy := func(w int) bool { return !down[w] }
	seen := map[Status]int{}
	for i := range 5000 {
		id := fmt.Sprintf("t%d", i)
		want := d.Pick(nil, id, down)
		got := d.PickFunc(make([]int, 0, 7), id, healthy)
		if !slices.Equal(got.Workers, want.Workers) || got.Status != want.Status || got.Spilled != want.Spilled {
			t.Fatalf("%s: PickFunc %+v, Pick %+v", id, got, want)
		}
		hand, spill := d.Hand(nil, id), d.Spill(nil, id)
		from := PickFromFunc(nil, hand, spill, 2, healthy)
		if !slices.Equal(from.Workers, want.Workers) || from.Status != want.Status || from.Spilled != want.Spilled {
			t.Fatalf("%s: PickFromFunc %+v, Pick %+v", id, from, want)
		}
		seen[got.Status]++
	}
	if seen[StatusHealthy] == 0 || seen[StatusSpilled] == 0 {
		t.Fatalf("statuses seen %v: want healthy and spilled picks", seen)
	}
	id := "victim"
	all := map[int]bool{}
	for _, w := range append(d.Hand(nil, id), d.Spill(nil, id)...) {
		all[w] = true
	}
	c := d.PickFunc(nil, id, func(w int) bool { return !all[w] })
	if c.Status != StatusFailOpen || !slices.Equal(c.Workers, d.Hand(nil, id)) {
		t.Fatalf("all down: %+v, want fail-open to hand %v", c, d.Hand(nil, id))
	}
}

// recordHealth is the shape of a caller's adapter: worker health derived
// from another view through a pointer, as authdns/answer has it.
type recordHealth struct {
	names []string
	view  interface{ Up(name string) bool }
}

type upSet map[string]bool

func (u upSet) Up(name string) bool { return u[name] }

// thirdDown returns n worker names and a view by name under which every
// third worker (0, 3, 6, ...) is down.
func thirdDown(n int) ([]string, interface{ Up(string) bool }) {
	names := make([]string, n)
	up := upSet{}
	for i := range names {
		names[i] = fmt.Sprintf("w%d", i)
		up[names[i]] = i%3 != 0
	}
	return names, up
}

// TestPickFuncDoesNotAllocate checks that a closure over a caller's
// adapter, built afresh on every call, costs no allocation: the reason
// PickFunc exists (Pick with the same adapter as a Health allocates it).
func TestPickFuncDoesNotAllocate(t *testing.T) {
	d := mustDealer(t, 2048, 4, 4)
	names, view := thirdDown(2048)
	dst := make([]int, 0, 8)
	ids := []string{"a", "b", "c", "d"}
	i := 0
	allocs := testing.AllocsPerRun(1000, func() {
		a := recordHealth{names: names, view: view}
		dst = d.PickFunc(dst, ids[i&3], func(w int) bool { return a.view.Up(a.names[w]) }).Workers
		i++
	})
	if allocs != 0 {
		t.Fatalf("PickFunc with a per-call closure: %v allocations per call, want 0", allocs)
	}
}

func TestStatusString(t *testing.T) {
	for s, want := range map[Status]string{StatusHealthy: "healthy", StatusSpilled: "spilled", StatusDegraded: "degraded", StatusFailOpen: "fail-open", Status(9): "Status(9)"} {
		if s.String() != want {
			t.Errorf("%d: %q, want %q", s, s.String(), want)
		}
	}
}

// BenchmarkDealerPickFunc picks at n=2048, k=4, spill 4 with a third of
// the workers down, through a closure over a per-call adapter (the shape of
// the DNS answer selection): it reports 0 allocs/op.
func BenchmarkDealerPickFunc(b *testing.B) {
	d := mustDealer(b, 2048, 4, 4)
	ids := make([]string, 1024)
	for i := range ids {
		ids[i] = fmt.Sprintf("tenant-%09d", i)
	}
	names, view := thirdDown(2048)
	dst := make([]int, 0, 8)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		a := recordHealth{names: names, view: view}
		dst = d.PickFunc(dst, ids[i&1023], func(w int) bool { return a.view.Up(a.names[w]) }).Workers
		i++
	}
}
