package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// readmeBlock returns the fenced code block that follows the line
// "<!-- test: name -->" in sdk/js/README.md.
func readmeBlock(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(sdk, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(b), "<!-- test: "+name+" -->\n```")
	if !ok {
		t.Fatalf("README.md has no block marked <!-- test: %s -->", name)
	}
	_, rest, _ = strings.Cut(rest, "\n") // the fence's language
	block, _, ok := strings.Cut(rest, "\n```")
	if !ok {
		t.Fatalf("README.md: the block %s does not end", name)
	}
	return block + "\n"
}

// TestReadmeExample runs the README's copy-paste example as it is:
// mint-token.mjs mints a token with examples/hub.yaml's secret, and
// example.html, in headless Chromium, subscribes to news on a hub started
// from examples/hub.yaml (on a free port: the one substitution) and prints a
// message published through the hub's HTTP API, as the README's curl does.
func TestReadmeExample(t *testing.T) {
	needBrowser(t)
	bin := build(t)
	hub := startHub(t, bin, "hub-1", "CORRAL_HUB_NATS_STORE_DIR="+t.TempDir())

	dir := t.TempDir()
	mint := filepath.Join(dir, "mint-token.mjs")
	if err := os.WriteFile(mint, []byte(readmeBlock(t, "mint-token.mjs")), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("node", mint)
	cmd.Env = os.Environ()
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("node mint-token.mjs: %v", err)
	}
	token := strings.TrimSpace(string(out))

	const exampleURL = "ws://127.0.0.1:7400/v1/ws"
	page := readmeBlock(t, "example.html")
	if strings.Count(page, exampleURL) != 1 {
		t.Fatalf("example.html should name %s once", exampleURL)
	}
	page = strings.Replace(page, exampleURL, hub.wsURL(), 1)
	srv := pageServer(t, map[string][]byte{"example.html": []byte(page)})
	b := openPage(t, srv.URL+"/example.html#"+token)

	b.WaitLine(t, "subscribed", func(s string) bool { return s == "subscribed" })
	off := publish(t, hub.addr, "news", "hello")
	want := fmt.Sprintf("news %d hello", off)
	b.WaitLine(t, want, func(s string) bool { return s == want })
	var states []string
	for _, l := range b.Lines() {
		if s, ok := strings.CutPrefix(l.Text, "state "); ok {
			states = append(states, s)
		}
	}
	if strings.Join(states, ",") != "connecting,connected" {
		t.Errorf("states printed: %v, want connecting, connected", states)
	}
}
