package kraken

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Origin is one origin process of this machine that the storm primitives
// act on through Processes.
type Origin struct {
	// PID is the process's id; PIDFile, when set instead, is a file
	// holding it, read each time a storm acts on the origin (a process
	// restarted by its supervisor writes its new id there).
	PID     int
	PIDFile string
	// Admin is the base URL of the origin's admin listener
	// (http://127.0.0.1:9080), whose POST /health/unhealthy and
	// /health/healthy pages (a hub's) an unhealthy storm calls.
	Admin string
	// Node is the origin's node id, as its Welcome names it (a hub's
	// node_id): a poison tenant's kill asks for the origin by it.
	Node string
}

// ParseOrigin reads an origin from "pid=N", "pidfile=FILE", "admin=URL"
// and "node=ID", comma-separated (the form of corral kraken run --origin).
func ParseOrigin(s string) (Origin, error) {
	var o Origin
	for _, kv := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || v == "" {
			return o, fmt.Errorf("kraken: origin %q: want pid=N, pidfile=FILE, admin=URL or node=ID, comma-separated", s)
		}
		switch k {
		case "pid":
			n, err := strconv.Atoi(v)
			if err != nil || n <= 0 {
				return o, fmt.Errorf("kraken: origin %q: pid %q is not a process id", s, v)
			}
			o.PID = n
		case "pidfile":
			o.PIDFile = v
		case "admin":
			if !strings.HasPrefix(v, "http://") && !strings.HasPrefix(v, "https://") {
				return o, fmt.Errorf("kraken: origin %q: admin %q: want http://host:port", s, v)
			}
			o.Admin = strings.TrimSuffix(v, "/")
		case "node":
			o.Node = v
		default:
			return o, fmt.Errorf("kraken: origin %q: unknown key %q (want pid, pidfile, admin or node)", s, k)
		}
	}
	if o.PID != 0 && o.PIDFile != "" {
		return o, fmt.Errorf("kraken: origin %q: set pid or pidfile, not both", s)
	}
	return o, nil
}

// Processes carries the storm primitives out on origin processes of this
// machine: Drain (SIGTERM: a hub drains, for Config.MassClose), Kill
// (SIGKILL, or SIGSTOP then SIGCONT, for Config.Kill) and Unhealthy (its
// admin page, for Config.Unhealthy). Each takes the first origins, in
// order, that are not gone (killed or drained) and not already in the
// state asked. It is safe for concurrent use.
type Processes struct {
	client *http.Client

	mu      sync.Mutex
	origins []Origin
	gone    []bool
	frozen  []bool
	sick    []bool
}

// NewProcesses returns the primitives on origins.
func NewProcesses(origins []Origin) *Processes {
	n := len(origins)
	return &Processes{
		client:  &http.Client{Timeout: 10 * time.Second},
		origins: origins, gone: make([]bool, n), frozen: make([]bool, n), sick: make([]bool, n),
	}
}

// Len is the number of origins (for Config.Origins).
func (p *Processes) Len() int { return len(p.origins) }

// CanSignal reports whether every origin has a process id or a pid file.
func (p *Processes) CanSignal() bool {
	for _, o := range p.origins {
		if o.PID == 0 && o.PIDFile == "" {
			return false
		}
	}
	return len(p.origins) > 0
}

// CanMarkUnhealthy reports whether every origin has an admin address.
func (p *Processes) CanMarkUnhealthy() bool {
	for _, o := range p.origins {
		if o.Admin == "" {
			return false
		}
	}
	return len(p.origins) > 0
}

// pick takes the first n origins that are not gone and not in skip,
// marking them in mark; an error when fewer are left.
func (p *Processes) pick(what string, n int, skip []bool) ([]int, error) {
	var out []int
	for i := range p.origins {
		if len(out) == n {
			break
		}
		if !p.gone[i] && (skip == nil || !skip[i]) {
			out = append(out, i)
		}
	}
	if len(out) < n {
		return nil, fmt.Errorf("kraken: %s of %d origins, but only %d of the %d are left for it", what, n, len(out), len(p.origins))
	}
	return out, nil
}

// node returns the origin whose Node is node, an error when none is or it
// is gone.
func (p *Processes) node(what, node string) ([]int, error) {
	for i, o := range p.origins {
		if o.Node != node {
			continue
		}
		if p.gone[i] {
			return nil, fmt.Errorf("kraken: %s of origin node=%s, which is gone already", what, node)
		}
		return []int{i}, nil
	}
	return nil, fmt.Errorf("kraken: %s of origin node=%s, which no origin is (give --origin ...,node=%s)", what, node, node)
}

// pid reads the process id of origin i.
func (p *Processes) pid(i int) (int, error) {
	o := p.origins[i]
	if o.PIDFile == "" {
		if o.PID == 0 {
			return 0, fmt.Errorf("kraken: origin %d has no process id (pid= or pidfile=)", i+1)
		}
		return o.PID, nil
	}
	b, err := os.ReadFile(o.PIDFile)
	if err != nil {
		return 0, fmt.Errorf("kraken: origin %d: %w", i+1, err)
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("kraken: origin %d: pid file %s holds no process id", i+1, o.PIDFile)
	}
	return n, nil
}

// signal sends sig to origin i's process.
func (p *Processes) signal(i int, sig syscall.Signal) error {
	pid, err := p.pid(i)
	if err != nil {
		return err
	}
	if err := sendSignal(pid, sig); err != nil {
		return fmt.Errorf("kraken: origin %d: %v to process %d: %w", i+1, sig, pid, err)
	}
	return nil
}

// Drain sends SIGTERM to the next n origins (a hub drains: GoAway with its
// retry hint to every session, then a close). It has Config.MassClose's
// signature.
func (p *Processes) Drain(_ context.Context, n int) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	idx, err := p.pick("a mass close", n, nil)
	if err != nil {
		return err
	}
	var errs []error
	for _, i := range idx {
		p.gone[i] = true
		errs = append(errs, p.signal(i, syscall.SIGTERM))
	}
	return errors.Join(errs...)
}

// Kill sends SIGKILL to the next k.Origins origins not frozen (or to the
// one whose Node is k.Node), or with k.Freeze SIGSTOP to them; thaw sends
// those SIGCONT. It has Config.Kill's signature.
func (p *Processes) Kill(_ context.Context, k KillRequest) (thaw func() error, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	freeze := k.Freeze
	what, sig := "a kill", syscall.SIGKILL
	if freeze {
		what, sig = "a freeze", sigStop
	}
	var idx []int
	if k.Node != "" {
		idx, err = p.node(what, k.Node)
	} else {
		idx, err = p.pick(what, k.Origins, p.frozen)
	}
	if err != nil {
		return nil, err
	}
	var errs []error
	var stopped []int
	for _, i := range idx {
		if err := p.signal(i, sig); err != nil {
			errs = append(errs, err)
			continue
		}
		if freeze {
			p.frozen[i] = true
			stopped = append(stopped, i)
		} else {
			p.gone[i] = true
		}
	}
	if !freeze || len(stopped) == 0 {
		return nil, errors.Join(errs...)
	}
	return func() error {
		p.mu.Lock()
		defer p.mu.Unlock()
		var errs []error
		for _, i := range stopped {
			p.frozen[i] = false
			errs = append(errs, p.signal(i, sigCont))
		}
		return errors.Join(errs...)
	}, errors.Join(errs...)
}

// Unhealthy posts /health/unhealthy to the admin listener of the next n
// origins not unhealthy; restore posts /health/healthy to them. It has
// Config.Unhealthy's signature.
func (p *Processes) Unhealthy(ctx context.Context, n int) (restore func() error, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	idx, err := p.pick("an unhealthy spell", n, p.sick)
	if err != nil {
		return nil, err
	}
	var errs []error
	var marked []int
	for _, i := range idx {
		if err := p.post(ctx, i, "/health/unhealthy"); err != nil {
			errs = append(errs, err)
			continue
		}
		p.sick[i] = true
		marked = append(marked, i)
	}
	if len(marked) == 0 {
		return nil, errors.Join(errs...)
	}
	return func() error {
		p.mu.Lock()
		defer p.mu.Unlock()
		var errs []error
		for _, i := range marked {
			p.sick[i] = false
			errs = append(errs, p.post(context.Background(), i, "/health/healthy"))
		}
		return errors.Join(errs...)
	}, errors.Join(errs...)
}

// post sends an empty POST to origin i's admin page path.
func (p *Processes) post(ctx context.Context, i int, path string) error {
	o := p.origins[i]
	if o.Admin == "" {
		return fmt.Errorf("kraken: origin %d has no admin address (admin=http://HOST:PORT)", i+1)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, o.Admin+path, nil)
	if err != nil {
		return fmt.Errorf("kraken: origin %d: %w", i+1, err)
	}
	res, err := p.client.Do(req)
	if err != nil {
		return fmt.Errorf("kraken: origin %d: POST %s: %w", i+1, path, err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(res.Body, 512))
	if res.StatusCode != http.StatusOK {
		return fmt.Errorf("kraken: origin %d: POST %s: %s %s", i+1, path, res.Status, strings.TrimSpace(string(body)))
	}
	return nil
}
