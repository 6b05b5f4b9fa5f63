// Package browser runs the headless Chromium of corral's browser tests
// (the browser SDK's, sdk/js/e2e, and the charts', internal/chart): one
// browser per test process, started on first use by Open (driver.mjs on
// playwright-core), a page per test, the page's console read as lines,
// JavaScript evaluated in it and screenshots written.
//
// It needs Node.js, sdk/js/node_modules (npm ci in sdk/js) and
// /usr/bin/chromium (or $CORRAL_CHROMIUM): Need fails a test that lacks
// one, naming it (with -short it skips). A test binary that uses Open
// calls Stop from its TestMain. Only tests import this package; everything
// in it is safe for concurrent use.
package browser

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/corralhq/corral/internal/testkit"
)

// Chromium is Debian's browser, as scripts/test.sh installs it, or
// $CORRAL_CHROMIUM.
func Chromium() string {
	if p := os.Getenv("CORRAL_CHROMIUM"); p != "" {
		return p
	}
	return "/usr/bin/chromium"
}

// Root returns the module's root: the nearest folder holding go.mod above
// the working directory (a test runs in its package's folder).
func Root() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("browser: %w", err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		up := filepath.Dir(dir)
		if up == dir {
			return "", errors.New("browser: no go.mod above the working directory")
		}
		dir = up
	}
}

// Need fails (or, with -short, skips) t when a tool of the browser tests
// is missing, naming it and the command that installs it.
func Need(t testing.TB) {
	t.Helper()
	var missing []string
	if _, err := exec.LookPath("node"); err != nil {
		missing = append(missing, "node (Node.js 20 or later: apt-get install nodejs npm)")
	}
	root, err := Root()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "sdk", "js", "node_modules", "playwright-core")); err != nil {
		missing = append(missing, "sdk/js/node_modules (cd sdk/js && npm ci)")
	}
	if _, err := os.Stat(Chromium()); err != nil {
		missing = append(missing, Chromium()+" (apt-get install chromium)")
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

// Line is one console line of a page, with the time the test read it.
type Line struct {
	At   time.Time
	Text string
}

// reply is the driver's answer to an eval or a screenshot.
type reply struct {
	Value json.RawMessage `json:"value"`
	Error string          `json:"error"`
}

// driver is the headless Chromium of the test process (driver.mjs), shared
// by the tests: one browser start (the slow part), a page per test.
type driver struct {
	cmd     *exec.Cmd
	mu      sync.Mutex // guards stdin writes, lines, next and replies
	stdin   io.WriteCloser
	lines   map[string][]Line // by page id
	next    int
	replies map[int]chan reply
	done    chan struct{}
	stderr  testkit.SyncBuffer
}

var (
	drvOnce sync.Once
	drv     *driver
	drvErr  error
)

// browser returns the shared driver, starting it on first use and waiting
// until Chromium is up.
func browser(t testing.TB) *driver {
	t.Helper()
	drvOnce.Do(func() {
		start := time.Now()
		root, err := Root()
		if err != nil {
			drvErr = err
			return
		}
		d := &driver{lines: map[string][]Line{}, replies: map[int]chan reply{}, done: make(chan struct{})}
		d.cmd = exec.Command("node", filepath.Join(root, "internal", "browser", "driver.mjs"))
		d.cmd.Env = append(os.Environ(), "CORRAL_CHROMIUM="+Chromium(), "CORRAL_NODE_MODULES="+filepath.Join(root, "sdk", "js"))
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
		go d.read(stdout, ready)
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

// read files the driver's output lines by page, and its replies.
func (d *driver) read(stdout io.Reader, ready chan struct{}) {
	sc := bufio.NewScanner(stdout)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	for sc.Scan() {
		id, text, _ := strings.Cut(sc.Text(), " ")
		if id == "DRIVER" {
			if text == "ready" {
				close(ready)
				continue
			}
			if rest, ok := strings.CutPrefix(text, "reply "); ok {
				nText, doc, _ := strings.Cut(rest, " ")
				var n int
				var r reply
				if _, err := fmt.Sscan(nText, &n); err != nil {
					continue
				}
				if err := json.Unmarshal([]byte(doc), &r); err != nil {
					r.Error = "unreadable reply: " + err.Error()
				}
				d.mu.Lock()
				ch := d.replies[n]
				delete(d.replies, n)
				d.mu.Unlock()
				if ch != nil {
					ch <- r
				}
				continue
			}
		}
		d.mu.Lock()
		d.lines[id] = append(d.lines[id], Line{At: time.Now(), Text: strings.ReplaceAll(text, `\n`, "\n")})
		d.mu.Unlock()
	}
	_ = d.cmd.Wait()
	close(d.done)
}

// Stop closes the shared browser, if it was started; a TestMain calls it
// after the tests.
func Stop() {
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

// Page is one page of the shared browser.
type Page struct {
	d  *driver
	id string
}

// Open opens url in a new page of the shared browser (starting it on first
// use); the page closes at the end of the test, which then logs the page's
// console if it failed.
func Open(t testing.TB, url string) *Page {
	t.Helper()
	d := browser(t)
	d.mu.Lock()
	d.next++
	p := &Page{d: d, id: fmt.Sprint(d.next)}
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
			t.Logf("page console:\n%s\ndriver stderr:\n%s", p.Text(), d.stderr.String())
		}
	})
	return p
}

// Lines returns the page's console lines so far.
func (p *Page) Lines() []Line {
	p.d.mu.Lock()
	defer p.d.mu.Unlock()
	return append([]Line(nil), p.d.lines[p.id]...)
}

// Text returns the page's console so far, a line per message.
func (p *Page) Text() string {
	var s strings.Builder
	for _, l := range p.Lines() {
		s.WriteString(l.Text + "\n")
	}
	return s.String()
}

// Errors returns the page's uncaught errors and console.error messages so
// far.
func (p *Page) Errors() []string {
	var errs []string
	for _, l := range p.Lines() {
		if strings.HasPrefix(l.Text, "PAGEERROR ") || strings.HasPrefix(l.Text, "CONSOLEERROR ") {
			errs = append(errs, l.Text)
		}
	}
	return errs
}

// WaitLine waits for a console line that satisfies ok, failing on a page
// error or when the driver stops.
func (p *Page) WaitLine(t testing.TB, what string, ok func(string) bool) Line {
	t.Helper()
	var found Line
	start := time.Now()
	defer func() { t.Logf("%s after %v", what, time.Since(start).Round(time.Millisecond)) }()
	testkit.WaitFor(t, 90*time.Second, what, func() bool {
		for _, l := range p.Lines() {
			if strings.HasPrefix(l.Text, "PAGEERROR ") {
				t.Fatalf("page error while waiting for %s: %s", what, l.Text)
			}
			if ok(l.Text) {
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

// WaitLoaded waits until the page's load event.
func (p *Page) WaitLoaded(t testing.TB) {
	t.Helper()
	p.WaitLine(t, "the page loaded", func(s string) bool { return s == "DRIVER loaded" })
}

// call sends an eval or shot command and waits for its reply.
func (p *Page) call(t testing.TB, cmd, arg string) json.RawMessage {
	t.Helper()
	a, _ := json.Marshal(arg)
	ch := make(chan reply, 1)
	p.d.mu.Lock()
	p.d.next++
	n := p.d.next
	p.d.replies[n] = ch
	_, err := fmt.Fprintf(p.d.stdin, "%s %s %d %s\n", cmd, p.id, n, a)
	p.d.mu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-ch:
		if r.Error != "" {
			t.Fatalf("browser: %s: %s", cmd, r.Error)
		}
		return r.Value
	case <-p.d.done:
		t.Fatalf("the browser driver stopped during %s:\n%s", cmd, p.d.stderr.String())
	case <-time.After(90 * time.Second):
		t.Fatalf("browser: no answer to %s after 90 s", cmd)
	}
	return nil
}

// Eval evaluates the JavaScript expression js in the page (a promise is
// awaited) and decodes its value, which must be JSON, into v.
func (p *Page) Eval(t testing.TB, js string, v any) {
	t.Helper()
	raw := p.call(t, "eval", js)
	if v == nil {
		return
	}
	if len(raw) == 0 {
		raw = json.RawMessage("null")
	}
	if err := json.Unmarshal(raw, v); err != nil {
		t.Fatalf("browser: eval %q: %v (value %s)", js, err, raw)
	}
}

// Screenshot writes a PNG of the whole page to path.
func (p *Page) Screenshot(t testing.TB, path string) {
	t.Helper()
	abs, err := filepath.Abs(path)
	if err != nil {
		t.Fatal(err)
	}
	p.call(t, "shot", abs)
}
