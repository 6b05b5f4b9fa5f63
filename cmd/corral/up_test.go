package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/corralhq/corral/internal/browser"
	"github.com/corralhq/corral/internal/testkit"
)

// artifactsDir is where a screenshot goes: $CORRAL_ARTIFACTS, or the
// test's temporary folder.
func artifactsDir(t *testing.T) string {
	if d := os.Getenv("CORRAL_ARTIFACTS"); d != "" {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		return d
	}
	return t.TempDir()
}

// evalInt evaluates a JavaScript expression of the page to a number.
func evalInt(t *testing.T, p *browser.Page, js string) int64 {
	t.Helper()
	var v float64
	p.Eval(t, js, &v)
	return int64(v)
}

// upRun is a `corral up` child process and what it printed.
type upRun struct {
	proc      *corralProc
	dashboard string   // http://host:port/ (the dashboard is at /dashboard)
	dns       string   // host:port
	listening []string // every TCP address it printed
}

// startUp runs `corral up` on free ports as a child process (the test
// binary re-run, as the cluster tests do) and waits, within a bound, for
// its "ready" line.
func startUp(t *testing.T, args ...string) *upRun {
	t.Helper()
	if testing.Short() {
		t.Skip("starts a whole fabric")
	}
	all := append([]string{"up", "--listen", "127.0.0.1:0", "--dns", "127.0.0.1:0", "--dns-admin", "127.0.0.1:0", "--hub-ws-port", "0", "--hub-grpc-port", "0",
		"--edge-ws-port", "0", "--edge-grpc-port", "0", "--admin-port", "0", "--log-format", "json"}, args...)
	p := startCorral(t, "up", all...)
	testkit.WaitFor(t, 120*time.Second, "corral up: ready", func() bool {
		if p.exited() {
			t.Fatalf("corral up exited: %v\n%s", p.err, p.log.String())
		}
		return strings.Contains(p.log.String(), "corral up: ready\n")
	})
	u := &upRun{proc: p}
	out := p.log.String()
	if m := regexp.MustCompile(`dashboard +(http://\S+/)dashboard`).FindStringSubmatch(out); m != nil {
		u.dashboard = m[1]
	}
	if m := regexp.MustCompile(`dns +(\S+): dig`).FindStringSubmatch(out); m != nil {
		u.dns = m[1]
	}
	for _, m := range regexp.MustCompile(`(?:ws|grpc|http)://(127\.[0-9.]+:[0-9]+)`).FindAllStringSubmatch(out, -1) {
		if !slices.Contains(u.listening, m[1]) {
			u.listening = append(u.listening, m[1])
		}
	}
	if u.dashboard == "" || u.dns == "" || len(u.listening) < 3+2*2+6 {
		t.Fatalf("corral up printed no dashboard, DNS or part addresses (%d):\n%s", len(u.listening), out)
	}
	return u
}

// line returns the printed line that starts (after spaces) with prefix.
func (u *upRun) line(t *testing.T, prefix string) string {
	t.Helper()
	for _, l := range strings.Split(u.proc.log.String(), "\n") {
		if l = strings.TrimSpace(l); strings.HasPrefix(l, prefix) {
			return l
		}
	}
	t.Fatalf("corral up printed no line %q:\n%s", prefix, u.proc.log.String())
	return ""
}

// call sends method path with body to the dashboard's API and decodes
// the JSON answer into v (when v is not nil).
func (u *upRun) call(t *testing.T, method, path, body string, v any) int {
	t.Helper()
	req, err := http.NewRequest(method, strings.TrimSuffix(u.dashboard, "/")+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := (&http.Client{Timeout: 30 * time.Second}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if v != nil {
		if err := json.Unmarshal(b, v); err != nil {
			t.Fatalf("%s %s: %d %q is not JSON: %v", method, path, resp.StatusCode, b, err)
		}
	}
	return resp.StatusCode
}

// upStateView is the part of /api/state the tests read.
type upStateView struct {
	Policy string `json:"policy"`
	Hubs   []struct {
		Name, State string
		Sessions    int64
	} `json:"hubs"`
	Edges []struct {
		Name     string
		Sessions int64
	} `json:"edges"`
	Storm *StormView `json:"storm"`
}

func (u *upRun) state(t *testing.T) upStateView {
	t.Helper()
	var s upStateView
	if code := u.call(t, "GET", "/api/state", "", &s); code != 200 {
		t.Fatalf("GET /api/state: %d", code)
	}
	return s
}

// dig asks the fleet's DNS for the origin name with dig and returns the
// addresses, sorted.
func (u *upRun) dig(t *testing.T) []string {
	t.Helper()
	path, err := exec.LookPath("dig")
	if err != nil {
		t.Fatal("dig is not installed (scripts/test.sh installs bind9-dnsutils)")
	}
	host, port, _ := net.SplitHostPort(u.dns)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, path, "@"+host, "-p", port, "+time=2", "+tries=2", "+short", "origin.corral.test", "A").CombinedOutput()
	if err != nil {
		t.Fatalf("dig: %v\n%s", err, out)
	}
	ips := strings.Fields(string(out))
	slices.Sort(ips)
	return ips
}

// TestUp runs `corral up` as a process: every part ready within the
// bound, the printed corral sub / corral pub pair works against it, the
// control API refuses bad input with a 4xx and changes nothing, a policy
// switch changes what dig gets, the dashboard in headless Chromium shows
// the 3 hubs and 2 edges without a console error and its sessions chart
// rises as a storm connects 1,000 sessions, and SIGINT ends it with every
// port it listened on free again.
func TestUp(t *testing.T) {
	browser.Need(t)
	// Without admission: under the race detector the handshakes are slow
	// enough for the edges' adaptive limits to refuse most of the storm
	// and hold it back for minutes (TestPauseHubHoldsHandshakes and the
	// overload tests of fleet cover admission).
	u := startUp(t, "--admission=false")

	t.Run("printed example", func(t *testing.T) {
		tok := strings.TrimPrefix(u.line(t, "export CORRAL_TOKEN="), "export CORRAL_TOKEN=")
		t.Setenv("CORRAL_TOKEN", tok)
		sub := strings.Fields(u.line(t, "corral sub "))[1:]
		pub := strings.Fields(u.line(t, "corral pub "))[1:]
		s := start(sub)
		defer func() { s.cancel(); s.wait(t) }()
		testkit.WaitFor(t, 30*time.Second, "corral sub subscribed", func() bool {
			return strings.Contains(s.err.String(), "subscribed to news.eu")
		})
		code, out, errOut := corral(t, pub...)
		if code != 0 || !strings.HasPrefix(out, "published news.eu offset 1 ") {
			t.Fatalf("corral %s: code %d, out %q, err %q", strings.Join(pub, " "), code, out, errOut)
		}
		testkit.WaitFor(t, 30*time.Second, "corral sub printed the message", func() bool {
			return strings.Contains(s.stdout.String(), "[news.eu #1] hello\n")
		})
	})

	t.Run("controls refuse bad input", func(t *testing.T) {
		before := u.state(t)
		bad := []struct {
			name, method, path, body string
			code                     int
		}{
			{"unknown policy", "POST", "/api/policy", `{"policy": "fastest"}`, 400},
			{"policy not a string", "POST", "/api/policy", `{"policy": 3}`, 400},
			{"no policy", "POST", "/api/policy", `{}`, 400},
			{"policy not JSON", "POST", "/api/policy", `weighted`, 400},
			{"policy unknown field", "POST", "/api/policy", `{"policy": "weighted", "ttl": 1}`, 400},
			{"policy two values", "POST", "/api/policy", `{"policy": "weighted"} {"policy": "weighted"}`, 400},
			{"hub 0", "POST", "/api/hubs/0/kill", ``, 404},
			{"hub 4 of 3", "POST", "/api/hubs/4/pause", ``, 404},
			{"hub not a number", "POST", "/api/hubs/one/kill", ``, 404},
			{"unknown hub action", "POST", "/api/hubs/1/explode", ``, 404},
			{"resume a running hub", "POST", "/api/hubs/1/resume", ``, 409},
			{"drop 0 %", "POST", "/api/drop", `{"percent": 0}`, 400},
			{"drop 101 %", "POST", "/api/drop", `{"percent": 101}`, 400},
			{"drop not a number", "POST", "/api/drop", `{"percent": "ten"}`, 400},
			{"drop without percent", "POST", "/api/drop", `{"share": 0.5}`, 400},
			{"storm without scenario", "POST", "/api/storm", `{}`, 400},
			{"storm of a missing file", "POST", "/api/storm", `{"scenario": "no-such.yaml"}`, 400},
			{"stop without a storm", "DELETE", "/api/storm", ``, 409},
			{"unknown API", "POST", "/api/reboot", `{}`, 404},
		}
		for _, tc := range bad {
			var e struct{ Error string }
			if code := u.call(t, tc.method, tc.path, tc.body, &e); code != tc.code || e.Error == "" {
				t.Errorf("%s: %s %s %s: %d %q, want %d and an error", tc.name, tc.method, tc.path, tc.body, code, e.Error, tc.code)
			}
		}
		after := u.state(t)
		if after.Policy != before.Policy || after.Storm != nil {
			t.Errorf("policy %s -> %s, storm %v: bad input changed the fleet", before.Policy, after.Policy, after.Storm)
		}
		for i, h := range after.Hubs {
			if h.State != "up" || h.State != before.Hubs[i].State {
				t.Errorf("%s is %s after bad input", h.Name, h.State)
			}
		}
		if got := u.dig(t); len(got) != 3 {
			t.Errorf("dig after bad input: %v, want the 3 hubs", got)
		}
	})

	t.Run("policy switch changes dig", func(t *testing.T) {
		want := []string{"127.0.1.1", "127.0.1.2", "127.0.1.3"}
		if got := u.dig(t); !slices.Equal(got, want) {
			t.Fatalf("multivalue: dig gets %v, want %v", got, want)
		}
		var r struct{ Policy string }
		if code := u.call(t, "POST", "/api/policy", `{"policy": "weighted"}`, &r); code != 200 || r.Policy != "weighted" {
			t.Fatalf("switch to weighted: %d %+v", code, r)
		}
		if got := u.dig(t); len(got) != 1 || !slices.Contains(want, got[0]) {
			t.Errorf("weighted: dig gets %v, want one of %v", got, want)
		}
		if code := u.call(t, "POST", "/api/policy", `{"policy": "multivalue"}`, &r); code != 200 {
			t.Fatalf("switch back: %d", code)
		}
		if got := u.dig(t); !slices.Equal(got, want) {
			t.Errorf("multivalue again: dig gets %v, want %v", got, want)
		}
	})

	t.Run("dashboard and storm", func(t *testing.T) {
		page := browser.Open(t, u.dashboard+"dashboard")
		page.WaitLoaded(t)
		testkit.WaitFor(t, 60*time.Second, "the dashboard's first events", func() bool {
			return evalInt(t, page, "window.corralDash ? window.corralDash.events : 0") >= 2
		})
		if h, e := evalInt(t, page, "document.querySelectorAll('tr.node.hub').length"), evalInt(t, page, "document.querySelectorAll('tr.node.edge').length"); h != 3 || e != 2 {
			t.Errorf("the dashboard shows %d hubs and %d edges, want 3 and 2", h, e)
		}
		if n := evalInt(t, page, "document.querySelectorAll('figure.corral-chart canvas').length"); n < 7 {
			t.Errorf("%d charts drawn, want 7", n)
		}
		// The sessions chart's last point, summed over the edges' series
		// (after the 3 hubs').
		edgeSessions := "(() => { const d = window.corralDash.charts.sessions.plot.data; const last = d[0].length - 1; return d[4][last] + d[5][last]; })()"
		before := evalInt(t, page, edgeSessions)
		var v StormView
		if code := u.call(t, "POST", "/api/storm", `{"scenario": "testdata/up-storm.yaml"}`, &v); code != 200 || v.Devices != 1000 {
			t.Fatalf("start the storm: %d %+v", code, v)
		}
		var e struct{ Error string }
		if code := u.call(t, "POST", "/api/storm", `{"scenario": "testdata/up-storm.yaml"}`, &e); code != 409 {
			t.Errorf("a second storm: %d %q, want 409", code, e.Error)
		}
		var last upStateView
		lastLog := time.Now()
		defer func() {
			if t.Failed() && last.Storm != nil {
				t.Logf("last state: storm %+v, edges %+v", *last.Storm, last.Edges)
			}
		}()
		testkit.WaitFor(t, 180*time.Second, "1,000 sessions held", func() bool {
			last = u.state(t)
			n := int64(0)
			for _, e := range last.Edges {
				n += e.Sessions
			}
			if time.Since(lastLog) > 10*time.Second && last.Storm != nil {
				t.Logf("storm: %v, %d sessions at the edges", *last.Storm, n)
				lastLog = time.Now()
			}
			return last.Storm != nil && last.Storm.Held == 1000 && n >= 1000
		})
		testkit.WaitFor(t, 30*time.Second, "the sessions chart at 1,000", func() bool {
			return evalInt(t, page, edgeSessions) >= before+1000
		})
		page.Screenshot(t, filepath.Join(artifactsDir(t), "corral-up-dashboard.png"))
		if errs := page.Errors(); len(errs) > 0 {
			t.Errorf("console errors: %q", errs)
		}
		if code := u.call(t, "DELETE", "/api/storm", "", nil); code != 200 {
			t.Fatalf("stop the storm: %d", code)
		}
		testkit.WaitFor(t, 60*time.Second, "the storm ended", func() bool {
			s := u.state(t)
			return s.Storm != nil && !s.Storm.Running
		})
		// The terminal says so too, with kraken's reason.
		testkit.WaitFor(t, 10*time.Second, "the storm's end logged", func() bool {
			return strings.Contains(u.proc.log.String(), `"msg":"storm ended","scenario":"up-storm","stopped":"context"`)
		})
	})

	t.Run("SIGINT frees everything", func(t *testing.T) {
		if err := u.proc.cmd.Process.Signal(os.Interrupt); err != nil {
			t.Fatal(err)
		}
		select {
		case <-u.proc.done:
		case <-time.After(60 * time.Second):
			t.Fatalf("corral up did not exit on SIGINT:\n%s", u.proc.log.String())
		}
		if u.proc.err != nil || !strings.Contains(u.proc.log.String(), "corral up: stopped\n") {
			t.Fatalf("exit %v, log:\n%s", u.proc.err, u.proc.log.String())
		}
		if _, err := os.Stat(filepath.Join("/proc", fmt.Sprint(u.proc.cmd.Process.Pid))); err == nil {
			t.Errorf("process %d still there", u.proc.cmd.Process.Pid)
		}
		for _, addr := range append(u.listening, strings.TrimPrefix(strings.TrimSuffix(u.dashboard, "/"), "http://")) {
			l, err := net.Listen("tcp", addr)
			if err != nil {
				t.Errorf("%s still taken after exit: %v", addr, err)
				continue
			}
			l.Close()
		}
		pc, err := net.ListenPacket("udp", u.dns)
		if err != nil {
			t.Errorf("DNS %s (UDP) still taken after exit: %v", u.dns, err)
		} else {
			pc.Close()
		}
	})
}
