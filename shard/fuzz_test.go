package shard

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// FuzzDealer checks that any configuration either is refused with a
// "shard: " error or deals valid, repeatable hands and picks.
func FuzzDealer(f *testing.F) {
	f.Add([]byte("corral-shard-key"), "tenant", 2048, 4, 4, 1, uint64(0))
	f.Add([]byte("0123456789abcdef"), "", 8, 2, 0, 0, uint64(3))
	f.Add([]byte("short"), "x", 0, 0, -1, 0, uint64(1))
	f.Add([]byte("0123456789abcdef"), "y", 16777218, 4, 0, 0, uint64(5))
	f.Fuzz(func(t *testing.T, secret []byte, id string, n, k, spill, minHealthy int, down uint64) {
		d, err := NewDealer(DealerConfig{Secret: secret, Workers: n, HandSize: k, Spill: spill, MinHealthy: minHealthy})
		if err != nil {
			if d != nil || !strings.HasPrefix(err.Error(), "shard: ") {
				t.Fatalf("NewDealer: %v, %v", d, err)
			}
			return
		}
		h := d.Hand(nil, id)
		checkHand(t, h, n, k)
		if again := d.HandBytes(nil, []byte(id)); !slices.Equal(h, again) {
			t.Fatalf("hand %v then %v", h, again)
		}
		sp := d.Spill(nil, id)
		checkHand(t, append(slices.Clone(h), sp...), n, k+spill)
		health := HealthFunc(func(w int) bool { return down>>(uint(w)%64)&1 == 0 })
		c := d.Pick(nil, id, health)
		if len(c.Workers) == 0 {
			t.Fatalf("empty pick %+v", c)
		}
		for _, w := range c.Workers {
			if !slices.Contains(h, w) && !slices.Contains(sp, w) {
				t.Fatalf("pick %v outside hand %v and spill %v", c.Workers, h, sp)
			}
			if c.Status != StatusFailOpen && !health(w) {
				t.Fatalf("pick %+v holds down worker %d", c, w)
			}
		}
	})
}

// FuzzAssigner checks that any assigner configuration and tenant id either
// is refused with a "shard: " error or yields a valid hand.
func FuzzAssigner(f *testing.F) {
	f.Add(64, 4, 1, uint64(1), "tenant", 20)
	f.Add(7, 3, 1, uint64(0), "", 9)
	f.Add(10, 11, 0, uint64(2), "x", 1)
	f.Fuzz(func(t *testing.T, n, k, tmax int, seed uint64, id string, count int) {
		if n > 4096 { // keep each input fast; large decks are covered by tests
			n = 4096
		}
		a, err := NewAssigner(AssignerConfig{Workers: n, HandSize: k, MaxOverlap: tmax, Seed: seed, MaxAttempts: 50})
		if err != nil {
			if a != nil || !strings.HasPrefix(err.Error(), "shard: ") {
				t.Fatalf("NewAssigner: %v, %v", a, err)
			}
			return
		}
		hands := map[string][]int{}
		for i := range min(max(count, 0), 30) {
			tid := id + strings.Repeat("+", i)
			h, err := a.Assign(tid)
			if err != nil {
				if !strings.HasPrefix(err.Error(), "shard: ") {
					t.Fatalf("Assign: %v", err)
				}
				continue
			}
			checkHand(t, h, n, k)
			hands[tid] = h
		}
		checkMaxOverlap(t, hands, tmax)
	})
}

// FuzzFileStore loads arbitrary bytes as a store: it must fail with a
// "shard: store" error or load hands that pass the assigner's checks.
func FuzzFileStore(f *testing.F) {
	dir := f.TempDir()
	seedPath := filepath.Join(dir, "seed")
	st, _ := OpenFileStore(seedPath)
	a, err := NewAssigner(AssignerConfig{Workers: 32, HandSize: 3, MaxOverlap: 1, Seed: 1, Store: st})
	if err != nil {
		f.Fatal(err)
	}
	a.AssignAll(tenantIDs(10, "s"))
	a.Close()
	good, _ := os.ReadFile(seedPath)
	f.Add(good)
	f.Add([]byte{})
	f.Add([]byte(fileMagic))
	f.Fuzz(func(t *testing.T, data []byte) {
		path := filepath.Join(t.TempDir(), "store")
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		st, err := OpenFileStore(path)
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		a, err := NewAssigner(AssignerConfig{Workers: 32, HandSize: 3, MaxOverlap: 1, Seed: 1, Store: st})
		if err != nil {
			if !strings.HasPrefix(err.Error(), "shard: ") {
				t.Fatalf("error %q", err)
			}
			return
		}
		hands := collect(a)
		for _, h := range hands {
			checkHand(t, h, 32, 3)
		}
		checkMaxOverlap(t, hands, 1)
	})
}
