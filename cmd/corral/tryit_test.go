package main

import (
	"context"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/corralhq/corral/internal/testkit"
)

// proc is a corral command line run in process, in the background or not.
type proc struct {
	name        string
	stdout, err *testkit.SyncBuffer
	cancel      context.CancelFunc
	done        chan int
}

// start runs args in process until ctx ends or the command returns.
func start(args []string) *proc {
	ctx, cancel := context.WithCancel(context.Background())
	p := &proc{name: args[0], stdout: &testkit.SyncBuffer{}, err: &testkit.SyncBuffer{}, cancel: cancel, done: make(chan int, 1)}
	go func() { p.done <- run(ctx, args, p.stdout, p.err) }()
	return p
}

// wait returns the exit code, failing after 30 s.
func (p *proc) wait(t *testing.T) int {
	t.Helper()
	select {
	case code := <-p.done:
		p.done <- code
		return code
	case <-time.After(30 * time.Second):
		t.Fatalf("corral %s did not return: %s", p.name, p.err.String())
		return -1
	}
}

// exited reports whether the command has returned.
func (p *proc) exited() bool {
	select {
	case code := <-p.done:
		p.done <- code
		return true
	default:
		return false
	}
}

// shellWords splits a README command line: words separated by spaces,
// single-quoted words taken literally, $NAME expanded from the
// environment.
func shellWords(t *testing.T, line string) []string {
	t.Helper()
	var words []string
	var w strings.Builder
	in, quoted := false, false
	for i := 0; i < len(line); i++ {
		c := line[i]
		switch {
		case quoted && c == '\'':
			quoted = false
		case quoted:
			w.WriteByte(c)
		case c == '\'':
			quoted, in = true, true
		case c == ' ':
			if in {
				words = append(words, os.ExpandEnv(w.String()))
				w.Reset()
				in = false
			}
		default:
			w.WriteByte(c)
			in = true
		}
	}
	if quoted {
		t.Fatalf("unclosed quote in %q", line)
	}
	if in {
		words = append(words, os.ExpandEnv(w.String()))
	}
	return words
}

// readmeTryIt returns the lines of the ```sh block under "## Try it" in
// README.md (of the working directory).
func readmeTryIt(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(b), "\n## Try it\n")
	if !ok {
		t.Fatal("README.md has no \"## Try it\" section")
	}
	_, rest, ok = strings.Cut(rest, "```sh\n")
	if !ok {
		t.Fatal("the Try it section has no ```sh block")
	}
	block, _, _ := strings.Cut(rest, "```")
	return strings.Split(strings.TrimSpace(block), "\n")
}

// TestReadmeTryIt runs the "Try it" lines of README.md in order, with the
// corral commands in process: a hub from examples/hub.yaml (on a free
// port in place of 7400, its gRPC and admin ports and its store moved by
// environment), the exported token, a background `corral sub`, a
// `corral pub`, and checks that each "# X prints: Y" line holds ("..."
// stands for any text). It waits where a person typing does: for the hub
// to be up before the next line, and for the subscriber to have
// subscribed before the publish.
func TestReadmeTryIt(t *testing.T) {
	t.Chdir("../..") // the README's lines run from the repository root
	addr := "127.0.0.1:" + freePort(t)
	t.Setenv("CORRAL_HUB_GRPC_LISTEN", "127.0.0.1:0")
	t.Setenv("CORRAL_HUB_ADMIN_ADDR", "127.0.0.1:0")
	t.Setenv("CORRAL_HUB_LISTEN", addr)
	t.Setenv("CORRAL_HUB_NATS_STORE_DIR", t.TempDir())
	procs := map[string]*proc{} // by subcommand, the last one started
	var background []*proc
	defer func() {
		for _, p := range background {
			p.cancel()
			if code := p.wait(t); code != 0 {
				t.Errorf("corral %s (background) exit %d: %s", p.name, code, p.err.String())
			}
		}
	}()
	for _, line := range readmeTryIt(t) {
		line = strings.ReplaceAll(line, "127.0.0.1:7400", addr)
		if w, ok := strings.CutPrefix(line, "# "); ok {
			name, want, ok := strings.Cut(w, " prints: ")
			if !ok {
				continue
			}
			p := procs[name]
			if p == nil {
				t.Fatalf("%q: no corral %s ran before", line, name)
			}
			re := regexp.MustCompile(strings.ReplaceAll(regexp.QuoteMeta(want), `\.\.\.`, `.*`))
			testkit.WaitFor(t, 20*time.Second, "corral "+name+" printing "+want, func() bool {
				return re.MatchString(p.stdout.String()) || p.exited()
			})
			if !re.MatchString(p.stdout.String()) {
				t.Fatalf("corral %s printed %q (stderr %q), the README says it prints %q", name, p.stdout.String(), p.err.String(), want)
			}
			continue
		}
		switch {
		case line == "go install ./cmd/corral":
			// The commands run in process: this binary is the one built.
		case strings.HasPrefix(line, "export "):
			name, value, _ := strings.Cut(strings.TrimPrefix(line, "export "), "=")
			if inner, ok := strings.CutPrefix(value, "$("); ok {
				words := shellWords(t, strings.TrimSuffix(inner, ")"))
				if words[0] != "corral" {
					t.Fatalf("%q: only corral runs here", line)
				}
				code, out, errOut := corral(t, words[1:]...)
				if code != 0 {
					t.Fatalf("%q: exit %d: %s", line, code, errOut)
				}
				value = strings.TrimSpace(out)
			}
			t.Setenv(name, value)
		case strings.HasPrefix(line, "corral "):
			bg := strings.HasSuffix(line, " &")
			words := shellWords(t, strings.TrimSuffix(line, " &"))
			p := start(words[1:])
			procs[p.name] = p
			if !bg {
				if code := p.wait(t); code != 0 {
					t.Fatalf("%q: exit %d: %s", line, code, p.err.String())
				}
				continue
			}
			background = append(background, p)
			var up string
			switch p.name {
			case "hub":
				up = `"hub up"`
			case "sub":
				up = "corral: subscribed to"
			}
			testkit.WaitFor(t, 30*time.Second, "corral "+p.name+" up", func() bool {
				return strings.Contains(p.err.String(), up) || p.exited()
			})
			if p.exited() {
				t.Fatalf("%q: exit %d: %s", line, p.wait(t), p.err.String())
			}
		default:
			t.Fatalf("README Try it: a line this test does not know how to run: %q", line)
		}
	}
}
