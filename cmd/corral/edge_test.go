package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/corralhq/corral/client"
	"github.com/corralhq/corral/hub/auth"
)

func TestEdgeValidateExample(t *testing.T) {
	code, out, errOut := corral(t, "edge", "validate", "--config", "../../examples/edge.yaml")
	if code != 0 || !strings.Contains(out, "ok") {
		t.Fatalf("examples/edge.yaml: exit %d, %s %s", code, out, errOut)
	}
}

func TestEdgeValidateNamesFileLineKey(t *testing.T) {
	p := filepath.Join(t.TempDir(), "edge.yaml")
	body := "origins:\n  static: [127.0.0.1:7401]\nrelay:\n  key: dev-relay-key-change-me\nsession:\n  outbound_bytes: 10\n"
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, errOut := corral(t, "edge", "validate", "--config", p)
	if code == 0 || !strings.Contains(errOut, p+":6:") || !strings.Contains(errOut, "session.outbound_bytes") {
		t.Fatalf("exit %d, stderr %q: want the file, line 6 and the key", code, errOut)
	}
}

// TestEdgeServesExample runs `corral hub` on examples/hub.yaml and
// `corral edge` on examples/edge.yaml (ports moved), and a device on the
// edge's WebSocket subscribes and gets a message published through it
// and one sent by `corral pub` to the edge's gRPC publish API,
// with the examples' development secret; the edge's admin listener
// answers /readyz and /metrics.
func TestEdgeServesExample(t *testing.T) {
	hubGRPC := "127.0.0.1:" + freePort(t)
	t.Setenv("CORRAL_HUB_GRPC_LISTEN", hubGRPC)
	t.Setenv("CORRAL_HUB_NATS_STORE_DIR", t.TempDir())
	example, err := os.ReadFile("../../examples/edge.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(example, []byte(`static: ["127.0.0.1:7401"]`)) {
		t.Fatal("examples/edge.yaml does not point at examples/hub.yaml's gRPC address")
	}
	edgeCfg := filepath.Join(t.TempDir(), "edge.yaml")
	if err := os.WriteFile(edgeCfg, bytes.Replace(example, []byte("127.0.0.1:7401"), []byte(hubGRPC), 1), 0o644); err != nil {
		t.Fatal(err)
	}
	edgeGRPC := "127.0.0.1:" + freePort(t)
	t.Setenv("CORRAL_EDGE_GRPC_LISTEN", edgeGRPC)
	edgeAddr, edgeAdmin := "127.0.0.1:"+freePort(t), "127.0.0.1:"+freePort(t)

	// The hub runs as `corral hub --config examples/hub.yaml` in a process
	// of its own (this test binary, TestEdgeHubProcess): nbio's logger is
	// one per process, and each command sets it for the one server it runs.
	hubCmd := exec.Command(os.Args[0], "-test.run=^TestEdgeHubProcess$")
	hubCmd.Env = append(os.Environ(), "CORRAL_TEST_HUB_PROCESS=1")
	var hubErr bytes.Buffer
	hubCmd.Stderr = &hubErr
	if err := hubCmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = hubCmd.Process.Signal(syscall.SIGTERM)
		if err := hubCmd.Wait(); err != nil {
			t.Errorf("corral hub: %v: %s", err, hubErr.String())
		}
	}()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	var edgeErr bytes.Buffer
	go func() {
		done <- run(ctx, []string{"edge", "--config", edgeCfg, "--listen", edgeAddr, "--admin", edgeAdmin, "--log-format", "json"}, io.Discard, &edgeErr)
	}()
	defer func() {
		cancel()
		if code := <-done; code != 0 {
			t.Errorf("corral edge exit %d: %s", code, edgeErr.String())
		}
	}()
	p0 := 0
	tok, _ := jwt.NewWithClaims(jwt.SigningMethodHS256, auth.Claims{
		Tenant: "demo", Channels: []string{"news.>"}, Publish: []string{"news.>"}, MaxPriority: &p0,
		RegisteredClaims: jwt.RegisteredClaims{ExpiresAt: jwt.NewNumericDate(time.Now().Add(time.Hour))},
	}).SignedString([]byte("dev-secret-change-me-0123456789"))
	var c *client.Client
	deadline := time.Now().Add(30 * time.Second)
	for {
		dctx, dcancel := context.WithTimeout(ctx, 2*time.Second)
		c, err = client.Dial(dctx, client.Config{Addrs: []string{"ws://" + edgeAddr + "/v1/ws"}, Token: tok})
		dcancel()
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no session through the edge: %v\nedge: %s", err, edgeErr.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	defer c.Close()
	rctx, rcancel := context.WithTimeout(ctx, 10*time.Second)
	defer rcancel()
	if _, err := c.Subscribe(rctx, "news.eu"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Publish(rctx, "news.eu", client.PriorityP0, []byte("through the edge"), ""); err != nil {
		t.Fatal(err)
	}
	for e := range c.Events() {
		if e.Kind == client.EventMessage {
			if string(e.Message.GetData()) != "through the edge" {
				t.Fatalf("message %q", e.Message.GetData())
			}
			break
		}
	}
	// A backend publishes through the edge with `corral pub` over gRPC.
	var pubOut, pubErr bytes.Buffer
	if code := run(rctx, []string{"pub", "--tenant", "demo", "--api-key", "dev-api-key-change-me", "grpc://" + edgeGRPC, "news.eu", "pub via the edge"}, &pubOut, &pubErr); code != 0 {
		t.Fatalf("corral pub through the edge: exit %d: %s", code, pubErr.String())
	}
	for e := range c.Events() {
		if e.Kind == client.EventMessage {
			if string(e.Message.GetData()) != "pub via the edge" {
				t.Fatalf("message %q, want the one corral pub sent through the edge", e.Message.GetData())
			}
			break
		}
	}
	for path, want := range map[string]string{"/readyz": "", "/metrics": "corral_edge_sessions{transport=\"ws\"} 1"} {
		resp, err := http.Get("http://" + edgeAdmin + path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !strings.Contains(string(body), want) {
			t.Errorf("%s: %d, want 200 with %q", path, resp.StatusCode, want)
		}
	}
}

// TestEdgeHubProcess is the hub process of TestEdgeServesExample: `corral
// hub --config examples/hub.yaml` until SIGTERM. Run alone it does nothing.
func TestEdgeHubProcess(t *testing.T) {
	if os.Getenv("CORRAL_TEST_HUB_PROCESS") == "" {
		return
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	os.Exit(run(ctx, []string{"hub", "--config", "../../examples/hub.yaml", "--listen", "127.0.0.1:0", "--admin", "127.0.0.1:0", "--log-format", "json"}, io.Discard, os.Stderr))
}
