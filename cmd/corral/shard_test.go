package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

const testSecretHex = "000102030405060708090a0b0c0d0e0f"

func TestShardAnalyzeWorkedNumbers(t *testing.T) {
	code, out, errOut := corral(t, "shard", "analyze", "--workers", "8", "--hand", "2")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, want := range []string{"hands C(n,k)", " 28\n", "53.5714 %", "42.8571 %", "3.57143 %", "15/28"} {
		if !strings.Contains(out, want) {
			t.Errorf("analyze n=8 k=2 lacks %q:\n%s", want, out)
		}
	}
	code, out, errOut = corral(t, "shard", "analyze", "--workers", "2048", "--hand", "4", "--max-overlap", "2", "--zones", "4", "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var a struct {
		Hands   string `json:"hands"`
		Overlap []struct {
			Members     int     `json:"members"`
			Probability float64 `json:"probability"`
		} `json:"overlap"`
		Stored struct {
			Capacity string `json:"capacity"`
		} `json:"stored"`
		Lattice struct {
			PerZone int `json:"per_zone"`
		} `json:"lattice"`
	}
	if err := json.Unmarshal([]byte(out), &a); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if a.Hands != "730862190080" || a.Stored.Capacity != "357389824" || a.Lattice.PerZone != 1 || len(a.Overlap) != 5 {
		t.Errorf("analysis %+v", a)
	}
	if p := a.Overlap[0].Probability; p < 0.99215 || p >= 0.99225 {
		t.Errorf("P(overlap=0) = %v, want 99.22 %%", p)
	}
	code, out, _ = corral(t, "shard", "analyze", "--workers", "2048", "--hand", "4")
	if code != 0 || !strings.Contains(out, "730,862,190,080") {
		t.Errorf("grouped hands missing: %s", out)
	}
}

func TestShardBadInput(t *testing.T) {
	dir := t.TempDir()
	corrupt := filepath.Join(dir, "corrupt.store")
	os.WriteFile(corrupt, []byte("CRLSHRD1garbage-garbage"), 0o644)
	tenants := filepath.Join(dir, "tenants")
	os.WriteFile(tenants, []byte("a\nb\nc\n"), 0o644)
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"k > n", []string{"shard", "analyze", "--workers", "3", "--hand", "4"}, "shard: hand size 4 exceeds the 3 workers"},
		{"k < 1", []string{"shard", "analyze", "--workers", "3", "--hand", "0"}, "shard: hand size 0 must be at least 1"},
		{"missing flag", []string{"shard", "analyze", "--workers", "3"}, `"hand" not set`},
		{"no secret", []string{"shard", "hand", "--id", "x", "--workers", "10", "--hand", "2"}, "shard: secret must be 32 hex digits"},
		{"entropy", []string{"shard", "hand", "--id", "x", "--workers", "16777218", "--hand", "4", "--secret", testSecretHex}, "entropy bound"},
		{"bad down", []string{"shard", "hand", "--id", "x", "--workers", "10", "--hand", "2", "--secret", testSecretHex, "--down", "a"}, `"a" is not a worker index`},
		{"corrupt store", []string{"shard", "assign", "--workers", "64", "--hand", "3", "--max-overlap", "1", "--tenants", tenants, "--store", corrupt}, "shard: store " + corrupt},
		{"over capacity", []string{"shard", "assign", "--workers", "4", "--hand", "3", "--max-overlap", "1", "--tenants", tenants}, "exceed the capacity bound 2"},
		{"no tenants file", []string{"shard", "assign", "--workers", "64", "--hand", "3", "--max-overlap", "1", "--tenants", filepath.Join(dir, "nope")}, "shard: tenants"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, _, errOut := corral(t, tc.args...)
			if code == 0 || !strings.Contains(errOut, tc.want) {
				t.Fatalf("exit %d, stderr %q; want %q", code, errOut, tc.want)
			}
		})
	}
}

func TestShardAssignStoreAndHand(t *testing.T) {
	dir := t.TempDir()
	tenants := filepath.Join(dir, "tenants")
	var ids []string
	for i := range 200 {
		ids = append(ids, "tenant-"+string(rune('a'+i%26))+strings.Repeat("x", i/26))
	}
	os.WriteFile(tenants, []byte("# tenants\n\n"+strings.Join(ids, "\n")+"\n"), 0o644)
	store := filepath.Join(dir, "hands.store")
	args := []string{"shard", "assign", "--workers", "64", "--hand", "4", "--max-overlap", "1", "--seed", "3", "--tenants", tenants, "--store", store, "--json"}
	code, out, errOut := corral(t, args...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var res assignResult
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatal(err)
	}
	if len(res.Tenants) != 200 || res.Stored != 200 || res.Capacity != "336" {
		t.Fatalf("assign result: %d tenants, stored %d, capacity %s", len(res.Tenants), res.Stored, res.Capacity)
	}
	for i, a := range res.Tenants {
		for _, b := range res.Tenants[:i] {
			shared := 0
			for _, w := range a.Hand {
				if slices.Contains(b.Hand, w) {
					shared++
				}
			}
			if shared > 1 {
				t.Fatalf("%s %v and %s %v share %d", a.ID, a.Hand, b.ID, b.Hand, shared)
			}
		}
	}
	// A second run loads the store and keeps every hand.
	code, out2, _ := corral(t, args...)
	if code != 0 || out2 != out {
		t.Fatalf("second run differs (exit %d)", code)
	}
	// The text form.
	code, text, _ := corral(t, "shard", "assign", "--workers", "64", "--hand", "4", "--max-overlap", "1", "--seed", "3", "--tenants", tenants)
	first := res.Tenants[0]
	if code != 0 || !strings.HasPrefix(text, first.ID+"\t"+joinInts(first.Hand)+"\n") || !strings.Contains(text, "# 200 tenants assigned") {
		t.Fatalf("text output %q", text[:min(len(text), 200)])
	}
	// corral shard hand --store prints the stored hand.
	code, out, errOut = corral(t, "shard", "hand", "--id", first.ID, "--store", store, "--workers", "64", "--hand", "4", "--max-overlap", "1", "--seed", "3", "--json")
	var h handResult
	if code != 0 || json.Unmarshal([]byte(out), &h) != nil || h.Mode != "stored" || !slices.Equal(h.Hand, first.Hand) {
		t.Fatalf("hand --store: exit %d %s %s", code, out, errOut)
	}
	code, _, errOut = corral(t, "shard", "hand", "--id", "stranger", "--store", store, "--workers", "64", "--hand", "4", "--max-overlap", "1", "--seed", "3")
	if code == 0 || !strings.Contains(errOut, `tenant "stranger" has no hand`) {
		t.Fatalf("unknown tenant: exit %d %s", code, errOut)
	}
}

func TestShardHandDealerAndPick(t *testing.T) {
	code, out, errOut := corral(t, "shard", "hand", "--id", "example.com", "--workers", "2048", "--hand", "4", "--secret", testSecretHex, "--json")
	var h handResult
	if code != 0 || json.Unmarshal([]byte(out), &h) != nil {
		t.Fatalf("exit %d %s %s", code, out, errOut)
	}
	// The same hand as the library's example (shard.ExampleDealer).
	if h.Mode != "dealer" || !slices.Equal(h.Hand, []int{781, 1855, 1530, 66}) {
		t.Fatalf("hand %+v", h)
	}
	down := joinInts(h.Hand)
	code, out, _ = corral(t, "shard", "hand", "--id", "example.com", "--workers", "2048", "--hand", "4", "--spill", "2", "--secret", testSecretHex, "--down", down, "--json")
	if code != 0 || json.Unmarshal([]byte(out), &h) != nil || h.Pick == nil || h.Pick.Status != "spilled" || !slices.Equal(h.Pick.Workers, h.Spill[:1]) {
		t.Fatalf("pick with the hand down: %s", out)
	}
	code, out, _ = corral(t, "shard", "hand", "--id", "example.com", "--workers", "2048", "--hand", "4", "--secret", testSecretHex, "--down", down)
	if code != 0 || !strings.Contains(out, "(fail-open)") {
		t.Fatalf("fail open: %s", out)
	}
}

func TestShardHandStableAndLattice(t *testing.T) {
	file := filepath.Join(t.TempDir(), "workers")
	os.WriteFile(file, []byte("# id weight zone\nedge-a1 1 a\nedge-a2 1 a\nedge-a3 1 a\nedge-b1 1 b\nedge-b2 1 b\nedge-b3 1 b\n"), 0o644)
	code, out, errOut := corral(t, "shard", "hand", "--id", "tenant-a", "--workers-file", file, "--hand", "2", "--lattice", "--secret", testSecretHex, "--json")
	var h handResult
	if code != 0 || json.Unmarshal([]byte(out), &h) != nil {
		t.Fatalf("exit %d %s %s", code, out, errOut)
	}
	// The same hand as shard.ExampleStable.
	if h.Mode != "lattice" || !slices.Equal(h.WorkerIDs, []string{"edge-b3", "edge-a2"}) {
		t.Fatalf("lattice hand %+v", h)
	}
	os.WriteFile(file, []byte("w1 x\n"), 0o644)
	code, _, errOut = corral(t, "shard", "hand", "--id", "t", "--workers-file", file, "--hand", "1", "--secret", testSecretHex)
	if code == 0 || !strings.Contains(errOut, `weight "x" is not a number`) {
		t.Fatalf("bad weight: exit %d %s", code, errOut)
	}
}
