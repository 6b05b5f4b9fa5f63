package main

import (
	"bytes"
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestHubValidateExample(t *testing.T) {
	code, out, errOut := corral(t, "hub", "validate", "--config", "../../examples/hub.yaml")
	if code != 0 || !strings.Contains(out, "ok") {
		t.Fatalf("examples/hub.yaml: exit %d, %s %s", code, out, errOut)
	}
}

func TestHubValidateNamesFileLineKey(t *testing.T) {
	p := filepath.Join(t.TempDir(), "hub.yaml")
	body := "listen: 127.0.0.1:0\nhistory:\n  window: 10ms\n"
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, errOut := corral(t, "hub", "validate", "--config", p)
	if code == 0 || !strings.Contains(errOut, p+":3:") || !strings.Contains(errOut, "history.window") {
		t.Fatalf("exit %d, stderr %q: want the file, line 3 and the key", code, errOut)
	}
}

// TestHubServesExample runs `corral hub` on the shipped example (ports and
// store moved by flags and environment) and publishes through the HTTP API
// with the example's API key, as the example's header tells users to.
func TestHubServesExample(t *testing.T) {
	addr := "127.0.0.1:" + freePort(t)
	t.Setenv("CORRAL_HUB_GRPC_LISTEN", "127.0.0.1:0")
	t.Setenv("CORRAL_HUB_NATS_STORE_DIR", t.TempDir())
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	var out, errb bytes.Buffer
	go func() {
		done <- run(ctx, []string{"hub", "--config", "../../examples/hub.yaml", "--listen", addr, "--admin", "127.0.0.1:0", "--log-format", "json"}, &out, &errb)
	}()
	defer func() {
		cancel()
		if code := <-done; code != 0 {
			t.Errorf("corral hub exit %d: %s", code, errb.String())
		}
	}()
	deadline := time.Now().Add(20 * time.Second)
	for {
		req, _ := http.NewRequest("POST", "http://"+addr+"/v1/publish", strings.NewReader(`{"tenant":"demo","channel":"news","data":"hello"}`))
		req.Header.Set("Authorization", "Bearer dev-api-key-change-me")
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode != 200 {
				t.Fatalf("publish: HTTP %d", resp.StatusCode)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("hub never answered: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
