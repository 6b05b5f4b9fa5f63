package kraken

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/corralhq/corral/hub"
	"github.com/corralhq/corral/internal/testkit"
)

const faultsRefused = `
name: faults
duration: 10s
population: {devices: 10, protocol: websocket}
dns: {policy: multivalue}
origins: [{name: a, region: east, headroom: 2, max_new_per_second: 100}, {name: b, region: west, headroom: 2, max_new_per_second: 100}]
traffic:
  kill:
    - {at: 1s, signal: stop, for: 1s}
  unhealthy:
    - {at: 2s}
  move:
    - {at: 3s, from: east, to: west}
  disconnects:
    - {at: 4s, share: 0.5, region: east}
`

// TestFaultsRefusedWithoutTheirMeans: a kill without Config.Kill, an
// unhealthy storm without Config.Unhealthy, a move or a region's drop
// without targets per region are refused by New with their lines; with
// the means given but too few origins (Config.Origins), or a region with
// no targets, too.
func TestFaultsRefusedWithoutTheirMeans(t *testing.T) {
	sc := loadScenario(t, "faults.yaml", faultsRefused)
	cfg := Config{Targets: []string{"ws://127.0.0.1:1"}, Token: testToken(testSecret)}
	_, err := New(sc, cfg)
	for _, want := range []string{
		"faults.yaml:8:7: traffic.kill[0]: the target has no way to signal its processes",
		"faults.yaml:10:7: traffic.unhealthy[0]: the target has no way to mark an origin unhealthy",
		"faults.yaml:12:7: traffic.move[0]: the run has no targets per region",
		"faults.yaml:14:28: traffic.disconnects[0].region: the run has no targets per region",
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("New = %v, want an error with %q", err, want)
		}
	}
	nop := func() error { return nil }
	cfg.Kill = func(context.Context, KillRequest) (func() error, error) { return nop, nil }
	cfg.Unhealthy = func(context.Context, int) (func() error, error) { return nop, nil }
	cfg.Regions = map[string][]string{"east": {"ws://127.0.0.1:1"}, "north": {"ws://127.0.0.1:2"}}
	cfg.Origins = 1
	two := loadScenario(t, "two.yaml", strings.Replace(faultsRefused, "{at: 2s}", "{at: 2s, origins: 2}", 1))
	_, err = New(two, cfg)
	for _, want := range []string{
		"two.yaml:10:16: traffic.unhealthy[0].origins: 2 origins, the run can act on 1",
		`two.yaml:5:84: origins[1].region: region "west" has no targets in the run`,
		`origins: the run has targets for region "north", which no origin group is in`,
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("New = %v, want an error with %q", err, want)
		}
	}
	if err != nil && strings.Contains(err.Error(), "traffic.kill") {
		t.Errorf("a kill refused although Config.Kill is set: %v", err)
	}
}

// TestProcessesSignalAndUnhealthy: Processes on real child processes
// freezes (SIGSTOP: state T), thaws (SIGCONT), kills (SIGKILL) and drains
// (SIGTERM) the next origins in order, reading a pid file when it acts; a
// primitive that needs more origins than are left, or whose pid file is
// missing, fails with a clear error; Unhealthy posts to each origin's
// admin page and restore posts healthy.
func TestProcessesSignalAndUnhealthy(t *testing.T) {
	var procs []*exec.Cmd
	waits := make([]chan error, 3)
	for i := range 3 {
		c := exec.Command("sleep", "120")
		if err := c.Start(); err != nil {
			t.Skipf("no sleep to run: %v", err)
		}
		waits[i] = make(chan error, 1)
		go func() { waits[i] <- c.Wait() }()
		procs = append(procs, c)
		t.Cleanup(func() { _ = c.Process.Kill() })
	}
	pidFile := filepath.Join(t.TempDir(), "hub3.pid")
	if err := os.WriteFile(pidFile, []byte(fmt.Sprintf("%d\n", procs[2].Process.Pid)), 0o644); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var posts []string
	admin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		posts = append(posts, r.Method+" "+r.URL.Path)
		mu.Unlock()
	}))
	defer admin.Close()
	hub1, err := ParseOrigin(fmt.Sprintf("pid=%d,admin=%s,node=hub-1", procs[0].Process.Pid, admin.URL))
	if err != nil || hub1.Node != "hub-1" {
		t.Fatalf("ParseOrigin with node= gave %+v, %v", hub1, err)
	}
	p := NewProcesses([]Origin{
		hub1,
		{PID: procs[1].Process.Pid, Admin: admin.URL},
		{PIDFile: pidFile, Admin: admin.URL},
	})
	if !p.CanSignal() || !p.CanMarkUnhealthy() || p.Len() != 3 {
		t.Fatal("Processes with pids and admin addresses says it cannot act")
	}
	ctx := context.Background()
	state := func(i int) byte {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", procs[i].Process.Pid))
		if err != nil {
			t.Skipf("no /proc: %v", err)
		}
		_, after, _ := strings.Cut(string(b), ") ")
		return after[0]
	}
	thaw, err := p.Kill(ctx, KillRequest{Origins: 2, Freeze: true})
	if err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, 10*time.Second, "the first two origins stopped", func() bool { return state(0) == 'T' && state(1) == 'T' })
	if state(2) == 'T' {
		t.Fatal("a freeze of 2 origins stopped the third")
	}
	if _, err := p.Kill(ctx, KillRequest{Origins: 1, Freeze: true}); err != nil {
		t.Fatalf("a freeze of the one origin not frozen: %v", err)
	}
	testkit.WaitFor(t, 10*time.Second, "the third origin (by its pid file) stopped", func() bool { return state(2) == 'T' })
	if _, err := p.Kill(ctx, KillRequest{Origins: 1, Freeze: true}); err == nil || !strings.Contains(err.Error(), "a freeze of 1 origins, but only 0 of the 3 are left") {
		t.Errorf("a fourth freeze: %v, want a refusal (none left)", err)
	}
	if err := thaw(); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, 10*time.Second, "the first two origins running again", func() bool { return state(0) != 'T' && state(1) != 'T' })
	if _, err := p.Kill(ctx, KillRequest{Node: "hub-9"}); err == nil || !strings.Contains(err.Error(), "a kill of origin node=hub-9, which no origin is") {
		t.Errorf("a kill of an unknown node: %v, want a refusal naming it", err)
	}
	if _, err := p.Kill(ctx, KillRequest{Node: "hub-1"}); err != nil { // a poison's kill, by node
		t.Fatal(err)
	}
	if err := <-waits[0]; err == nil || !strings.Contains(err.Error(), "killed") {
		t.Errorf("origin 1 ended with %v, want killed", err)
	}
	if _, err := p.Kill(ctx, KillRequest{Node: "hub-1"}); err == nil || !strings.Contains(err.Error(), "gone already") {
		t.Errorf("a second kill of node hub-1: %v, want a refusal (gone)", err)
	}
	if err := p.Drain(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if err := <-waits[1]; err == nil || !strings.Contains(err.Error(), "terminated") {
		t.Errorf("origin 2 ended with %v, want terminated (SIGTERM)", err)
	}
	restore, err := p.Unhealthy(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	if err := restore(); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	got := strings.Join(posts, ", ")
	mu.Unlock()
	if got != "POST /health/unhealthy, POST /health/healthy" {
		t.Errorf("admin pages called: %s; want unhealthy then healthy on the one origin left", got)
	}
	if err := p.Drain(ctx, 2); err == nil {
		t.Error("a drain of 2 origins with 1 left was carried out")
	}
	_ = sendSignal(procs[2].Process.Pid, sigCont)
	if err := os.Remove(pidFile); err != nil {
		t.Fatal(err)
	}
	if err := p.Drain(ctx, 1); err == nil || !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a drain whose pid file is gone: %v, want the missing file", err)
	}
}

const faultsRun = `
name: faults-run
duration: 30s
population: {devices: 40, initial: 40, protocol: websocket}
dns: {policy: multivalue}
origins: [{name: a, region: east, headroom: 2, max_new_per_second: 1000}, {name: b, region: west, headroom: 2, max_new_per_second: 1000}]
client:
  backoff: {policy: full, base: 50ms, cap: 300ms}
traffic:
  unhealthy:
    - {at: 500ms, for: 1s}
  kill:
    - {at: 700ms, signal: stop}
  move:
    - {at: 1500ms, from: east, to: west}
stop: {on_recovery: true}
`

// TestFaultsRun: a run against two hubs, one per region: half the devices
// start on each; an unhealthy spell marks a hub unhealthy for a second and
// ends by itself; a freeze with no end is thawed at the end of the run;
// the move sends every device of east to west: the east hub's sessions
// are cut (counted for the move), every device ends on the west hub.
func TestFaultsRun(t *testing.T) {
	east, west := startHubID(t, "hub-east", hub.Options{}), startHubID(t, "hub-west", hub.Options{})
	var mu sync.Mutex
	var events []string
	note := func(s string) {
		mu.Lock()
		events = append(events, s)
		mu.Unlock()
	}
	var atEnd [2]int
	cfg := Config{
		Regions: map[string][]string{"east": {east.url()}, "west": {west.url()}},
		Token:   testToken(testSecret), Progress: testWriter{t}, Origins: 2,
		Unhealthy: func(_ context.Context, n int) (func() error, error) {
			east.SetUnhealthy(true)
			note(fmt.Sprintf("unhealthy %d", n))
			return func() error { east.SetUnhealthy(false); note("healthy"); return nil }, nil
		},
		Kill: func(_ context.Context, k KillRequest) (func() error, error) {
			note(fmt.Sprintf("freeze %d %v", k.Origins, k.Freeze))
			return func() error { note("thaw"); return nil }, nil
		},
		AtEnd: func() { atEnd = [2]int{east.Sessions(), west.Sessions()}; note("end") },
	}
	res := runScenario(t, loadScenario(t, "faults-run.yaml", faultsRun), cfg)
	mu.Lock()
	got := strings.Join(events, ", ")
	mu.Unlock()
	if got != "unhealthy 1, freeze 1 true, healthy, end, thaw" {
		t.Errorf("primitives called: %s; want the unhealthy spell ended after its second, the freeze thawed after the end", got)
	}
	if res.Stopped != "on_recovery" || res.Held != 40 || atEnd != [2]int{0, 40} {
		t.Errorf("stopped by %s holding %d, hubs east/west %v at the end; want on_recovery, 40 held, all on west", res.Stopped, res.Held, atEnd)
	}
	if len(res.Storms) != 3 {
		t.Fatalf("%d storms, want 3", len(res.Storms))
	}
	un, fr, mv := res.Storms[0], res.Storms[1], res.Storms[2]
	if un.Kind != "unhealthy" || un.ForSeconds != 1 || fr.Kind != "freeze" || mv.Kind != "move" || mv.From != "east" || mv.To != "west" {
		t.Errorf("storms %+v %+v %+v", un, fr, mv)
	}
	if w := res.Welcomes["hub-east"].Total(); mv.Dropped != 20 || mv.Back != 20 || w != 20 {
		t.Errorf("move: dropped %d back %d, east welcomed %d; want the 20 devices of east (half) moved and back", mv.Dropped, mv.Back, w)
	}
	hb := res.HeldByOrigin
	if e, w := hb["hub-east"], hb["hub-west"]; len(e) == 0 || len(w) == 0 || e[0] != 20 || w[0] != 20 || e[len(e)-1] != 0 || w[len(w)-1] != 40 {
		t.Errorf("held by origin per second: east %v, west %v; want 20 and 20 first, 0 and 40 last", e, w)
	}
	if un.Error != "" || fr.Error != "" {
		t.Errorf("storm errors: %q %q", un.Error, fr.Error)
	}
}

// TestEverySweepRefused: a sweep of any key (dns_policy came with the
// simulator's CDN study) is refused with its line: kraken runs one
// variant per run, never the first of a sweep silently.
func TestEverySweepRefused(t *testing.T) {
	sc := loadScenario(t, "sweep.yaml", `
name: sweep
duration: 10s
population: {devices: 10, protocol: websocket}
dns: {policy: multivalue}
origins: [{name: a, headroom: 2, max_new_per_second: 100}]
sweep:
  dns_policy: [multivalue, weighted]
`)
	_, err := New(sc, Config{Targets: []string{"ws://127.0.0.1:1"}, Token: testToken(testSecret)})
	if err == nil || !strings.Contains(err.Error(), "sweep.yaml:6:1: sweep: kraken runs one variant per run") {
		t.Errorf("New = %v, want the sweep refused with its line", err)
	}
}
