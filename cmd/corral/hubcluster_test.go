package main

import (
	"context"
	"encoding/json"
	"fmt"
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
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/corralhq/corral/client"
	"github.com/corralhq/corral/hub/auth"
	"github.com/corralhq/corral/internal/natsutil"
	"github.com/corralhq/corral/internal/testkit"
)

// The tests below run `corral hub` as separate processes: the test binary
// runs itself with corralProcessEnv set, and TestCorralProcess then runs
// the corral command line in that child instead of a test.
const corralProcessEnv = "CORRAL_TEST_PROCESS_ARGS"

// TestCorralProcess is not a test: in a child started by startCorral it
// runs corral with the arguments of corralProcessEnv and exits with its
// code.
func TestCorralProcess(t *testing.T) {
	args := os.Getenv(corralProcessEnv)
	if args == "" {
		t.Skip("runs only as a child process of a cluster test")
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, strings.Split(args, "\x1f"), os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// corralProc is a corral child process.
type corralProc struct {
	name string
	cmd  *exec.Cmd
	log  *testkit.SyncBuffer
	done chan struct{} // closed when it has exited
	err  error         // its exit status, once done
}

func (p *corralProc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// startCorral runs `corral args...` as a child process; the test stops it
// (SIGTERM, then a kill after 30 s) at its end.
func startCorral(t *testing.T, name string, args ...string) *corralProc {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestCorralProcess$")
	cmd.Env = append(os.Environ(), corralProcessEnv+"="+strings.Join(args, "\x1f"))
	p := &corralProc{name: name, cmd: cmd, log: &testkit.SyncBuffer{}, done: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = p.log, p.log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.err = cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.done:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			<-p.done
		}
		if t.Failed() {
			t.Logf("%s log:\n%s", p.name, p.log.String())
		}
	})
	return p
}

const (
	clusterSecret = "cluster-test-secret-0123456789"
	clusterAPIKey = "cluster-test-api-key"
)

// clusterHub is one hub of a cluster test.
type clusterHub struct {
	proc       *corralProc
	listen     string
	admin      string
	natsListen string // the embedded server's client address, if any
	configPath string
}

// writeHubConfig writes the config file of hub i with the nats section
// given.
func writeHubConfig(t *testing.T, dir string, i int, natsYAML, historyYAML string) *clusterHub {
	t.Helper()
	h := &clusterHub{}
	// Port 0 everywhere the test can read the address back from the log:
	// a port reserved and released first may be taken meanwhile.
	body := fmt.Sprintf(`listen: 127.0.0.1:0
grpc_listen: ""
node_id: hub-%d
admin: {addr: 127.0.0.1:0}
nats:
%s
history:
%s
auth:
  keys: [{id: k, algorithm: HS256, secret: %s}]
  api_keys: [{name: backend, key: %s, tenants: ["*"]}]
`, i, natsYAML, historyYAML, clusterSecret, clusterAPIKey)
	h.configPath = filepath.Join(dir, fmt.Sprintf("hub-%d.yaml", i))
	if err := os.WriteFile(h.configPath, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return h
}

// logged returns the string value of key in the first JSON log line of
// the process whose msg is msg, or "".
func (p *corralProc) logged(msg, key string) string {
	for _, line := range strings.Split(p.log.String(), "\n") {
		var rec map[string]any
		if json.Unmarshal([]byte(line), &rec) != nil || rec["msg"] != msg {
			continue
		}
		v, _ := rec[key].(string)
		return v
	}
	return ""
}

// ready returns the status and body of the hub's /readyz (0 before the
// admin listener is up), and learns the hub's addresses from its log.
func (h *clusterHub) ready() (int, string) {
	if h.admin == "" {
		if h.admin = h.proc.logged("admin listener up", "addr"); h.admin == "" {
			return 0, "no admin listener yet"
		}
	}
	if h.listen == "" {
		h.listen = h.proc.logged("hub up", "listen")
	}
	resp, err := http.Get("http://" + h.admin + "/readyz")
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// publish posts one message to the hub's HTTP publish API and returns the
// HTTP status.
func (h *clusterHub) publish(t *testing.T, channel, data string) int {
	t.Helper()
	body := fmt.Sprintf(`{"tenant":"demo","channel":%q,"data":%q,"priority":"p1"}`, channel, data)
	req, _ := http.NewRequest("POST", "http://"+h.listen+"/v1/publish", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+clusterAPIKey)
	c := http.Client{Timeout: 10 * time.Second}
	resp, err := c.Do(req)
	if err != nil {
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}

// waitAllReady waits until every hub answers /readyz with 200, failing at
// once when one exits, and returns whether some /readyz answered 503 with a
// reason first.
func waitAllReady(t *testing.T, hubs []*clusterHub) (sawReason bool) {
	t.Helper()
	testkit.WaitFor(t, 120*time.Second, "every hub ready", func() bool {
		all := true
		for _, h := range hubs {
			if h.proc.exited() {
				t.Fatalf("%s exited before it was ready (%v):\n%s", h.proc.name, h.proc.err, h.proc.log.String())
			}
			code, body := h.ready()
			if code == http.StatusServiceUnavailable && strings.Contains(body, "history unavailable") {
				sawReason = true
			}
			all = all && code == http.StatusOK && h.listen != ""
		}
		if !all {
			time.Sleep(50 * time.Millisecond)
		}
		return all
	})
	return sawReason
}

// checkFanOut publishes on the first hubs and expects every message on a
// subscriber of the last one.
func checkFanOut(t *testing.T, hubs []*clusterHub, channel string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	token, err := jwt.NewWithClaims(jwt.SigningMethodHS256, auth.Claims{
		Tenant: "demo", Channels: []string{">"},
		RegisteredClaims: jwt.RegisteredClaims{ExpiresAt: jwt.NewNumericDate(time.Now().Add(time.Hour))},
	}).SignedString([]byte(clusterSecret))
	if err != nil {
		t.Fatal(err)
	}
	last := hubs[len(hubs)-1]
	c, err := client.Dial(ctx, client.Config{Addrs: []string{"ws://" + last.listen + "/v1/ws"}, Token: token})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Subscribe(ctx, channel); err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{}
	for i, h := range hubs[:len(hubs)-1] {
		for n := range 5 {
			msg := fmt.Sprintf("from hub %d #%d", i+1, n)
			if code := h.publish(t, channel, msg); code != http.StatusOK {
				t.Fatalf("publish on hub %d: HTTP %d", i+1, code)
			}
			want[msg] = true
		}
	}
	for len(want) > 0 {
		select {
		case e := <-c.Events():
			if e.Kind == client.EventMessage {
				delete(want, string(e.Message.GetData()))
			}
		case <-ctx.Done():
			t.Fatalf("hub %d's subscriber is missing %d messages", len(hubs), len(want))
		}
	}
}

// streamReplicas returns the replicas of the history stream.
func streamReplicas(t *testing.T, url string) int {
	t.Helper()
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := js.Stream(ctx, "CORRAL_HISTORY")
	if err != nil {
		t.Fatal(err)
	}
	return s.CachedInfo().Config.Replicas
}

// routePorts returns three route addresses and their URLs, on ports the
// kernel does not hand out meanwhile (natsutil.FreeAddrs).
func routePorts(t *testing.T) (addrs, urls []string) {
	t.Helper()
	addrs, err := natsutil.FreeAddrs(3)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range addrs {
		urls = append(urls, "nats://"+a)
	}
	return addrs, urls
}

// TestHubsFormEmbeddedNATSCluster starts three hub processes at once, each
// with an embedded nats-server routed to the two others (nats.cluster): the
// embedded servers form one JetStream cluster while the hubs wait for it
// (none exits), the history stream is replicated on the three without
// history.replicas being set, and a message published on hub 1 or 2 reaches
// a subscriber of hub 3.
func TestHubsFormEmbeddedNATSCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("runs three hub processes")
	}
	dir := t.TempDir()
	routeAddrs, routes := routePorts(t)
	clientAddrs, err := natsutil.FreeAddrs(3)
	if err != nil {
		t.Fatal(err)
	}
	var hubs []*clusterHub
	for i := range 3 {
		natsListen := clientAddrs[i]
		natsYAML := fmt.Sprintf("  listen: %s\n  server_name: n%d\n  store_dir: %s\n  cluster:\n    name: corral\n    listen: %s\n    routes: [%s]",
			natsListen, i+1, filepath.Join(dir, fmt.Sprintf("nats-%d", i+1)), routeAddrs[i], strings.Join(routes, ", "))
		h := writeHubConfig(t, dir, i+1, natsYAML, "  store: jetstream")
		h.natsListen = natsListen
		hubs = append(hubs, h)
	}
	for i, h := range hubs {
		h.proc = startCorral(t, fmt.Sprintf("hub %d", i+1), "hub", "--config", h.configPath, "--log-format", "json")
	}
	waitAllReady(t, hubs)
	if r := streamReplicas(t, "nats://"+hubs[0].natsListen); r != 3 {
		t.Errorf("history stream replicas = %d on a three-node cluster, want 3", r)
	}
	checkFanOut(t, hubs, "embedded")
}

// TestHubsOnAFreshNATSCluster starts a three-node NATS cluster and, without
// waiting for it to form, three hub processes, each given one node's URL:
// the hubs race to create the history stream on a cluster that has no
// JetStream meta leader yet. Each waits with /readyz failing and the
// reason logged, and all three become ready; the stream is replicated on
// the three nodes by default; killing the node hub 1 is connected to
// changes nothing for publishers on any hub.
func TestHubsOnAFreshNATSCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a NATS cluster and three hub processes")
	}
	dir := t.TempDir()
	routeAddrs, routes := routePorts(t)
	var nodes []*natsutil.Embedded
	var hubs []*clusterHub
	for i := range 3 {
		e, err := natsutil.StartServer(natsutil.Config{
			ServerName: fmt.Sprintf("n%d", i+1), Listen: "127.0.0.1:0", StoreDir: filepath.Join(dir, fmt.Sprintf("nats-%d", i+1)),
			ConnectTimeout: 30 * time.Second,
			Cluster:        natsutil.ClusterConfig{Name: "corral", Listen: routeAddrs[i], Routes: routes},
		}, nil)
		if err != nil {
			t.Fatal(err)
		}
		nodes = append(nodes, e)
		t.Cleanup(e.Shutdown)
		h := writeHubConfig(t, dir, i+1, "  url: "+e.Server.ClientURL(), "  store: jetstream")
		h.proc = startCorral(t, fmt.Sprintf("hub %d", i+1), "hub", "--config", h.configPath, "--log-format", "json")
		hubs = append(hubs, h)
	}
	waitAllReady(t, hubs)
	logged := false
	for _, h := range hubs {
		logged = logged || strings.Contains(h.proc.log.String(), "history not available, retrying")
	}
	if !logged {
		t.Log("every hub found JetStream ready at its first attempt: the race did not happen in this run")
	}
	// A hub may open the stream before it has seen the third node (JetStream
	// answers once two of three are routed); it raises the replicas when it
	// does.
	testkit.WaitFor(t, 60*time.Second, "a history stream replicated on the three nodes", func() bool {
		if streamReplicas(t, nodes[1].Server.ClientURL()) == 3 {
			return true
		}
		time.Sleep(200 * time.Millisecond)
		return false
	})
	checkFanOut(t, hubs, "fresh")

	// Kill the node hub 1 is connected to: with the replicated default,
	// every hub keeps publishing and stays ready.
	nodes[0].Shutdown()
	for i, h := range hubs {
		testkit.WaitFor(t, 60*time.Second, fmt.Sprintf("a publish on hub %d after a NATS node died", i+1), func() bool {
			if h.publish(t, "after-kill", "x") == http.StatusOK {
				return true
			}
			time.Sleep(100 * time.Millisecond)
			return false
		})
	}
	for i, h := range hubs {
		if code, body := h.ready(); code != http.StatusOK {
			t.Errorf("hub %d after a NATS node died: /readyz %d %s", i+1, code, body)
		}
	}
	checkFanOut(t, hubs[1:], "after-kill")
}
