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
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	natsserver "github.com/nats-io/nats-server/v2/server"

	"github.com/corralhq/corral/internal/testkit"
)

// root is the module's root, sdk the SDK's folder, relative to this one.
const (
	root = "../../.."
	sdk  = ".."
)

// chromium is Debian's browser, as scripts/test.sh installs it.
func chromium() string {
	if p := os.Getenv("CORRAL_CHROMIUM"); p != "" {
		return p
	}
	return "/usr/bin/chromium"
}

// needBrowser fails (or, with -short, skips) when a tool of the browser
// tests is missing, naming it and the command that installs it.
func needBrowser(t *testing.T) {
	t.Helper()
	var missing []string
	if _, err := exec.LookPath("node"); err != nil {
		missing = append(missing, "node (Node.js 20 or later: apt-get install nodejs npm)")
	}
	if _, err := os.Stat(filepath.Join(sdk, "node_modules", "playwright-core")); err != nil {
		missing = append(missing, "sdk/js/node_modules (cd sdk/js && npm ci)")
	}
	if _, err := os.Stat(chromium()); err != nil {
		missing = append(missing, chromium()+" (apt-get install chromium)")
	}
	if len(missing) == 0 {
		return
	}
	msg := "the browser tests need " + strings.Join(missing, ", ") + "; bash scripts/test.sh installs them"
	if testing.Short() {
		t.Skip(msg)
	}
	t.Fatal(msg)
}

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
	stopBrowser()
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

// line is one console line of a page, with the time the test read it.
type line struct {
	at   time.Time
	text string
}

// driver is the headless Chromium of the test process (driver.mjs), shared
// by the tests: one browser start (the slow part), a page per test.
type driver struct {
	cmd    *exec.Cmd
	mu     sync.Mutex // guards stdin writes, lines and next
	stdin  io.WriteCloser
	lines  map[string][]line // by page id
	next   int
	done   chan struct{}
	stderr testkit.SyncBuffer
}

var (
	drvOnce sync.Once
	drv     *driver
	drvErr  error
)

// browser returns the shared driver, starting it on first use and waiting
// until Chromium is up.
func browser(t *testing.T) *driver {
	t.Helper()
	drvOnce.Do(func() {
		start := time.Now()
		d := &driver{lines: map[string][]line{}, done: make(chan struct{})}
		d.cmd = exec.Command("node", "driver.mjs")
		d.cmd.Env = append(os.Environ(), "CORRAL_CHROMIUM="+chromium())
		d.cmd.Stderr = &d.stderr
		var stdout io.ReadCloser
		if d.stdin, drvErr = d.cmd.StdinPipe(); drvErr != nil {
			return
		}
		if stdout, drvErr = d.cmd.StdoutPipe(); drvErr != nil {
			return
		}
		if drvErr = d.cmd.Start(); drvErr != nil {
			return
		}
		ready := make(chan struct{})
		go func() {
			sc := bufio.NewScanner(stdout)
			sc.Buffer(make([]byte, 64<<10), 1<<20)
			for sc.Scan() {
				id, text, _ := strings.Cut(sc.Text(), " ")
				if id == "DRIVER" && text == "ready" {
					close(ready)
					continue
				}
				d.mu.Lock()
				d.lines[id] = append(d.lines[id], line{at: time.Now(), text: strings.ReplaceAll(text, `\n`, "\n")})
				d.mu.Unlock()
			}
			_ = d.cmd.Wait()
			close(d.done)
		}()
		select {
		case <-ready:
			drv = d
			t.Logf("Chromium up in %v", time.Since(start).Round(time.Millisecond))
		case <-d.done:
			drvErr = fmt.Errorf("the browser driver stopped before Chromium was up:\n%s", d.stderr.String())
		case <-time.After(120 * time.Second):
			_ = d.cmd.Process.Kill()
			drvErr = fmt.Errorf("Chromium not up after 120 s:\n%s", d.stderr.String())
		}
	})
	if drvErr != nil {
		t.Fatal(drvErr)
	}
	return drv
}

// stopBrowser closes the shared browser (TestMain, after the tests).
func stopBrowser() {
	if drv == nil {
		return
	}
	drv.stdin.Close()
	select {
	case <-drv.done:
	case <-time.After(30 * time.Second):
		_ = drv.cmd.Process.Kill()
	}
}

// page is one page of the shared browser.
type page struct {
	d  *driver
	id string
}

// openPage opens url in a new page; it closes at the end of the test.
func openPage(t *testing.T, url string) *page {
	t.Helper()
	d := browser(t)
	d.mu.Lock()
	d.next++
	p := &page{d: d, id: fmt.Sprint(d.next)}
	_, err := fmt.Fprintf(d.stdin, "open %s %s\n", p.id, url)
	d.mu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		d.mu.Lock()
		_, _ = fmt.Fprintf(d.stdin, "close %s\n", p.id)
		d.mu.Unlock()
		if t.Failed() {
			t.Logf("page console:\n%s\ndriver stderr:\n%s", p.text(), d.stderr.String())
		}
	})
	return p
}

func (p *page) snapshot() []line {
	p.d.mu.Lock()
	defer p.d.mu.Unlock()
	return append([]line(nil), p.d.lines[p.id]...)
}

func (p *page) text() string {
	var s strings.Builder
	for _, l := range p.snapshot() {
		s.WriteString(l.text + "\n")
	}
	return s.String()
}

// waitLine waits for a console line that satisfies ok, failing on a page
// error or when the driver stops.
func (p *page) waitLine(t *testing.T, what string, ok func(string) bool) line {
	t.Helper()
	var found line
	start := time.Now()
	defer func() { t.Logf("%s after %v", what, time.Since(start).Round(time.Millisecond)) }()
	testkit.WaitFor(t, 90*time.Second, what, func() bool {
		for _, l := range p.snapshot() {
			if strings.HasPrefix(l.text, "PAGEERROR ") {
				t.Fatalf("page error while waiting for %s: %s", what, l.text)
			}
			if ok(l.text) {
				found = l
				return true
			}
		}
		select {
		case <-p.d.done:
			t.Fatalf("the browser driver stopped while waiting for %s:\n%s", what, p.d.stderr.String())
		default:
		}
		return false
	})
	return found
}
