package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/corralhq/corral/internal/hostcheck"
)

// TestDoctorReportsEveryCheck runs `corral doctor` on this host: every
// setting of the table is reported, the exit code is 0 exactly when
// nothing asks for a change (3 otherwise), and every sysctl change is
// printed as its sysctl.d line.
func TestDoctorReportsEveryCheck(t *testing.T) {
	for _, n := range []string{"1", "1000000"} {
		code, out, errOut := corral(t, "doctor", "--connections", n, "--outbound", "--json")
		var got doctorJSON
		if err := json.Unmarshal([]byte(out), &got); err != nil {
			t.Fatalf("doctor --connections %s --json: exit %d, %v: %s %s", n, code, err, out, errOut)
		}
		if want := map[bool]int{true: 0, false: doctorNotReady}[got.Ready]; code != want {
			t.Errorf("--connections %s: exit %d with ready %v; want %d", n, code, got.Ready, want)
		}
		if len(got.Checks) != len(hostcheck.Settings)+1 {
			t.Fatalf("--connections %s: %d checks, want the %d of the table and the source addresses", n, len(got.Checks), len(hostcheck.Settings))
		}
		lines := 0
		for i, s := range hostcheck.Settings {
			c := got.Checks[i]
			if c.Name != s.Name || c.Want != s.WantString(got.Connections) {
				t.Errorf("check %d: %s wanting %q; want %s wanting %q", i, c.Name, c.Want, s.Name, s.WantString(got.Connections))
			}
			if c.State == "change" && s.Kind == hostcheck.Sysctl {
				if lines >= len(got.Sysctl) || !strings.HasPrefix(got.Sysctl[lines], s.Name+" = ") {
					t.Errorf("%s asks for a change but the sysctl lines are %q", s.Name, got.Sysctl)
				}
				lines++
			}
		}
		if lines != len(got.Sysctl) {
			t.Errorf("%d sysctl lines for %d changes", len(got.Sysctl), lines)
		}
	}
	// The text form ends with the lines to set, or says ready.
	code, out, _ := corral(t, "doctor", "--connections", "1000000")
	if code == 0 && !strings.Contains(out, "ready for 1000000 connections") ||
		code == doctorNotReady && !strings.Contains(out, "sysctl --system") && !strings.Contains(out, "LimitNOFILE=") {
		t.Errorf("doctor text: exit %d\n%s", code, out)
	}
	if code, _, errOut := corral(t, "doctor", "--connections", "0"); code != 1 || !strings.Contains(errOut, "at least 1") {
		t.Errorf("--connections 0: exit %d, %q", code, errOut)
	}
}
