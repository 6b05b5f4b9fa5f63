package main

import (
	"bytes"
	"context"
	"encoding/json"
	"runtime"
	"strings"
	"testing"
)

// corral runs the binary's command line in process.
func corral(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	code = run(context.Background(), args, &out, &errb)
	return code, out.String(), errb.String()
}

func TestVersion(t *testing.T) {
	code, out, _ := corral(t, "version")
	if code != 0 || !strings.HasPrefix(out, "corral ") || !strings.Contains(out, runtime.Version()) {
		t.Fatalf("version: code %d, out %q", code, out)
	}
	code, out, _ = corral(t, "version", "--json")
	var v versionInfo
	if code != 0 || json.Unmarshal([]byte(out), &v) != nil || v.Go != runtime.Version() || v.Version == "" {
		t.Fatalf("version --json: code %d, out %q", code, out)
	}
}

func TestHelpListsOnlyRegisteredCommands(t *testing.T) {
	code, out, _ := corral(t, "--help")
	if code != 0 {
		t.Fatalf("--help exit %d", code)
	}
	root := newRootCmd(&globals{})
	for _, c := range root.Commands() {
		if !c.Hidden && !strings.Contains(out, "  "+c.Name()+" ") {
			t.Errorf("--help does not list %q", c.Name())
		}
	}
	for _, absent := range []string{"not implemented", "completion"} {
		if strings.Contains(out, absent) {
			t.Errorf("--help mentions %q", absent)
		}
	}
}

func TestUnknownCommandFails(t *testing.T) {
	code, _, errOut := corral(t, "frobnicate")
	if code == 0 || !strings.Contains(errOut, "unknown command") {
		t.Fatalf("code %d, stderr %q", code, errOut)
	}
}
