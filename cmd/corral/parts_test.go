package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/corralhq/corral/hub/auth"
	"github.com/corralhq/corral/internal/admin"
	"github.com/corralhq/corral/internal/lifecycle"
	"github.com/corralhq/corral/internal/testkit"
)

// runParts runs a server and its admin listener as the subcommand does
// (serveWithAdmin) until the test ends, and waits for the admin listener
// to answer /readyz with 200.
func runParts(t *testing.T, name string, srv lifecycle.Part, adm *admin.Server) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- serveWithAdmin(ctx, nil, 30*time.Second, adm, lifecycle.Named{Name: name, Part: srv}) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("%s: %v", name, err)
		}
	})
	<-adm.Started()
	if adm.Addr() == nil {
		t.Fatalf("%s: the admin listener did not start", name)
	}
	base := "http://" + adm.Addr().String()
	testkit.WaitFor(t, 30*time.Second, name+" ready", func() bool {
		code, _ := httpGet(base + "/readyz")
		return code == 200
	})
	return base
}

// httpGet returns the status code and body of a GET, 0 on a failed request.
func httpGet(url string) (int, string) {
	resp, err := http.Get(url)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// getJSON decodes the JSON at url into v, failing the test otherwise.
func getJSON(t *testing.T, url string, v any) {
	t.Helper()
	code, body := httpGet(url)
	if code != 200 {
		t.Fatalf("GET %s: %d %s", url, code, body)
	}
	if err := json.Unmarshal([]byte(body), v); err != nil {
		t.Fatalf("GET %s: %v: %s", url, err, body)
	}
}

// sessionToken is a session token for tenant demo signed with secret (HS256).
func sessionToken(t *testing.T, secret string) string {
	t.Helper()
	p0 := 0
	tok, err := jwt.NewWithClaims(jwt.SigningMethodHS256, auth.Claims{
		Tenant: "demo", Channels: []string{"news.>"}, Publish: []string{"news.>"}, MaxPriority: &p0,
		RegisteredClaims: jwt.RegisteredClaims{ExpiresAt: jwt.NewNumericDate(time.Now().Add(time.Hour))},
	}).SignedString([]byte(secret))
	if err != nil {
		t.Fatal(err)
	}
	return tok
}
