package archtest

import (
	"os/exec"
	"strings"
	"testing"
)

const module = "github.com/corralhq/corral"

// floor returns the floor of a package of the module (1 is the top), by the
// table of docs/architecture.md. ok is false for a package the table does
// not place, which fails the test: a new top-level folder must be placed.
func floor(pkg string) (n int, ok bool) {
	rel := strings.TrimPrefix(strings.TrimPrefix(pkg, module), "/")
	top, _, _ := strings.Cut(rel, "/")
	switch {
	case top == "cmd" || top == "bench":
		return 1, true // programs: the binary and the benchmark drivers
	case top == "fleet" || top == "kraken" || top == "sim":
		return 2, true
	case rel == "authdns/answer" || strings.HasPrefix(rel, "authdns/answer/"):
		return 4, true // the DNS answer selection is a policy library
	case top == "authdns" || top == "hub" || top == "edge" || top == "client":
		return 3, true
	case top == "shard" || top == "limit" || top == "backoff" || top == "health" ||
		top == "wire" || top == "scenario" || top == "internal":
		return 4, true
	}
	return 0, false
}

func TestImportsPointDown(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", `{{.ImportPath}}{{range .Imports}} {{.}}{{end}}`, module+"/...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) < 10 {
		t.Fatalf("go list found only %d packages", len(lines))
	}
	for _, line := range lines {
		fields := strings.Fields(line)
		pkg := fields[0]
		from, ok := floor(pkg)
		if !ok {
			t.Errorf("%s is on no floor of docs/architecture.md: place it in floor()", pkg)
			continue
		}
		fromInternal := strings.HasPrefix(pkg, module+"/internal/")
		for _, imp := range fields[1:] {
			if !strings.HasPrefix(imp, module+"/") {
				continue
			}
			to, ok := floor(imp)
			switch {
			case !ok:
				t.Errorf("%s imports %s, which is on no floor", pkg, imp)
			case to < from:
				t.Errorf("%s (floor %d) imports %s (floor %d): imports must point down", pkg, from, imp, to)
			case fromInternal && !strings.HasPrefix(imp, module+"/internal/"):
				t.Errorf("%s imports %s: internal/ is leaf plumbing and imports nothing of corral above it", pkg, imp)
			}
		}
	}
}

func TestFloorTable(t *testing.T) {
	tests := []struct {
		pkg  string
		want int
	}{
		{"cmd/corral", 1},
		{"bench/hub/hubload", 1},
		{"sim/report", 2},
		{"authdns", 3},
		{"authdns/answer", 4},
		{"hub/history", 3},
		{"shard/internal/u64set", 4},
		{"internal/config", 4},
	}
	for _, tc := range tests {
		if got, ok := floor(module + "/" + tc.pkg); !ok || got != tc.want {
			t.Errorf("floor(%s) = %d, %v; want %d", tc.pkg, got, ok, tc.want)
		}
	}
	if _, ok := floor(module + "/misc"); ok {
		t.Error("an unplaced folder got a floor")
	}
}
