package client_test

import (
	"os"
	"strings"
	"testing"
)

// between returns the lines of s after the line holding from and before
// the line holding to, with their indentation trimmed.
func between(t *testing.T, s, from, to string) []string {
	t.Helper()
	var out []string
	in := false
	for _, l := range strings.Split(s, "\n") {
		switch {
		case strings.Contains(l, from):
			in = true
		case strings.Contains(l, to) && in:
			return out
		case in:
			out = append(out, strings.TrimSpace(l))
		}
	}
	t.Fatalf("no lines between %q and %q", from, to)
	return nil
}

// TestREADMEExample: the body of main in README.md's example is the code
// Example runs against a real hub, line for line.
func TestREADMEExample(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	example, err := os.ReadFile("example_test.go")
	if err != nil {
		t.Fatal(err)
	}
	_, block, _ := strings.Cut(string(readme), "```go\n")
	block, _, _ = strings.Cut(block, "```")
	got := between(t, block, `url, token := "ws://127.0.0.1:7400"`, "log.Fatal(c.Err())")
	want := between(t, string(example), "// README example begins.", "log.Fatal(c.Err())")
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("client/README.md's example:\n%s\n\nExample runs:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
