package main

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/corralhq/corral/hub/auth"
	"github.com/corralhq/corral/internal/testkit"
)

// The development secret and API key of examples/hub.yaml.
const (
	exampleSecret = "dev-secret-change-me-0123456789"
	exampleAPIKey = "dev-api-key-change-me"
)

// exampleHub is `corral hub --config examples/hub.yaml` run in process on
// addr (a free port when empty) with its store in dir.
type exampleHub struct {
	*proc
	addr, grpc string
}

func startExampleHub(t *testing.T, addr, dir string) *exampleHub {
	t.Helper()
	if addr == "" {
		addr = "127.0.0.1:" + freePort(t)
	}
	t.Setenv("CORRAL_HUB_GRPC_LISTEN", "127.0.0.1:0")
	t.Setenv("CORRAL_HUB_NATS_STORE_DIR", dir)
	p := start([]string{"hub", "--config", "../../examples/hub.yaml", "--listen", addr, "--admin", "127.0.0.1:0", "--log-format", "json"})
	h := &exampleHub{proc: p, addr: addr}
	testkit.WaitFor(t, 30*time.Second, "the hub up", func() bool { return strings.Contains(p.err.String(), `"hub up"`) || p.exited() })
	for _, line := range strings.Split(p.err.String(), "\n") {
		var l struct{ Msg, GRPC string }
		if json.Unmarshal([]byte(line), &l) == nil && l.Msg == "hub up" {
			h.grpc = l.GRPC
		}
	}
	if h.grpc == "" {
		t.Fatalf("the hub did not come up: %s", p.err.String())
	}
	return h
}

// stop ends the hub (as SIGTERM does: it drains) and checks its exit.
func (h *exampleHub) stop(t *testing.T) {
	t.Helper()
	h.cancel()
	if code := h.wait(t); code != 0 {
		t.Errorf("corral hub exit %d: %s", code, h.err.String())
	}
}

// devToken mints a token with `corral token` for tenant demo.
func devToken(t *testing.T, args ...string) string {
	t.Helper()
	t.Setenv("CORRAL_DEV_SECRET", exampleSecret)
	code, out, errOut := corral(t, append([]string{"token", "--secret-env", "CORRAL_DEV_SECRET", "--tenant", "demo"}, args...)...)
	if code != 0 {
		t.Fatalf("corral token: exit %d: %s", code, errOut)
	}
	return strings.TrimSpace(out)
}

func TestTokenMintsWhatTheHubVerifies(t *testing.T) {
	tok := devToken(t, "--channels", "news.*,alerts.>", "--publish", "chat.>", "--priority", "p1", "--ttl", "1h", "--kid", "dev")
	v, err := auth.New(auth.Config{Keys: []auth.KeyConfig{{ID: "dev", Algorithm: "HS256", Secret: exampleSecret}}})
	if err != nil {
		t.Fatal(err)
	}
	c, err := v.Verify(tok, time.Now())
	if err != nil {
		t.Fatalf("the hub's verifier refuses the token: %v", err)
	}
	if c.Tenant != "demo" || c.Rank() != 1 || !c.CanSubscribe("news.eu") || c.CanSubscribe("news.eu.x") || !c.CanSubscribe("alerts.a.b") || !c.CanPublish("chat.x") || c.CanPublish("news.eu") {
		t.Fatalf("claims %+v: want tenant demo, rank 1, channels news.* and alerts.>, publish chat.>", c)
	}
	if left := time.Until(c.ExpiresAt.Time); left < 59*time.Minute || left > time.Hour {
		t.Fatalf("token expires in %v, want --ttl 1h", left)
	}
	if _, err := v.Verify(tok, time.Now().Add(61*time.Minute)); err == nil {
		t.Fatal("the token is still valid after its ttl")
	}
	other, _ := auth.New(auth.Config{Keys: []auth.KeyConfig{{Algorithm: "HS256", Secret: "another-secret-0123456789"}}})
	if _, err := other.Verify(tok, time.Now()); err == nil {
		t.Fatal("a hub with another secret accepts the token")
	}
}

func TestTokenRefusesBadInput(t *testing.T) {
	t.Setenv("CORRAL_SHORT", "short")
	t.Setenv("CORRAL_OK", exampleSecret)
	t.Setenv("CORRAL_EMPTY", "")
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"no --secret-env", []string{"--tenant", "demo"}, "--secret-env is required"},
		{"empty variable", []string{"--secret-env", "CORRAL_EMPTY", "--tenant", "demo"}, "CORRAL_EMPTY is empty"},
		{"short secret", []string{"--secret-env", "CORRAL_SHORT", "--tenant", "demo"}, "at least 16"},
		{"no tenant", []string{"--secret-env", "CORRAL_OK"}, "--tenant"},
		{"bad priority", []string{"--secret-env", "CORRAL_OK", "--tenant", "demo", "--priority", "p7"}, "want p0, p1 or p2"},
		{"bad ttl", []string{"--secret-env", "CORRAL_OK", "--tenant", "demo", "--ttl", "-1s"}, "must be positive"},
		{"bad pattern", []string{"--secret-env", "CORRAL_OK", "--tenant", "demo", "--channels", "news.>.x"}, "must be the last part"},
		{"asymmetric algorithm", []string{"--secret-env", "CORRAL_OK", "--tenant", "demo", "--algorithm", "EdDSA"}, "want HS256"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errOut := corral(t, append([]string{"token"}, tc.args...)...)
			if code == 0 || out != "" || !strings.Contains(errOut, tc.want) {
				t.Fatalf("exit %d, stdout %q, stderr %q: want a failure saying %q", code, out, errOut, tc.want)
			}
		})
	}
}

func TestClientCommandsHaveHelp(t *testing.T) {
	for _, name := range []string{"token", "sub", "pub"} {
		code, out, _ := corral(t, name, "--help")
		if code != 0 || !strings.Contains(out, "Usage:") || !strings.Contains(out, "Examples:") {
			t.Errorf("corral %s --help: exit %d, %q", name, code, out)
		}
	}
}

// TestSubPubJSON subscribes with `corral sub --json --count 2` over gRPC,
// publishes once over HTTP and once over gRPC (P0) with `corral pub`, and
// checks what each prints.
func TestSubPubJSON(t *testing.T) {
	h := startExampleHub(t, "", t.TempDir())
	defer h.stop(t)
	t.Setenv("CORRAL_TOKEN", devToken(t, "--channels", "news.*"))
	sub := start([]string{"sub", "--json", "--count", "2", "grpc://" + h.grpc, "news.eu"})
	testkit.WaitFor(t, 20*time.Second, "sub subscribed", func() bool { return strings.Contains(sub.err.String(), "subscribed to news.eu") || sub.exited() })

	code, out, errOut := corral(t, "pub", "--tenant", "demo", "--api-key", exampleAPIKey, "http://"+h.addr, "news.eu", "hello")
	if code != 0 || !strings.HasPrefix(out, "published news.eu offset 1 (epoch ") {
		t.Fatalf("pub over HTTP: exit %d, %q %q", code, out, errOut)
	}
	t.Setenv("CORRAL_API_KEY", exampleAPIKey)
	code, out, errOut = corral(t, "pub", "--tenant", "demo", "--priority", "p0", "--json", "grpc://"+h.grpc, "news.eu", "breaking")
	var res pubResult
	if code != 0 || json.Unmarshal([]byte(out), &res) != nil || res.Offset != 2 || res.Channel != "news.eu" || res.Epoch == "" {
		t.Fatalf("pub over gRPC: exit %d, %q %q", code, out, errOut)
	}
	if code := sub.wait(t); code != 0 {
		t.Fatalf("sub --count 2: exit %d: %s", code, sub.err.String())
	}
	lines := strings.Split(strings.TrimSpace(sub.stdout.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("sub printed %q, want two JSON lines", sub.stdout.String())
	}
	for i, want := range []subMessage{{Channel: "news.eu", Epoch: res.Epoch, Offset: 1, Priority: "p2", Data: "hello"}, {Channel: "news.eu", Epoch: res.Epoch, Offset: 2, Priority: "p0", Data: "breaking"}} {
		var got subMessage
		if err := json.Unmarshal([]byte(lines[i]), &got); err != nil {
			t.Fatalf("line %q: %v", lines[i], err)
		}
		if _, err := time.Parse(time.RFC3339Nano, got.Time); err != nil {
			t.Errorf("line %q: time: %v", lines[i], err)
		}
		got.Time = ""
		if got.Channel != want.Channel || got.Epoch != want.Epoch || got.Offset != want.Offset || got.Priority != want.Priority || got.Data != want.Data || got.DataBase64 != nil {
			t.Errorf("line %d: %+v, want %+v", i, got, want)
		}
	}
}

// TestSubResumesAcrossHubRestart: `corral sub` prints a message, its hub
// drains and a new one starts on the same address and store; a message
// published there before sub is back comes once, after the first.
func TestSubResumesAcrossHubRestart(t *testing.T) {
	dir := t.TempDir()
	h := startExampleHub(t, "", dir)
	t.Setenv("CORRAL_TOKEN", devToken(t, "--channels", "news.*"))
	t.Setenv("CORRAL_API_KEY", exampleAPIKey)
	sub := start([]string{"sub", "ws://" + h.addr, "news.eu"})
	defer func() {
		sub.cancel()
		if code := sub.wait(t); code != 0 {
			t.Errorf("sub exit %d: %s", code, sub.err.String())
		}
	}()
	testkit.WaitFor(t, 20*time.Second, "sub subscribed", func() bool { return strings.Contains(sub.err.String(), "subscribed to news.eu") || sub.exited() })
	if code, _, errOut := corral(t, "pub", "--tenant", "demo", "http://"+h.addr, "news.eu", "one"); code != 0 {
		t.Fatalf("pub: %s", errOut)
	}
	testkit.WaitFor(t, 20*time.Second, "sub printing the first message", func() bool { return strings.Contains(sub.stdout.String(), "one") })
	h.stop(t)
	h = startExampleHub(t, h.addr, dir)
	defer h.stop(t)
	if code, _, errOut := corral(t, "pub", "--tenant", "demo", "http://"+h.addr, "news.eu", "two"); code != 0 {
		t.Fatalf("pub to the second hub: %s", errOut)
	}
	if code, _, errOut := corral(t, "pub", "--tenant", "demo", "http://"+h.addr, "news.eu", "three"); code != 0 {
		t.Fatalf("pub to the second hub: %s", errOut)
	}
	testkit.WaitFor(t, 30*time.Second, "sub printing the third message", func() bool { return strings.Contains(sub.stdout.String(), "three") || sub.exited() })
	if got, want := sub.stdout.String(), "[news.eu #1] one\n[news.eu #2] two\n[news.eu #3] three\n"; got != want {
		t.Fatalf("sub printed %q, want %q (stderr %s)", got, want, sub.err.String())
	}
	if n := strings.Count(sub.err.String(), "corral: connected to"); n != 2 {
		t.Fatalf("sub connected %d times, want 2: %s", n, sub.err.String())
	}
}

// TestSubAndPubRefusals: a token the hub does not accept ends sub with
// exit 1 after one attempt; a wrong API key fails pub with the hub's
// answer.
func TestSubAndPubRefusals(t *testing.T) {
	h := startExampleHub(t, "", t.TempDir())
	defer h.stop(t)
	t.Setenv("CORRAL_OTHER", "another-secret-0123456789")
	code, tok, _ := corral(t, "token", "--secret-env", "CORRAL_OTHER", "--tenant", "demo")
	if code != 0 {
		t.Fatal("token")
	}
	code, _, errOut := corral(t, "sub", "--token", strings.TrimSpace(tok), "ws://"+h.addr, "news.eu")
	if code != 1 || !strings.Contains(errOut, "1008") {
		t.Fatalf("sub with a forged token: exit %d, %q; want 1 and the 1008 refusal", code, errOut)
	}
	code, _, errOut = corral(t, "pub", "--tenant", "demo", "--api-key", "not-the-key-0123456789", "http://"+h.addr, "news.eu", "x")
	if code != 1 || !strings.Contains(errOut, "HTTP 401") {
		t.Fatalf("pub with a wrong key: exit %d, %q", code, errOut)
	}
	code, _, errOut = corral(t, "pub", "--tenant", "demo", "--api-key", "not-the-key-0123456789", "grpc://"+h.grpc, "news.eu", "x")
	if code != 1 || !strings.Contains(errOut, "1008") {
		t.Fatalf("pub over gRPC with a wrong key: exit %d, %q", code, errOut)
	}
}
