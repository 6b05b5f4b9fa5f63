package kraken

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/corralhq/corral/hub"
	"github.com/corralhq/corral/internal/browser"
	"github.com/corralhq/corral/internal/natsutil"
)

// TestMain runs the test binary as a kraken agent when a test started it
// as one (Split.Command below).
func TestMain(m *testing.M) {
	if url := os.Getenv("KRAKEN_TEST_AGENT_NATS"); url != "" {
		err := RunAgent(context.Background(), AgentConfig{NATS: url, Run: os.Getenv("KRAKEN_TEST_AGENT_RUN")})
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	code := m.Run()
	browser.Stop() // the report's browser test
	os.Exit(code)
}

// agentCommands is a Split.Command that starts this test binary as an
// agent and keeps every command it made.
type agentCommands struct {
	mu   sync.Mutex
	cmds []*exec.Cmd
	errs bytes.Buffer
}

func (a *agentCommands) command(url, run string) *exec.Cmd {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "KRAKEN_TEST_AGENT_NATS="+url, "KRAKEN_TEST_AGENT_RUN="+run)
	a.mu.Lock()
	defer a.mu.Unlock()
	cmd.Stderr = &lockedWriter{mu: &a.mu, w: &a.errs}
	a.cmds = append(a.cmds, cmd)
	return cmd
}

type lockedWriter struct {
	mu *sync.Mutex
	w  *bytes.Buffer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

const splitScenario = `
name: split
duration: 30s
population:
  devices: 200
  initial: 200
  protocol: websocket
  tenants: 2
  priorities: [{name: P0, share: 0.4}, {name: P2, share: 0.6}]
dns: {policy: multivalue}
origins: [{name: hub, headroom: 2, max_new_per_second: 1000}]
client:
  backoff: {policy: full, base: 50ms, cap: 500ms}
traffic:
  publish:
    - {at: 0s, for: 1s, priority: P0, per_second: 10}
  disconnects:
    - {at: 1500ms, share: 0.5}
stop: {on_recovery: true}
`

// TestSplitMatchesOneProcess: the same run in one process and split over
// two agent processes counts the same sessions and messages; the merged
// histograms are exactly the merge of the agents' own.
func TestSplitMatchesOneProcess(t *testing.T) {
	if testing.Short() {
		t.Skip("two runs against a hub, one over two agent processes")
	}
	h := startHub(t, hub.Options{})
	cfg := Config{Targets: []string{h.url()}, Token: testToken(testSecret), PublishURL: "http://" + h.Addr().String(), APIKey: testAPIKey}
	// Each run from its own source addresses, none of them another
	// test's: no connection of the first run (in TIME_WAIT) shares a
	// 4-tuple with the second's.
	cfg.Sources = netip.MustParsePrefix("127.90.0.0/16")
	one := runScenario(t, loadScenario(t, "split.yaml", splitScenario), cfg)

	var ac agentCommands
	cfg.Progress = testWriter{t}
	cfg.Sources = netip.MustParsePrefix("127.91.0.0/16")
	c, err := NewCoordinator(loadScenario(t, "split.yaml", splitScenario), cfg, Split{Agents: 2, Command: ac.command})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	two, err := c.Run(ctx)
	if err != nil {
		t.Fatalf("split run: %v\nagents' stderr:\n%s", err, ac.errs.String())
	}
	if len(ac.cmds) != 2 {
		t.Fatalf("%d agent processes started, want 2", len(ac.cmds))
	}
	for _, cmd := range ac.cmds {
		if cmd.ProcessState == nil {
			t.Errorf("agent process %d still running after the run", cmd.Process.Pid)
		}
	}
	type counts struct {
		Devices, Held, Welcomes, Dropped, Back int64
		Published, DeliveredP0, P0Exp, P0Lost  int64
		Gaps                                   int64
		Stopped                                string
	}
	of := func(r *Result) counts {
		var w int64
		for _, c := range r.Welcomes {
			w += c.Total()
		}
		return counts{r.Devices, r.Held, w, r.Storms[0].Dropped, r.Storms[0].Back,
			r.Messages.Published.Total(), r.Messages.Delivered["p0"], r.Messages.P0Expected, r.Messages.P0Lost,
			r.Resumes.Gaps, r.Stopped}
	}
	if a, b := of(one), of(two); a != b {
		t.Errorf("one process %+v\ntwo agents  %+v\nwant the same counts\n(failures %v / %v, disconnects %v / %v; the hub's closes %s)",
			a, b, one.Failures, two.Failures, one.Disconnects, two.Disconnects, labelled(t, h.reg, "corral_hub_session_closes_total"))
	}
	if want := (counts{Devices: 200, Held: 200, Dropped: 100, Back: 100, Published: 10, DeliveredP0: 1000, P0Exp: 1000, Stopped: "on_recovery"}); of(two).Devices != want.Devices ||
		of(two).Held != want.Held || of(two).Dropped != want.Dropped || of(two).Back != want.Back || of(two).Published != want.Published ||
		of(two).DeliveredP0 != want.DeliveredP0 || of(two).P0Exp != want.P0Exp || of(two).P0Lost != 0 || of(two).Stopped != want.Stopped {
		t.Errorf("split run %+v, want %+v", of(two), want)
	}
	parts := c.Parts()
	if two.Agents != 2 || len(parts) != 2 || parts[0].Devices != 100 || parts[1].Devices != 100 {
		t.Fatalf("agents %d, parts %d, want 2 of 100 devices each", two.Agents, len(parts))
	}
	// The merge is exact: the agents' results merged here (through JSON,
	// as they travelled) equal the coordinator's merged result.
	var again *Result
	for _, p := range parts {
		b, _ := json.Marshal(p)
		var r Result
		if err := json.Unmarshal(b, &r); err != nil {
			t.Fatal(err)
		}
		if again == nil {
			again = &r
		} else if err := again.Merge(&r); err != nil {
			t.Fatal(err)
		}
	}
	ja, _ := json.Marshal(again.Latency)
	jb, _ := json.Marshal(two.Latency)
	if !bytes.Equal(ja, jb) {
		t.Errorf("merged latency histograms differ from the merge of the parts:\n%s\n%s", ja, jb)
	}
	if n := parts[0].Latency.Welcome.Count() + parts[1].Latency.Welcome.Count(); two.Latency.Welcome.Count() != n || n != of(two).Welcomes {
		t.Errorf("welcome histogram holds %d, the parts %d, welcomes %d", two.Latency.Welcome.Count(), n, of(two).Welcomes)
	}
}

// TestDeadAgentIsReported: an agent process killed in the middle of a
// run fails the run at once with an error naming it; the other agent is
// stopped, not left behind.
func TestDeadAgentIsReported(t *testing.T) {
	if testing.Short() {
		t.Skip("a split run against a hub")
	}
	h := startHub(t, hub.Options{})
	running := make(chan struct{})
	var once sync.Once
	progress := writerFunc(func(p []byte) (int, error) {
		if strings.Contains(string(p), "kraken: t=") {
			once.Do(func() { close(running) })
		}
		return len(p), nil
	})
	sc := loadScenario(t, "dead.yaml", strings.Replace(splitScenario, "stop: {on_recovery: true}\n", "", 1))
	var ac agentCommands
	c, err := NewCoordinator(sc, Config{Targets: []string{h.url()}, Token: testToken(testSecret), PublishURL: "http://" + h.Addr().String(),
		APIKey: testAPIKey, Progress: progress, ProgressEvery: 100 * time.Millisecond}, Split{Agents: 2, Command: ac.command})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	errc := make(chan error, 1)
	go func() {
		_, err := c.Run(ctx)
		errc <- err
	}()
	select {
	case <-running:
	case err := <-errc:
		t.Fatalf("the run ended before its clock started: %v\n%s", err, ac.errs.String())
	}
	ac.mu.Lock()
	victim := ac.cmds[1]
	ac.mu.Unlock()
	if err := victim.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	err = <-errc
	t.Logf("Run: %v", err)
	want := fmt.Sprintf(":%d) exited before its result: signal: killed", victim.Process.Pid)
	if err == nil || !strings.Contains(err.Error(), want) || !strings.HasPrefix(err.Error(), "kraken: agent ") {
		t.Fatalf("Run = %v, want an error naming agent process %d", err, victim.Process.Pid)
	}
	for _, cmd := range ac.cmds {
		if cmd.ProcessState == nil {
			t.Errorf("agent process %d left running", cmd.Process.Pid)
		}
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

// labelled formats every series of a metric family of reg with its
// labels.
func labelled(t *testing.T, reg prometheus.Gatherer, name string) string {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				fmt.Fprintf(&b, "%s=%s ", l.GetName(), l.GetValue())
			}
			fmt.Fprintf(&b, "%v; ", m.GetCounter().GetValue())
		}
	}
	return b.String()
}

// startNATS starts a NATS server for agents to join over, shut down at the
// end, and returns its URL.
func startNATS(t *testing.T) string {
	t.Helper()
	emb, err := natsutil.StartServer(natsutil.Config{Listen: "127.0.0.1:0"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(emb.Shutdown)
	return emb.Server.ClientURL()
}

// TestRemoteAgentJoins: an agent started by hand (RunAgent, here in this
// process) joins a run waiting for it over an external NATS server, by no
// run id; a second one is refused, the run being complete.
func TestRemoteAgentJoins(t *testing.T) {
	if testing.Short() {
		t.Skip("a run against a hub")
	}
	h := startHub(t, hub.Options{})
	url := startNATS(t)
	sc := loadScenario(t, "remote.yaml", `
name: remote
duration: 20s
population: {devices: 20, initial: 20, protocol: websocket}
dns: {policy: multivalue}
origins: [{name: hub, headroom: 2, max_new_per_second: 1000}]
client:
  backoff: {policy: full, base: 50ms, cap: 500ms}
traffic:
  disconnects: [{at: 500ms, share: 0.5}]
stop: {on_recovery: true}
`)
	c, err := NewCoordinator(sc, Config{Targets: []string{h.url()}, Token: testToken(testSecret), Sources: netip.MustParsePrefix("127.92.0.0/16")},
		Split{Agents: 1, Remote: 1, NATS: url})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	agentErr := make(chan error, 1)
	go func() { agentErr <- RunAgent(ctx, AgentConfig{NATS: url, Name: "by-hand"}) }()
	res, err := c.Run(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := <-agentErr; err != nil {
		t.Errorf("the agent: %v", err)
	}
	if res.Agents != 1 || res.Held != 20 || res.Storms[0].Dropped != 10 || res.Storms[0].Back != 10 || res.Stopped != "on_recovery" {
		t.Errorf("agents %d, held %d, dropped %d, back %d, stopped by %s; want 1, 20, 10, 10, on_recovery",
			res.Agents, res.Held, res.Storms[0].Dropped, res.Storms[0].Back, res.Stopped)
	}
}

// TestCompleteRunRefusesAnAgent: an agent that asks to join a run that
// has its agents is told so.
func TestCompleteRunRefusesAnAgent(t *testing.T) {
	url := startNATS(t)
	sc := loadScenario(t, "full.yaml", `
name: full
duration: 5s
population: {devices: 2, initial: 2, protocol: websocket}
dns: {policy: multivalue}
origins: [{name: hub, headroom: 2, max_new_per_second: 1000}]
`)
	c, err := NewCoordinator(sc, Config{Targets: []string{"ws://127.0.0.1:9/v1/ws"}, Token: testToken(testSecret)},
		Split{Agents: 1, Remote: 1, NATS: url, JoinTimeout: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	c.runID = "r1"
	s := &session{c: c, asg: assignment{Run: "r1", Agents: 1}, agents: make([]agentState, 1), byPID: map[int]int{}}
	s.joins = []joinRequest{{Name: "first"}} // the run's one agent joined
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	sub, err := nc.Subscribe(subjectJoinAny, s.onJoin)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	err = RunAgent(context.Background(), AgentConfig{NATS: url, Name: "second", JoinTimeout: 10 * time.Second})
	if err == nil || !strings.Contains(err.Error(), "kraken: the run refused this agent: run r1 has its 1 agents") {
		t.Errorf("RunAgent = %v, want the refusal", err)
	}
}
