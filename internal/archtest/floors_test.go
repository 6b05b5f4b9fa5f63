package archtest

import (
	"fmt"
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
	case top == "cmd" || top == "bench" || top == "sdk":
		return 1, true // programs: the binary, the benchmark drivers, the browser SDK's harness that runs the binary
	case top == "fleet" || top == "kraken" || top == "sim":
		return 2, true
	case rel == "authdns/answer" || strings.HasPrefix(rel, "authdns/answer/"):
		return 4, true // the DNS answer selection is a policy library
	case top == "authdns" || top == "hub" || top == "edge" || top == "client":
		return 3, true
	case top == "shard" || top == "pick" || top == "limit" || top == "backoff" || top == "health" ||
		top == "wire" || top == "scenario" || top == "scenarios" || top == "internal":
		return 4, true // scenarios: the shipped scenario files, embedded
	}
	return 0, false
}

// component returns the part of the house a package belongs to, for the
// same-floor rule: the top-level folder (hub for hub/history), except that
// the DNS answer selection is its own library and each internal/ package
// its own piece of plumbing.
func component(pkg string) string {
	rel := strings.TrimPrefix(strings.TrimPrefix(pkg, module), "/")
	parts := strings.SplitN(rel, "/", 3)
	switch {
	case rel == "authdns/answer" || strings.HasPrefix(rel, "authdns/answer/"):
		return "authdns/answer"
	case parts[0] == "internal" && len(parts) > 1:
		return "internal/" + parts[1]
	}
	return parts[0]
}

// sameFloorAllowed lists the imports between libraries of floor 4 that
// docs/architecture.md allows, importer -> imported component. Any package
// may import internal/ plumbing of its floor; nothing else on floor 4
// imports a sibling.
var sameFloorAllowed = map[[2]string]bool{
	{"authdns/answer", "shard"}:    true, // shuffle-sharded answers draw hands from shard
	{"scenario", "backoff"}:        true, // a scenario names and checks a backoff policy
	{"scenario", "authdns/answer"}: true, // a scenario names and checks a DNS policy
}

// importProblem says what is wrong with pkg importing imp (both of the
// module), or "" when the import is allowed: every import points down the
// floors or stays inside the importer's component; on floor 3 the servers
// and the SDK import none of each other; on floor 4 the libraries import
// each other only as sameFloorAllowed says, and internal/ imports nothing
// of corral outside internal/.
func importProblem(pkg, imp string) string {
	from, ok := floor(pkg)
	if !ok {
		return pkg + " is on no floor of docs/architecture.md: place it in floor()"
	}
	to, ok := floor(imp)
	switch {
	case !ok:
		return fmt.Sprintf("%s imports %s, which is on no floor", pkg, imp)
	case to < from:
		return fmt.Sprintf("%s (floor %d) imports %s (floor %d): imports must point down", pkg, from, imp, to)
	case strings.HasPrefix(pkg, module+"/internal/") && !strings.HasPrefix(imp, module+"/internal/"):
		return fmt.Sprintf("%s imports %s: internal/ is leaf plumbing and imports nothing of corral above it", pkg, imp)
	}
	cf, ct := component(pkg), component(imp)
	if to != from || cf == ct {
		return ""
	}
	switch {
	case from == 3:
		return fmt.Sprintf("%s imports %s: the servers and the SDK (floor 3) import none of each other", pkg, imp)
	case from == 4 && !strings.HasPrefix(ct, "internal/") && !sameFloorAllowed[[2]string{cf, ct}]:
		return fmt.Sprintf("%s imports %s: floor-4 libraries import each other only where docs/architecture.md allows it", pkg, imp)
	}
	return ""
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
		if _, ok := floor(pkg); !ok {
			t.Errorf("%s is on no floor of docs/architecture.md: place it in floor()", pkg)
			continue
		}
		for _, imp := range fields[1:] {
			if !strings.HasPrefix(imp, module+"/") {
				continue
			}
			if p := importProblem(pkg, imp); p != "" {
				t.Error(p)
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
		{"sdk/js/e2e", 1},
		{"sim/report", 2},
		{"authdns", 3},
		{"authdns/answer", 4},
		{"hub/history", 3},
		{"shard/internal/u64set", 4},
		{"internal/config", 4},
		{"internal/wsserve", 4},
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

func TestImportRules(t *testing.T) {
	for _, tc := range []struct {
		pkg, imp string
		ok       bool
	}{
		{pkg: "cmd/corral", imp: "hub", ok: true},
		{pkg: "sim", imp: "authdns/answer", ok: true},
		{pkg: "hub", imp: "hub/history", ok: true},
		{pkg: "hub/history", imp: "hub/auth", ok: true},
		{pkg: "authdns", imp: "authdns/answer", ok: true},
		{pkg: "authdns/answer", imp: "shard", ok: true},
		{pkg: "scenario", imp: "backoff", ok: true},
		{pkg: "health", imp: "internal/config", ok: true},
		{pkg: "internal/natsutil", imp: "internal/config", ok: true},
		{pkg: "authdns", imp: "hub"},
		{pkg: "hub", imp: "client"},
		{pkg: "edge", imp: "hub/history"},
		{pkg: "client", imp: "authdns"},
		{pkg: "limit", imp: "backoff"},
		{pkg: "shard", imp: "authdns/answer"},
		{pkg: "backoff", imp: "scenario"},
		{pkg: "wire", imp: "limit"},
		{pkg: "limit", imp: "hub"},
		{pkg: "internal/config", imp: "limit"},
		{pkg: "internal/wsserve", imp: "wire"}, // the WebSocket server takes subprotocols and bounds through its Config
		{pkg: "hub", imp: "internal/wsserve", ok: true},
		{pkg: "edge", imp: "internal/wsserve", ok: true},
	} {
		got := importProblem(module+"/"+tc.pkg, module+"/"+tc.imp)
		if (got == "") != tc.ok {
			t.Errorf("%s importing %s: problem %q, want allowed %v", tc.pkg, tc.imp, got, tc.ok)
		}
	}
}
