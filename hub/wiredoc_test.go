package hub

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/lxzan/gws"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/corralhq/corral/hub/auth"
	"github.com/corralhq/corral/internal/config"
	"github.com/corralhq/corral/wire"
)

// docSession returns the lines of the example session in wire/README.md:
// the first ```text block after the heading "### JSON frames, for
// browsers", without comments and blank lines.
func docSession(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile("../wire/README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(b), "### JSON frames, for browsers")
	if !ok {
		t.Fatal("wire/README.md has no section \"JSON frames, for browsers\"")
	}
	_, rest, ok = strings.Cut(rest, "```text\n")
	if !ok {
		t.Fatal("the JSON section of wire/README.md has no ```text block")
	}
	block, _, ok := strings.Cut(rest, "```")
	if !ok {
		t.Fatal("the example session block is not closed")
	}
	var lines []string
	for _, l := range strings.Split(block, "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "#") {
			lines = append(lines, l)
		}
	}
	return lines
}

// placeholder matches <name> in a documented line.
var placeholder = regexp.MustCompile(`<(\w+)>`)

// wholePlaceholder is a documented string value that is a placeholder.
var wholePlaceholder = regexp.MustCompile(`^<\w+(#number)?>$`)

// docJSON parses a documented server frame: a quoted "<name>" stands for
// any string, a bare <name> for any number.
func docJSON(t *testing.T, line string) map[string]any {
	t.Helper()
	quoted := regexp.MustCompile(`:<(\w+)>`).ReplaceAllString(line, `:"<$1#number>"`)
	var v map[string]any
	if err := json.Unmarshal([]byte(quoted), &v); err != nil {
		t.Fatalf("documented frame %s is not JSON: %v", line, err)
	}
	return v
}

// matchShape checks that got has exactly the keys of want at every level,
// with the same JSON types, and want's literal values; a "<name>" string
// in want matches any string (a "<name#number>" any number) and records
// it in vars, and must match the value recorded before under that name.
func matchShape(path string, want, got any, vars map[string]string) error {
	if s, ok := want.(string); ok && wholePlaceholder.MatchString(s) {
		name, number := strings.CutSuffix(s[1:len(s)-1], "#number")
		var text string
		switch g := got.(type) {
		case string:
			if number {
				return fmt.Errorf("%s: got the string %q, the README shows a number", path, g)
			}
			text = g
		case float64:
			if !number {
				return fmt.Errorf("%s: got the number %v, the README shows a string", path, g)
			}
			text = fmt.Sprint(g)
		default:
			return fmt.Errorf("%s: got %v, the README shows a placeholder %s", path, got, s)
		}
		if old, ok := vars[name]; ok && old != text {
			return fmt.Errorf("%s: got %q, the README uses <%s> for %q before", path, text, name, old)
		}
		vars[name] = text
		return nil
	}
	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			return fmt.Errorf("%s: got %v, the README shows an object", path, got)
		}
		for k := range g {
			if _, ok := w[k]; !ok {
				return fmt.Errorf("%s: the server sends the key %q, the README does not show it", path, k)
			}
		}
		for k, wv := range w {
			gv, ok := g[k]
			if !ok {
				return fmt.Errorf("%s: the README shows the key %q, the server does not send it", path, k)
			}
			if err := matchShape(path+"."+k, wv, gv, vars); err != nil {
				return err
			}
		}
		return nil
	case []any:
		g, ok := got.([]any)
		if !ok || len(g) != len(w) {
			return fmt.Errorf("%s: got %v, the README shows %v", path, got, want)
		}
		for i := range w {
			if err := matchShape(fmt.Sprintf("%s[%d]", path, i), w[i], g[i], vars); err != nil {
				return err
			}
		}
		return nil
	}
	if jsonType(want) != jsonType(got) || want != got {
		return fmt.Errorf("%s: got the %s %v, the README shows the %s %v", path, jsonType(got), got, jsonType(want), want)
	}
	return nil
}

func jsonType(v any) string {
	switch v.(type) {
	case string:
		return "string"
	case float64:
		return "number"
	case bool:
		return "boolean"
	case nil:
		return "null"
	}
	return "value"
}

// TestWireREADMESession runs the example session of wire/README.md, line
// by line, against a hub started from examples/hub.yaml, over a
// WebSocket with the corral.v1.json subprotocol: the client lines are
// sent as written (placeholders filled from what the server sent), every
// server frame must have the documented keys, types and literal values,
// and the close must be the documented one.
func TestWireREADMESession(t *testing.T) {
	lines := docSession(t)
	cfg := DefaultConfig()
	if err := config.Load("../examples/hub.yaml", &cfg, config.Options{}); err != nil {
		t.Fatal(err)
	}
	cfg.Listen, cfg.GRPCListen, cfg.Admin.Addr, cfg.NATS.StoreDir = "127.0.0.1:0", "127.0.0.1:0", "", t.TempDir()
	h, err := New(cfg, Options{Registerer: prometheus.NewRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	th := &testHub{Hub: h, errc: make(chan error, 1)}
	go func() { th.errc <- h.Run(context.Background()) }()
	<-h.Started()
	if err := h.Ready(); err != nil {
		t.Fatalf("hub not ready: %v", err)
	}
	t.Cleanup(func() { th.stop(t) })

	p := 1
	tok, err := jwt.NewWithClaims(jwt.SigningMethodHS256, auth.Claims{
		Tenant: "demo", Channels: []string{"news", "sport"}, Publish: []string{"chat.>"}, MaxPriority: &p,
		RegisteredClaims: jwt.RegisteredClaims{ExpiresAt: jwt.NewNumericDate(time.Now().Add(time.Hour))},
	}).SignedString([]byte(cfg.Auth.Keys[0].Secret))
	if err != nil {
		t.Fatal(err)
	}
	vars := map[string]string{"TOKEN": tok}
	fill := func(s string) string {
		return placeholder.ReplaceAllStringFunc(s, func(m string) string {
			if v, ok := vars[m[1:len(m)-1]]; ok {
				return v
			}
			t.Fatalf("%s uses %s before the server sent it", s, m)
			return m
		})
	}
	r := dialRaw(t, th, wire.SubprotocolJSON)
	drained := make(chan error, 1)
	for _, line := range lines {
		switch {
		case strings.HasPrefix(line, "C: "):
			if err := r.c.WriteMessage(gws.OpcodeText, []byte(fill(line[3:]))); err != nil {
				t.Fatalf("sending %s: %v", line, err)
			}
		case strings.HasPrefix(line, "POST /v1/publish "):
			req, _ := http.NewRequest("POST", "http://"+h.Addr().String()+"/v1/publish", strings.NewReader(line[len("POST /v1/publish "):]))
			req.Header.Set("Authorization", "Bearer "+cfg.Auth.APIKeys[0].Key)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("%s: HTTP %d", line, resp.StatusCode)
			}
		case line == "SIGTERM":
			go func() {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				drained <- h.Shutdown(ctx)
			}()
		case strings.HasPrefix(line, "S: close "):
			want := fill(line[len("S: close "):])
			code := r.waitClose(t)
			r.mu.Lock()
			got := fmt.Sprintf("%d %q", code, r.reason)
			r.mu.Unlock()
			if got != want {
				t.Fatalf("the hub closed with %s, the README says %s", got, want)
			}
		case strings.HasPrefix(line, "S: "):
			want := docJSON(t, line[3:])
			var b []byte
			select {
			case b = <-r.frames:
			case <-time.After(10 * time.Second):
				t.Fatalf("no frame from the hub, the README shows %s", line)
			}
			var got map[string]any
			if err := json.Unmarshal(b, &got); err != nil {
				t.Fatalf("the hub sent %s: not JSON: %v", b, err)
			}
			if err := matchShape("frame", want, got, vars); err != nil {
				t.Fatalf("the hub sent %s\nthe README shows %s\n%v", b, line[3:], err)
			}
		default:
			t.Fatalf("wire/README.md example: unknown line %q (want C:, S:, POST or SIGTERM)", line)
		}
	}
	select {
	case b := <-r.frames:
		t.Fatalf("the hub sent %s after the documented session", bytes.TrimSpace(b))
	default:
	}
	if err := <-drained; err != nil {
		t.Fatalf("drain: %v", err)
	}
}
