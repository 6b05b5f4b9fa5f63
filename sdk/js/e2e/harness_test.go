package e2e

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	natsserver "github.com/nats-io/nats-server/v2/server"

	"github.com/corralhq/corral/internal/browser"
	"github.com/corralhq/corral/internal/testkit"
)

// root is the module's root, sdk the SDK's folder, relative to this one.
const (
	root = "../../.."
	sdk  = ".."
)

// needBrowser fails (or, with -short, skips) when a tool of the browser
// tests is missing (package internal/browser says which).
func needBrowser(t *testing.T) { browser.Need(t) }

var (
	buildOnce sync.Once
	buildErr  error
	binDir    string
)

// build builds the SDK (npm run build: dist/corral.js) and the corral
// binary once per test process, and returns the binary's path.
func build(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		start := time.Now()
		defer func() { t.Logf("built the SDK and corral in %v", time.Since(start).Round(time.Millisecond)) }()
		binDir, buildErr = os.MkdirTemp("", "corral-sdkjs-e2e-")
		if buildErr != nil {
			return
		}
		cmd := exec.Command("node", "build.mjs", "--no-types")
		cmd.Dir = sdk
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("node build.mjs --no-types: %v\n%s", err, out)
			return
		}
		cmd = exec.Command("go", "build", "-o", filepath.Join(binDir, "corral"), "./cmd/corral")
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go build ./cmd/corral: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return filepath.Join(binDir, "corral")
}

func TestMain(m *testing.M) {
	code := m.Run()
	browser.Stop()
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	os.Exit(code)
}

// startNATS runs the NATS server the hubs of a test share, with JetStream
// (the history), on a free loopback port.
func startNATS(t *testing.T) string {
	t.Helper()
	ns, err := natsserver.NewServer(&natsserver.Options{Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: t.TempDir(), NoLog: true, NoSigs: true})
	if err != nil {
		t.Fatal(err)
	}
	go ns.Start()
	if !ns.ReadyForConnections(30 * time.Second) {
		t.Fatal("nats-server did not start")
	}
	t.Cleanup(func() {
		ns.Shutdown()
		ns.WaitForShutdown()
	})
	return ns.ClientURL()
}

// hubProc is a running `corral hub` process.
type hubProc struct {
	name string
	addr string // host:port of /v1/ws and /v1/publish
	cmd  *exec.Cmd
	log  *testkit.SyncBuffer
	done chan struct{}
	err  error // the process's exit, once done is closed
}

// startHub runs `corral hub --config examples/hub.yaml` on loopback ports
// chosen by the kernel, with the environment overrides env
// (CORRAL_HUB_<KEY>=value), and returns once it logged "hub up".
func startHub(t *testing.T, bin, name string, env ...string) *hubProc {
	t.Helper()
	h := &hubProc{name: name, log: &testkit.SyncBuffer{}, done: make(chan struct{})}
	h.cmd = exec.Command(bin, "hub", "--config", filepath.Join(root, "examples", "hub.yaml"),
		"--listen", "127.0.0.1:0", "--admin", "127.0.0.1:0", "--log-format", "json")
	h.cmd.Env = append(os.Environ(), "CORRAL_HUB_GRPC_LISTEN=127.0.0.1:0", "CORRAL_HUB_NODE_ID="+name)
	h.cmd.Env = append(h.cmd.Env, env...)
	stderr, err := h.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	h.cmd.Stdout = h.log
	if err := h.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	up := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			line := sc.Bytes()
			h.log.Write(append(line, '\n'))
			var rec struct {
				Msg    string `json:"msg"`
				Listen string `json:"listen"`
			}
			if json.Unmarshal(line, &rec) == nil && rec.Msg == "hub up" {
				select {
				case up <- rec.Listen:
				default:
				}
			}
		}
		h.err = h.cmd.Wait()
		close(h.done)
	}()
	t.Cleanup(func() {
		select {
		case <-h.done:
		default:
			_ = h.cmd.Process.Kill()
			<-h.done
		}
		if t.Failed() {
			t.Logf("log of %s:\n%s", name, h.log.String())
		}
	})
	start := time.Now()
	defer func() { t.Logf("%s up in %v", name, time.Since(start).Round(time.Millisecond)) }()
	select {
	case h.addr = <-up:
	case <-h.done:
		t.Fatalf("%s stopped before it was up: %v\n%s", name, h.err, h.log.String())
	case <-time.After(60 * time.Second):
		t.Fatalf("%s not up after 60 s\n%s", name, h.log.String())
	}
	return h
}

func (h *hubProc) wsURL() string { return "ws://" + h.addr + "/v1/ws" }

// drain sends SIGTERM (the hub drains) and waits for a clean exit.
func (h *hubProc) drain(t *testing.T) {
	t.Helper()
	if err := h.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
}

func (h *hubProc) waitExit(t *testing.T) {
	t.Helper()
	select {
	case <-h.done:
		if h.err != nil {
			t.Fatalf("%s exited with %v after SIGTERM", h.name, h.err)
		}
	case <-time.After(60 * time.Second):
		t.Fatalf("%s still running 60 s after SIGTERM", h.name)
	}
}

// The backend credentials of examples/hub.yaml.
const (
	apiKey = "dev-api-key-change-me"
	tenant = "demo"
)

// publish publishes text on channel through a hub's HTTP API (P0) and
// returns its offset. An overloaded hub's 503 is tried again, as a backend
// would.
func publish(t *testing.T, addr, channel, text string) uint64 {
	t.Helper()
	body, _ := json.Marshal(map[string]string{"tenant": tenant, "channel": channel, "priority": "p0", "data": text, "client_message_id": text})
	for try := 0; ; try++ {
		req, _ := http.NewRequest("POST", "http://"+addr+"/v1/publish", bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+apiKey)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Errorf("publish %s on %s: %v", text, addr, err)
			return 0
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode == http.StatusServiceUnavailable && try < 50 {
			time.Sleep(20 * time.Millisecond)
			continue
		}
		var r struct {
			Offset uint64 `json:"offset"`
		}
		if resp.StatusCode != http.StatusOK || json.Unmarshal(b, &r) != nil {
			t.Errorf("publish %s on %s: %d %s", text, addr, resp.StatusCode, b)
			return 0
		}
		return r.Offset
	}
}

// pageServer serves the built SDK (/corral.js) and the given pages.
func pageServer(t *testing.T, pages map[string][]byte) *httptest.Server {
	t.Helper()
	mux := http.NewServeMux()
	for _, f := range []string{"corral.js", "corral.js.map"} {
		path := filepath.Join(sdk, "dist", f)
		mux.HandleFunc("/"+f, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/javascript")
			http.ServeFile(w, r, path)
		})
	}
	for name, body := range pages {
		mux.HandleFunc("/"+name, func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			_, _ = w.Write(body)
		})
	}
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

// openPage opens url in a new page of the shared headless Chromium; it
// closes at the end of the test.
func openPage(t *testing.T, url string) *browser.Page { return browser.Open(t, url) }
