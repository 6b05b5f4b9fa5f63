package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/corralhq/corral/kraken"
	"github.com/corralhq/corral/scenario"
)

// storm is the kraken run of a `corral up`: at most one at a time.
type storm struct {
	mu  sync.Mutex
	cur *stormRun // the running or the last run; nil before the first
}

// stormRun is one kraken run and what the dashboard shows of it.
type stormRun struct {
	cancel context.CancelFunc
	done   chan struct{}

	mu   sync.Mutex
	view StormView
}

// StormView is the storm part of the dashboard's JSON: kraken's own
// progress counts (its progress lines, every second), then its result.
type StormView struct {
	// Scenario is the scenario's name, File the file it came from.
	Scenario string `json:"scenario"`
	File     string `json:"file"`
	// Running is true until the run has ended (by itself, or stopped).
	Running bool `json:"running"`
	// Devices is the run's population; Held the sessions it holds now.
	Devices int   `json:"devices"`
	Held    int64 `json:"held"`
	// Attempts, Failures: connection attempts and failed ones so far;
	// Recovering: devices between a lost session and the next Welcome.
	Attempts   int64 `json:"attempts"`
	Failures   int64 `json:"failures"`
	Recovering int64 `json:"recovering"`
	Published  int64 `json:"published"`
	Delivered  int64 `json:"delivered"`
	// Clock is kraken's clock ("t=12.0s") or phase ("warm-up").
	Clock string `json:"clock"`
	// Stopped is why the run ended (kraken's Result.Stopped) and Error
	// the error that ended it, if any.
	Stopped string `json:"stopped,omitempty"`
	Error   string `json:"error,omitempty"`
}

// errStormRunning refuses a second storm.
var errStormRunning = errors.New("up: a storm is running: stop it first")

// start loads the scenario at path and runs it against the edges.
func (s *storm) start(u *up, path string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cur != nil && s.cur.running() {
		return errStormRunning
	}
	sc, err := scenario.Load(path)
	if err != nil {
		return err
	}
	r := &stormRun{done: make(chan struct{}), view: StormView{Scenario: sc.Name, File: path, Running: true, Clock: "starting"}}
	ttl := sc.Duration + time.Hour
	// Publishes go to the first hub that is neither killed nor paused.
	publish := ""
	for i, h := range u.fleet.Hubs() {
		if st, _ := u.fleet.HubState(i); st == "up" && publish == "" {
			publish = "http://" + h.Addr().String()
		}
	}
	if publish == "" {
		return errors.New("up: no hub is up to publish through")
	}
	cfg := kraken.Config{
		Targets:    u.fleet.EdgeURLs(),
		PublishURL: publish,
		APIKey:     u.fleet.APIKey(),
		Token: func(tenant string, rank int) (string, error) {
			return u.fleet.Token(tenant, []string{">"}, rank, ttl)
		},
		Progress:      &progressParser{update: r.update},
		ProgressEvery: u.every,
		Logger:        u.log.With("part", "kraken"),
	}
	k, err := kraken.New(sc, cfg)
	if err != nil {
		return err
	}
	r.view.Devices = k.Devices()
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	s.cur = r
	go func() {
		defer close(r.done)
		defer cancel()
		res, err := k.Run(ctx)
		r.mu.Lock()
		defer r.mu.Unlock()
		r.view.Running = false
		switch {
		case err != nil:
			r.view.Error = err.Error()
			u.log.Error("storm failed", "scenario", sc.Name, "err", err)
		case res != nil:
			r.view.Stopped = res.Stopped
			r.view.Held, r.view.Attempts = res.Held, res.Attempts
			// The terminal's end of what the dashboard shows live.
			u.log.Info("storm ended", "scenario", sc.Name, "stopped", res.Stopped, "held", res.Held, "devices", r.view.Devices, "attempts", res.Attempts)
		}
	}()
	u.log.Info("storm started", "scenario", sc.Name, "devices", k.Devices())
	return nil
}

// stop cancels the running storm; false when none runs.
func (s *storm) stop() bool {
	s.mu.Lock()
	r := s.cur
	s.mu.Unlock()
	if r == nil || !r.running() {
		return false
	}
	r.cancel()
	return true
}

// stopAndWait stops the running storm and waits until it has closed its
// sessions.
func (s *storm) stopAndWait() {
	s.mu.Lock()
	r := s.cur
	s.mu.Unlock()
	if r != nil {
		r.cancel()
		<-r.done
	}
}

// view is the storm's state for the dashboard; nil before the first.
func (s *storm) view() *StormView {
	s.mu.Lock()
	r := s.cur
	s.mu.Unlock()
	if r == nil {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	v := r.view
	return &v
}

func (r *stormRun) running() bool {
	select {
	case <-r.done:
		return false
	default:
		return true
	}
}

// update takes a parsed progress line.
func (r *stormRun) update(p progress) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.view.Running {
		return
	}
	r.view.Clock, r.view.Held, r.view.Attempts, r.view.Failures = p.clock, p.held, p.attempts, p.failures
	r.view.Recovering, r.view.Published, r.view.Delivered = p.recovering, p.published, p.delivered
}

// progress is one of kraken's progress lines ("kraken: t=3.0s held
// 150/200 attempts 300 failures 2 recovering 0 published 40 delivered
// 4000").
type progress struct {
	clock                                                      string
	held, attempts, failures, recovering, published, delivered int64
}

// progressParser is the io.Writer kraken writes its progress lines to:
// it parses each whole line and hands it to update.
type progressParser struct {
	update func(progress)
	buf    []byte
}

func (p *progressParser) Write(b []byte) (int, error) {
	p.buf = append(p.buf, b...)
	for {
		i := bytes.IndexByte(p.buf, '\n')
		if i < 0 {
			return len(b), nil
		}
		if pr, ok := parseProgress(string(p.buf[:i])); ok {
			p.update(pr)
		}
		p.buf = p.buf[i+1:]
	}
}

// parseProgress reads a progress line; false when it is not one.
func parseProgress(line string) (progress, bool) {
	f := strings.Fields(line)
	if len(f) < 3 || f[0] != "kraken:" {
		return progress{}, false
	}
	p := progress{clock: f[1]}
	n := 0
	for i := 2; i+1 < len(f); i += 2 {
		v := f[i+1]
		if f[i] == "held" {
			v, _, _ = strings.Cut(v, "/")
		}
		x, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return progress{}, false
		}
		switch f[i] {
		case "held":
			p.held = x
		case "attempts":
			p.attempts = x
		case "failures":
			p.failures = x
		case "recovering":
			p.recovering = x
		case "published":
			p.published = x
		case "delivered":
			p.delivered = x
		default:
			continue
		}
		n++
	}
	return p, n > 0
}

// String is the view in one line, for logs.
func (v StormView) String() string {
	return fmt.Sprintf("%s held %d/%d attempts %d", v.Scenario, v.Held, v.Devices, v.Attempts)
}
