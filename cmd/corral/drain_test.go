package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/corralhq/corral/client"
	"github.com/corralhq/corral/hub/auth"
	"github.com/corralhq/corral/internal/testkit"
)

// TestHubDrainKeepsAdminUp runs `corral hub`, opens six sessions and stops
// the process: while the hub drains them (two GoAways per second, so for
// about 2.5 s) /readyz answers 503 and /metrics answers and still counts
// open sessions; once the process has stopped, the admin listener is down.
func TestHubDrainKeepsAdminUp(t *testing.T) {
	const secret = "drain-test-secret-0123456789"
	addr, adm := "127.0.0.1:"+freePort(t), "127.0.0.1:"+freePort(t)
	p := filepath.Join(t.TempDir(), "hub.yaml")
	cfg := fmt.Sprintf("listen: %s\ngrpc_listen: \"\"\nadmin: {addr: %q}\nhistory: {store: memory}\n"+
		"auth:\n  keys: [{algorithm: HS256, secret: %s}]\ndrain: {rate: 2, deadline: 60s}\n", addr, adm, secret)
	if err := os.WriteFile(p, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan int, 1)
	var out, errb testkit.SyncBuffer
	go func() { done <- run(ctx, []string{"hub", "--config", p}, &out, &errb) }()

	get := func(path string) (int, string, error) {
		resp, err := http.Get("http://" + adm + path)
		if err != nil {
			return 0, "", err
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b), nil
	}
	testkit.WaitFor(t, 20*time.Second, "the hub ready", func() bool {
		code, _, err := get("/readyz")
		return err == nil && code == 200
	})
	tok, err := jwt.NewWithClaims(jwt.SigningMethodHS256, auth.Claims{
		Tenant: "acme", Channels: []string{">"},
		RegisteredClaims: jwt.RegisteredClaims{ExpiresAt: jwt.NewNumericDate(time.Now().Add(time.Hour))},
	}).SignedString([]byte(secret))
	if err != nil {
		t.Fatal(err)
	}
	for range 6 {
		dctx, dcancel := context.WithTimeout(ctx, 10*time.Second)
		c, err := client.Dial(dctx, client.Config{Addrs: []string{"ws://" + addr + "/v1/ws"}, Token: tok})
		dcancel()
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
	}

	cancel() // SIGTERM
	testkit.WaitFor(t, 20*time.Second, "/readyz answering 503 during the drain", func() bool {
		code, _, err := get("/readyz")
		if err != nil {
			t.Fatalf("/readyz during the drain: %v (the admin listener stopped first)", err)
		}
		return code == http.StatusServiceUnavailable
	})
	code, body, err := get("/metrics")
	if err != nil || code != 200 {
		t.Fatalf("/metrics during the drain: %d, %v", code, err)
	}
	open := 0.0
	for _, m := range regexp.MustCompile(`(?m)^corral_hub_sessions\{[^}]*\} (\S+)$`).FindAllStringSubmatch(body, -1) {
		v, _ := strconv.ParseFloat(m[1], 64)
		open += v
	}
	if open == 0 {
		t.Fatalf("/metrics shows no open session: the drain was over before /readyz failed\n%s", body)
	}

	select {
	case code := <-done:
		if code != 0 {
			t.Fatalf("corral hub exit %d: %s", code, errb.String())
		}
	case <-time.After(60 * time.Second):
		t.Fatal("corral hub did not stop")
	}
	if c, err := net.DialTimeout("tcp", adm, time.Second); err == nil {
		c.Close()
		t.Fatal("the admin listener still accepts after the hub stopped")
	}
}
