package shard

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func tenantIDs(n int, prefix string) []string {
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("%s%07d", prefix, i)
	}
	return ids
}

// checkMaxOverlap fails unless no two hands share more than t workers. Two
// hands share more than t workers exactly when they share a (t+1)-subset,
// so it indexes every (t+1)-subset of every hand (as a string key,
// independently of the assigner's packed keys) and fails on a repeat.
func checkMaxOverlap(t *testing.T, hands map[string][]int, tmax int) {
	t.Helper()
	seen := make(map[string]string, len(hands)*4)
	for id, h := range hands {
		s := slices.Clone(h)
		slices.Sort(s)
		for _, combo := range combinations(len(s), tmax+1) {
			var b strings.Builder
			for _, p := range combo {
				fmt.Fprintf(&b, "%d,", s[p])
			}
			key := b.String()
			if other, dup := seen[key]; dup {
				t.Fatalf("hands of %s %v and %s %v share the subset {%s}", id, h, other, hands[other], key)
			}
			seen[key] = id
		}
	}
}

func collect(a *Assigner) map[string][]int {
	out := map[string][]int{}
	a.Each(func(id string, hand []int) bool {
		out[id] = slices.Clone(hand)
		return true
	})
	return out
}

func TestAssignerMaxOverlap100k(t *testing.T) {
	a, err := NewAssigner(AssignerConfig{Workers: 2048, HandSize: 4, MaxOverlap: 2, Seed: 42, ExpectedTenants: 100000})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.AssignAll(tenantIDs(100000, "tenant-")); err != nil {
		t.Fatal(err)
	}
	hands := collect(a)
	if len(hands) != 100000 || a.Len() != 100000 {
		t.Fatalf("%d hands, Len %d", len(hands), a.Len())
	}
	for id, h := range hands {
		checkHand(t, h, 2048, 4)
		if got, ok := a.Hand(nil, id); !ok || !slices.Equal(got, h) {
			t.Fatalf("Hand(%s) = %v %v, Each gave %v", id, got, ok, h)
		}
	}
	checkMaxOverlap(t, hands, 2)
}

// TestAssignerSmallDeckBruteForce fills small decks until the assigner
// refuses and checks every pair by direct comparison.
func TestAssignerSmallDeckBruteForce(t *testing.T) {
	for _, tc := range []struct{ n, k, tmax int }{{7, 3, 1}, {12, 4, 1}, {16, 4, 2}, {9, 3, 0}, {10, 2, 1}} {
		t.Run(fmt.Sprintf("n=%d,k=%d,t=%d", tc.n, tc.k, tc.tmax), func(t *testing.T) {
			a, err := NewAssigner(AssignerConfig{Workers: tc.n, HandSize: tc.k, MaxOverlap: tc.tmax, Seed: 7, MaxAttempts: 5000})
			if err != nil {
				t.Fatal(err)
			}
			var hands [][]int
			var lastErr error
			for i := 0; ; i++ {
				h, err := a.Assign(fmt.Sprint("t", i))
				if err != nil {
					lastErr = err
					break
				}
				hands = append(hands, h)
			}
			if !strings.HasPrefix(lastErr.Error(), "shard: ") {
				t.Fatalf("error %q", lastErr)
			}
			if int64(len(hands)) > a.Capacity().Int64() {
				t.Fatalf("%d hands exceed the capacity bound %s", len(hands), a.Capacity())
			}
			for i := range hands {
				for j := range i {
					shared := 0
					for _, w := range hands[i] {
						if slices.Contains(hands[j], w) {
							shared++
						}
					}
					if shared > tc.tmax {
						t.Fatalf("hands %v and %v share %d > %d", hands[i], hands[j], shared, tc.tmax)
					}
				}
			}
			t.Logf("%d hands before %q", len(hands), lastErr)
		})
	}
}

func TestAssignerCapacityCheckedUpFront(t *testing.T) {
	a, err := NewAssigner(AssignerConfig{Workers: 7, HandSize: 3, MaxOverlap: 1})
	if err != nil {
		t.Fatal(err)
	}
	if a.Capacity().Int64() != 7 {
		t.Fatalf("capacity %s, want 7 (the Fano plane)", a.Capacity())
	}
	err = a.AssignAll(tenantIDs(8, "x"))
	if err == nil || !strings.Contains(err.Error(), "8 new tenants plus 0 stored exceed the capacity bound 7") {
		t.Fatalf("AssignAll(8): %v", err)
	}
	if a.Len() != 0 {
		t.Fatalf("a refused AssignAll assigned %d tenants", a.Len())
	}
}

func TestAssignerDeterministic(t *testing.T) {
	ids := tenantIDs(3000, "d")
	run := func(seed uint64) map[string][]int {
		a, err := NewAssigner(AssignerConfig{Workers: 64, HandSize: 4, MaxOverlap: 1, Seed: seed})
		if err != nil {
			t.Fatal(err)
		}
		if err := a.AssignAll(ids[:150]); err != nil {
			t.Fatal(err)
		}
		return collect(a)
	}
	a, b, c := run(1), run(1), run(2)
	same := 0
	for id, h := range a {
		if !slices.Equal(h, b[id]) {
			t.Fatalf("%s: %v then %v under the same seed", id, h, b[id])
		}
		if slices.Equal(h, c[id]) {
			same++
		}
	}
	if same > 15 {
		t.Errorf("%d of 150 hands equal under another seed", same)
	}
	// The first candidate is the dealer's hand: with no conflicts the
	// assigner agrees with the dealer of the derived secret.
	big, err := NewAssigner(AssignerConfig{Workers: 2048, HandSize: 4, MaxOverlap: 2, Seed: 9})
	if err != nil {
		t.Fatal(err)
	}
	h, err := big.Assign("solo")
	if err != nil || !slices.Equal(h, big.dealer.Hand(nil, "solo")) {
		t.Fatalf("first hand %v (%v), dealer %v", h, err, big.dealer.Hand(nil, "solo"))
	}
}

func TestAssignerStoreReload(t *testing.T) {
	path := filepath.Join(t.TempDir(), "hands.store")
	cfg := AssignerConfig{Workers: 256, HandSize: 4, MaxOverlap: 2, Seed: 5}
	open := func() *Assigner {
		t.Helper()
		st, err := OpenFileStore(path)
		if err != nil {
			t.Fatal(err)
		}
		c := cfg
		c.Store = st
		a, err := NewAssigner(c)
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	ids := tenantIDs(6000, "r")
	a := open()
	if err := a.AssignAll(ids[:4000]); err != nil {
		t.Fatal(err)
	}
	before := collect(a)
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	b := open()
	if got := collect(b); len(got) != len(before) {
		t.Fatalf("reloaded %d hands, stored %d", len(got), len(before))
	} else {
		for id, h := range before {
			if !slices.Equal(got[id], h) {
				t.Fatalf("%s: reloaded %v, stored %v", id, got[id], h)
			}
		}
	}
	if err := b.AssignAll(ids); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	// An uninterrupted in-memory run gives the same hands.
	mem, err := NewAssigner(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := mem.AssignAll(ids); err != nil {
		t.Fatal(err)
	}
	c := open()
	defer c.Close()
	want, got := collect(mem), collect(c)
	for id, h := range want {
		if !slices.Equal(got[id], h) {
			t.Fatalf("%s: reload-and-continue %v, one run %v", id, got[id], h)
		}
	}
	checkMaxOverlap(t, got, 2)
	// Reopening with other parameters is refused.
	st, err := OpenFileStore(path)
	if err != nil {
		t.Fatal(err)
	}
	other := cfg
	other.Store, other.Seed = st, 6
	if _, err := NewAssigner(other); err == nil || !strings.Contains(err.Error(), "the store was built with") {
		t.Fatalf("mismatched seed: %v", err)
	}
	st.Close()
}

func TestFileStoreCorrupt(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good")
	st, err := OpenFileStore(good)
	if err != nil {
		t.Fatal(err)
	}
	cfg := AssignerConfig{Workers: 64, HandSize: 3, MaxOverlap: 1, Seed: 1, Store: st}
	a, err := NewAssigner(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.AssignAll(tenantIDs(50, "c")); err != nil {
		t.Fatal(err)
	}
	a.Close()
	data, err := os.ReadFile(good)
	if err != nil {
		t.Fatal(err)
	}
	flip := slices.Clone(data)
	flip[len(flip)/2] ^= 0x40
	// A checksum-valid store whose hands overlap too much.
	overlapping := filepath.Join(dir, "overlap")
	ost, _ := OpenFileStore(overlapping)
	if _, _, err := ost.Load(func(string, []int) error { return nil }); err != nil {
		t.Fatal(err)
	}
	ost.Init(StoreParams{Workers: 64, HandSize: 3, MaxOverlap: 1, Seed: 1})
	ost.Append("a", []int{1, 2, 3})
	ost.Append("b", []int{1, 2, 4})
	ost.Close()
	ovData, _ := os.ReadFile(overlapping)
	dupHand := filepath.Join(dir, "dup")
	dst, _ := OpenFileStore(dupHand)
	dst.Load(func(string, []int) error { return nil })
	dst.Init(StoreParams{Workers: 64, HandSize: 3, MaxOverlap: 1, Seed: 1})
	dst.Append("a", []int{1, 1, 3})
	dst.Close()
	dupData, _ := os.ReadFile(dupHand)

	for _, tc := range []struct {
		name string
		data []byte
		want string
	}{
		{"flipped byte", flip, "checksum mismatch"},
		{"truncated", data[:len(data)-3], "truncated record"},
		{"bad magic", append([]byte("NOTSHARD"), data[8:]...), "not a corral shard store"},
		{"short header", data[:5], "short header"},
		{"magic only", data[:8], "no parameter record"},
		{"huge length", append(slices.Clone(data[:8]), 0xff, 0xff, 0xff, 0xff, 0x0f), "out of range"},
		{"overlapping hands", ovData, "shares more than 1 workers"},
		{"repeated worker", dupData, "repeated or out-of-range worker"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(dir, strings.ReplaceAll(tc.name, " ", "_"))
			if err := os.WriteFile(path, tc.data, 0o644); err != nil {
				t.Fatal(err)
			}
			st, err := OpenFileStore(path)
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			c := cfg
			c.Store = st
			a, err := NewAssigner(c)
			if err == nil || a != nil {
				t.Fatalf("NewAssigner on a corrupt store: %v, %v", a, err)
			}
			if !strings.HasPrefix(err.Error(), "shard: store ") || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %q, want %q", err, tc.want)
			}
		})
	}
}

func TestAssignerBadInput(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  AssignerConfig
		want string
	}{
		{"t = k", AssignerConfig{Workers: 10, HandSize: 3, MaxOverlap: 3}, "max overlap 3 must be in [0, hand size 3)"},
		{"t < 0", AssignerConfig{Workers: 10, HandSize: 3, MaxOverlap: -1}, "max overlap -1"},
		{"k > n", AssignerConfig{Workers: 3, HandSize: 4, MaxOverlap: 1}, "hand size 4 exceeds the 3 workers"},
		{"k < 1", AssignerConfig{Workers: 3, HandSize: 0}, "hand size 0 must be at least 1"},
		{"negative attempts", AssignerConfig{Workers: 10, HandSize: 3, MaxAttempts: -1}, "max attempts -1"},
		{"too many subsets", AssignerConfig{Workers: 64, HandSize: 20, MaxOverlap: 9}, "subsets per hand"},
		{"key too wide", AssignerConfig{Workers: 1 << 20, HandSize: 4, MaxOverlap: 3}, "80-bit index keys"},
		{"entropy", AssignerConfig{Workers: 1 << 26, HandSize: 4, MaxOverlap: 1}, "entropy bound"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, err := NewAssigner(tc.cfg)
			if err == nil || a != nil || !strings.HasPrefix(err.Error(), "shard: ") || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("NewAssigner: %v, %v; want error with %q", a, err, tc.want)
			}
		})
	}
	a, err := NewAssigner(AssignerConfig{Workers: 10, HandSize: 3, MaxOverlap: 1})
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"", strings.Repeat("x", MaxTenantID+1)} {
		if _, err := a.Assign(id); err == nil || !strings.HasPrefix(err.Error(), "shard: ") {
			t.Errorf("Assign(%d bytes): %v", len(id), err)
		}
	}
}

func TestAssignerExpectedTenants(t *testing.T) {
	if _, err := NewAssigner(AssignerConfig{Workers: 10, HandSize: 3, ExpectedTenants: -1}); err == nil || !strings.Contains(err.Error(), "expected tenants -1") {
		t.Fatalf("negative expected tenants: %v", err)
	}
	// A huge hint is clamped to the capacity, not allocated.
	a, err := NewAssigner(AssignerConfig{Workers: 10, HandSize: 3, MaxOverlap: 1, ExpectedTenants: 1 << 40})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Assign("x"); err != nil {
		t.Fatal(err)
	}
}

// TestAssignerConcurrent assigns overlapping id sets from several
// goroutines (run under -race) and checks every id got one hand and the
// overlap bound holds.
func TestAssignerConcurrent(t *testing.T) {
	a, err := NewAssigner(AssignerConfig{Workers: 512, HandSize: 4, MaxOverlap: 2, Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	ids := tenantIDs(2000, "c")
	got := make([]map[string][]int, 4)
	done := make(chan int)
	for g := range got {
		got[g] = map[string][]int{}
		go func() {
			defer func() { done <- g }()
			for i := range ids {
				id := ids[(i+g*500)%len(ids)]
				h, err := a.Assign(id)
				if err != nil {
					t.Error(err)
					return
				}
				got[g][id] = h
			}
		}()
	}
	for range got {
		<-done
	}
	all := collect(a)
	if len(all) != len(ids) {
		t.Fatalf("%d hands for %d ids", len(all), len(ids))
	}
	for _, m := range got {
		for id, h := range m {
			if !slices.Equal(h, all[id]) {
				t.Fatalf("%s: a goroutine saw %v, stored %v", id, h, all[id])
			}
		}
	}
	checkMaxOverlap(t, all, 2)
}
