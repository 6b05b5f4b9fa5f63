package kraken

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/corralhq/corral/internal/natsutil"
	"github.com/corralhq/corral/scenario"
)

// Split spreads a run over several agent processes, past one process's
// file limit and past one machine. The zero value runs one local agent
// per DevicesPerAgent devices.
type Split struct {
	// Agents is the number of agent processes; 0: as many as the devices
	// need at DevicesPerAgent each (at least 1).
	Agents int
	// DevicesPerAgent sizes Agents when it is 0. Default 18,000 (the file
	// limit here is 20,000).
	DevicesPerAgent int
	// Remote is how many of the Agents are started by hand (corral kraken
	// agent --nats URL on other machines) and join over NATS; the others
	// are started here with Command.
	Remote int
	// Command returns the command line of a local agent joining run on
	// the NATS server at natsURL (corral kraken agent --nats URL --run
	// RUN). Required when some agents are local. The coordinator starts
	// it, kills it when the run ends, and on Linux has the kernel kill it
	// if the coordinator dies.
	Command func(natsURL, run string) *exec.Cmd
	// NATS is the URL of an external NATS server; empty starts an
	// embedded one listening on NATSListen.
	NATS string
	// NATSListen is the client address of the embedded server (other
	// machines' agents join there). Default 127.0.0.1:0 (a free port).
	NATSListen string
	// JoinTimeout bounds the time for every agent to join and check its
	// part. Default 30s.
	JoinTimeout time.Duration
	// Silence is how long an agent may send nothing before the run fails
	// naming it (and how long an agent waits on a silent coordinator).
	// Default 10s, at least 4 progress periods.
	Silence time.Duration
}

func (s Split) withDefaults(every time.Duration) Split {
	if s.DevicesPerAgent <= 0 {
		s.DevicesPerAgent = 18_000
	}
	if s.NATSListen == "" {
		s.NATSListen = "127.0.0.1:0"
	}
	if s.JoinTimeout <= 0 {
		s.JoinTimeout = 30 * time.Second
	}
	if s.Silence <= 0 {
		s.Silence = 10 * time.Second
	}
	s.Silence = max(s.Silence, 4*every)
	return s
}

// Coordinator runs a scenario over several agent processes and merges
// their results exactly. Create it with NewCoordinator (which checks
// everything and does no I/O), then call Run once. It is not safe for
// concurrent use.
type Coordinator struct {
	sc          *scenario.Scenario
	cfg         Config
	split       Split
	pl          *plan
	agents      int
	fileTargets bool
	ca          []byte // Config.CAFile's PEM, sent to the agents
	ran         bool
	parts       []*Result
	runID       string
}

// Devices returns how many devices a scenario's population is at its
// scale (initial plus arrivals).
func Devices(sc *scenario.Scenario) int {
	c := *sc
	c.WithDefaults()
	n := scaled(c.Population.Initial, c.Scale)
	for _, a := range c.Traffic.Arrivals {
		n += scaled(a.Devices, c.Scale)
	}
	return n
}

// AgentsFor returns the number of agents a run of n devices needs at
// perAgent devices each (at least 1).
func AgentsFor(n, perAgent int) int { return max(1, (n+perAgent-1)/max(perAgent, 1)) }

// NewCoordinator checks the scenario, the configuration and the split
// as New does for one process (each agent's share against this process's
// file limit) and returns the run.
func NewCoordinator(sc *scenario.Scenario, cfg Config, split Split) (*Coordinator, error) {
	cfg, fileTargets := cfg.withTarget(sc)
	if err := cfg.validate(!fileTargets); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	split = split.withDefaults(cfg.ProgressEvery)
	agents := split.Agents
	if agents <= 0 {
		agents = AgentsFor(Devices(sc), split.DevicesPerAgent)
	}
	var errs []error
	if split.Remote < 0 || split.Remote > agents {
		errs = append(errs, fmt.Errorf("kraken: %d remote agents of %d", split.Remote, agents))
	}
	if split.Remote < agents && split.Command == nil {
		errs = append(errs, errors.New("kraken: no command to start local agents with"))
	}
	if cfg.Resolve != nil || cfg.AtEnd != nil {
		errs = append(errs, errors.New("kraken: Config.Resolve and Config.AtEnd run in one process only; a split run's agents resolve through Resolver"))
	}
	if len(sc.Traffic.Poison) > 0 {
		errs = append(errs, fmt.Errorf("kraken: %w", sc.Locate(scenario.Errorf("traffic.poison", "a poison tenant runs in one process only (its kills follow its sessions' Welcomes): run it with --agents 1"))))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	pl, err := newPlan(sc, cfg, fileTargets, part{0, agents})
	if err != nil {
		return nil, err
	}
	_, ca, err := loadCA(cfg.CAFile, nil)
	if err != nil {
		return nil, err
	}
	return &Coordinator{sc: sc, cfg: cfg, split: split, pl: pl, agents: agents, fileTargets: fileTargets, ca: ca}, nil
}

// Agents returns the number of agent processes of the run.
func (c *Coordinator) Agents() int { return c.agents }

// Parts returns each agent's own Result, by agent number, once Run has
// returned the merged one.
func (c *Coordinator) Parts() []*Result { return c.parts }

// agentState is what the coordinator knows of one agent.
type agentState struct {
	name     string
	pid      int
	joined   bool
	ready    bool
	warm     bool
	lastSeen time.Time
	last     statusMsg
	result   *Result
	raw      []byte
}

func (a *agentState) label(i int) string { return fmt.Sprintf("agent %d (%s)", i, a.name) }

// child is a local agent process.
type child struct {
	cmd  *exec.Cmd
	exit chan error // its Wait's error, once
}

// Run starts the agents (the local ones by Command; the remote ones are
// waited for), hands out the parts, starts the scenario's clock when
// every agent is warm, relays the stop conditions that hold over the run,
// fires the mass closes, and merges every agent's Result. A dead agent
// (exited, or silent for Split.Silence) fails the run with an error that
// names it; every phase is bounded in time. The local agents are killed
// before Run returns.
func (c *Coordinator) Run(ctx context.Context) (*Result, error) {
	if c.ran {
		return nil, errors.New("kraken: Run called twice")
	}
	c.ran = true
	var id [6]byte
	_, _ = rand.Read(id[:]) // crypto/rand.Read does not fail
	c.runID = hex.EncodeToString(id[:])
	asg, err := c.assignmentBase()
	if err != nil {
		return nil, err
	}
	ncfg := natsutil.Config{URL: c.split.NATS, ConnectTimeout: c.split.JoinTimeout}
	if c.split.NATS == "" {
		ncfg.Listen, ncfg.ServerName = c.split.NATSListen, "kraken-"+c.runID
	}
	conn, err := natsutil.Connect(ctx, ncfg, "kraken-coordinator", c.cfg.Logger)
	if err != nil {
		return nil, fmt.Errorf("kraken: %w", err)
	}
	defer conn.Close()
	url := c.split.NATS
	if url == "" {
		url = conn.Server().ClientURL()
	}
	s := &session{c: c, nc: conn.NC, asg: asg, agents: make([]agentState, c.agents), byPID: map[int]int{},
		origins: &runner{cfg: c.cfg, pl: c.pl, rec: &recorder{res: newResult(c.pl.name)}, ended: make(chan struct{})}}
	s.origins.rec.res.Agents = 0
	s.origins.rec.res.Storms = c.pl.stormResults()
	res, err := s.run(ctx, url)
	s.killChildren()
	return res, err
}

// assignmentBase is what every agent's assignment holds.
func (c *Coordinator) assignmentBase() (assignment, error) {
	data := c.sc.Source()
	if data == nil {
		return assignment{}, errors.New("kraken: a split run sends its agents the scenario file: decode the scenario with scenario.Load or Decode")
	}
	var err error
	a := assignment{
		Run: c.runID, Agents: c.agents, File: c.sc.File(), Scenario: data,
		Targets: c.cfg.Targets, Regions: c.cfg.Regions, Resolver: c.cfg.Resolver, PublishURL: c.cfg.PublishURL, APIKey: c.cfg.APIKey,
		Sources: c.cfg.Sources.String(), Pollers: c.cfg.Pollers,
		Every: c.cfg.ProgressEvery, Settle: c.cfg.Settle, Silence: c.split.Silence, CA: c.ca,
	}
	for t := range c.pl.tenants {
		var toks [3]string
		for rank := range 3 {
			if toks[rank], err = c.cfg.Token("t"+strconv.Itoa(t), rank); err != nil {
				return assignment{}, fmt.Errorf("kraken: a token for tenant t%d, P%d: %w", t, rank, err)
			}
		}
		a.Tokens = append(a.Tokens, toks)
	}
	return a, nil
}

// session is a Coordinator's run while it goes on.
type session struct {
	c   *Coordinator
	nc  *nats.Conn
	asg assignment

	agents []agentState // the loop's own

	mu    sync.Mutex // guards joins and byPID (the join handler writes them)
	joins []joinRequest
	byPID map[int]int

	// origins fires the storms that act on the target's origins (mass
	// closes, kills, freezes, unhealthy spells) as one process's run
	// does, and counts their failures in its result, merged with the
	// agents'.
	origins     *runner
	restoreOnce sync.Once

	children []*child
	stopSent bool
}

func (s *session) ctl(kind, reason string) {
	b, _ := json.Marshal(ctlMsg{Kind: kind, Reason: reason}) // plain types: cannot fail
	_ = s.nc.Publish(subjectCtl(s.c.runID), b)
	_ = s.nc.Flush()
}

// onJoin hands the next part to an agent that asks for one.
func (s *session) onJoin(msg *nats.Msg) {
	var req joinRequest
	if json.Unmarshal(msg.Data, &req) != nil {
		return
	}
	s.mu.Lock()
	a := s.asg
	a.Agent = len(s.joins)
	switch n := (part{a.Agent, s.c.agents}).count(s.c.pl.devices); {
	case len(s.joins) >= s.c.agents:
		a = assignment{Refused: fmt.Sprintf("run %s has its %d agents", s.c.runID, s.c.agents)}
	case req.MaxDevices < n:
		a = assignment{Refused: fmt.Sprintf("its file limit holds %d devices; its part of the run is %d", req.MaxDevices, n)}
	default:
		s.joins = append(s.joins, req)
		s.byPID[req.PID] = a.Agent
	}
	s.mu.Unlock()
	b, err := json.Marshal(a)
	if err != nil {
		return
	}
	_ = msg.Respond(b)
}

// fail ends the run with err: every agent is told to stop.
func (s *session) fail(err error) (*Result, error) {
	s.ctl(ctlAbort, err.Error())
	return nil, err
}

func (s *session) run(ctx context.Context, url string) (*Result, error) {
	c, pl := s.c, s.c.pl
	msgs := make(chan *nats.Msg, 4096)
	st, err := s.nc.ChanSubscribe(subjectStatus(c.runID), msgs)
	if err != nil {
		return nil, fmt.Errorf("kraken: %w", err)
	}
	defer func() { _ = st.Unsubscribe() }()
	for _, subj := range []string{subjectJoin(c.runID), subjectJoinAny} {
		sub, err := s.nc.Subscribe(subj, s.onJoin)
		if err != nil {
			return nil, fmt.Errorf("kraken: %w", err)
		}
		defer func() { _ = sub.Unsubscribe() }()
	}
	if err := s.nc.Flush(); err != nil {
		return nil, fmt.Errorf("kraken: %w", err)
	}
	local := c.agents - c.split.Remote
	s.line(fmt.Sprintf("kraken: run %s over %d agents (%d started here); others join with: corral kraken agent --nats %s --run %s", c.runID, c.agents, local, url, c.runID))
	exits := make(chan childExit, local)
	for range local {
		cmd := c.split.Command(url, c.runID)
		if err := startAgent(cmd); err != nil {
			return s.fail(fmt.Errorf("kraken: starting a local agent: %w", err))
		}
		ch := &child{cmd: cmd, exit: make(chan error, 1)}
		s.children = append(s.children, ch)
		go func() {
			err := cmd.Wait()
			ch.exit <- err
			exits <- childExit{pid: cmd.Process.Pid, err: err}
		}()
	}
	// Phases: join and ready, warm-up, the scenario's clock, the results.
	phase := "join"
	deadline := time.Now().Add(c.split.JoinTimeout)
	var t0, warmFrom time.Time
	var massWG sync.WaitGroup
	mctx, mcancel := context.WithCancel(ctx)
	defer func() {
		mcancel()
		massWG.Wait()
		s.restore()
	}()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	lastTick, nextLine := time.Now(), time.Now()
	for {
		select {
		case m := <-msgs:
			var sm statusMsg
			if json.Unmarshal(m.Data, &sm) != nil || sm.Agent < 0 || sm.Agent >= c.agents {
				continue
			}
			s.takeJoins()
			a := &s.agents[sm.Agent]
			if !a.joined {
				continue
			}
			a.lastSeen = time.Now()
			switch sm.Kind {
			case stFailed:
				return s.fail(fmt.Errorf("kraken: %s failed: %s", a.label(sm.Agent), sm.Error))
			case stReady:
				a.ready = true
			case stWarm:
				a.warm = true
			case stStatus:
				a.last = sm
			case stResult:
				var r Result
				if err := json.Unmarshal(sm.Result, &r); err != nil {
					return s.fail(fmt.Errorf("kraken: %s sent a result that does not decode: %v", a.label(sm.Agent), err))
				}
				a.result, a.raw = &r, sm.Result
			}
		case e := <-exits:
			s.mu.Lock()
			i, ok := s.byPID[e.pid]
			s.mu.Unlock()
			if e.err == nil || (ok && s.agents[i].result != nil) {
				continue // done, or its result is on its way (else it falls silent)
			}
			who := fmt.Sprintf("local agent process %d", e.pid)
			if ok {
				who = s.agents[i].label(i)
			}
			return s.fail(fmt.Errorf("kraken: %s exited before its result: %v", who, exitReason(e.err)))
		case <-tick.C:
		}
		s.takeJoins()
		now := time.Now()
		if now.Sub(lastTick) >= time.Second {
			s.ctl(ctlTick, "")
			lastTick = now
		}
		if ctx.Err() != nil && !s.stopSent && phase != "join" {
			s.ctl(ctlStop, "context")
			s.stopSent = true
		}
		if ctx.Err() != nil && phase == "join" {
			return s.fail(fmt.Errorf("kraken: %w", ctx.Err()))
		}
		// A joined agent silent for too long is dead.
		for i := range s.agents {
			a := &s.agents[i]
			if a.joined && a.result == nil && now.Sub(a.lastSeen) > c.split.Silence {
				return s.fail(fmt.Errorf("kraken: %s sent nothing for %v: dead or cut off", a.label(i), now.Sub(a.lastSeen).Round(time.Millisecond)))
			}
		}
		if now.After(deadline) {
			return s.fail(s.lateError(phase))
		}
		switch phase {
		case "join":
			if s.all(func(a *agentState) bool { return a.ready }) {
				s.ctl(ctlGo, "")
				phase, deadline = "warm-up", now.Add(pl.duration+c.split.Silence)
				warmFrom = now
			}
		case "warm-up":
			if s.all(func(a *agentState) bool { return a.warm }) {
				s.ctl(ctlStart, "")
				t0, phase = now, "run"
				s.line(fmt.Sprintf("kraken: warm-up of %d devices over %d agents took %.3fs", pl.initial, c.agents, now.Sub(warmFrom).Seconds()))
				deadline = t0.Add(pl.duration + c.cfg.Settle + c.split.Silence + 10*time.Second)
				for i, e := range pl.storms {
					if e.kind == "drop" || e.kind == "move" {
						continue // the agents' own
					}
					massWG.Go(func() {
						if sleepUntil(mctx, t0.Add(e.at)) {
							s.origins.fireOriginStorm(mctx, i, e)
						}
					})
				}
			}
		case "run":
			if s.stopSent || !now.Before(t0.Add(pl.duration)) {
				s.restore() // the agents stop driving: the fleet is left as it was found
			}
			if !s.stopSent {
				if why := s.stopCondition(); why != "" {
					s.ctl(ctlStop, why)
					s.stopSent = true
				}
			}
			if s.all(func(a *agentState) bool { return a.result != nil }) {
				mcancel()
				massWG.Wait()
				s.restore()
				return s.merge()
			}
		}
		if c.cfg.Progress != nil && !now.Before(nextLine) {
			s.progress(now, phase, t0)
			nextLine = now.Add(c.cfg.ProgressEvery)
		}
	}
}

type childExit struct {
	pid int
	err error
}

func exitReason(err error) string {
	if err == nil {
		return "exit status 0"
	}
	return err.Error()
}

// takeJoins brings the agents that joined since into the loop's view.
func (s *session) takeJoins() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, j := range s.joins {
		if a := &s.agents[i]; !a.joined {
			a.joined, a.name, a.pid, a.lastSeen = true, j.Name, j.PID, time.Now()
		}
	}
}

func (s *session) all(f func(*agentState) bool) bool {
	for i := range s.agents {
		if !s.agents[i].joined || !f(&s.agents[i]) {
			return false
		}
	}
	return true
}

// lateError names the agents that did not reach the end of phase in time.
func (s *session) lateError(phase string) error {
	var late []string
	for i := range s.agents {
		a := &s.agents[i]
		switch {
		case !a.joined:
			late = append(late, fmt.Sprintf("agent %d (not joined)", i))
		case phase == "join" && !a.ready, phase == "warm-up" && !a.warm, phase == "run" && a.result == nil:
			late = append(late, a.label(i))
		}
	}
	return fmt.Errorf("kraken: the run's %s phase did not end in time: waiting for %v", phase, late)
}

// stopCondition is a stop condition of the scenario that holds over every
// agent, or "".
func (s *session) stopCondition() string {
	stop := s.c.pl.stop
	var attempts int64
	recovered := true
	for i := range s.agents {
		attempts += s.agents[i].last.Attempts
		recovered = recovered && s.agents[i].last.Recovered
	}
	switch {
	case stop.MaxAttempts > 0 && attempts >= stop.MaxAttempts:
		return "max_attempts"
	case stop.OnRecovery && recovered:
		return "on_recovery"
	}
	return ""
}

// merge adds every agent's result, in agent order.
func (s *session) merge() (*Result, error) {
	c := s.c
	c.parts = nil
	var merged *Result
	for i := range s.agents {
		a := &s.agents[i]
		c.parts = append(c.parts, a.result)
		var r Result // a copy to merge into, the part kept as sent
		if err := json.Unmarshal(a.raw, &r); err != nil {
			return nil, fmt.Errorf("kraken: %s: %w", a.label(i), err)
		}
		if merged == nil {
			merged = &r
			continue
		}
		if err := merged.Merge(&r); err != nil {
			return nil, fmt.Errorf("kraken: %s: %w", a.label(i), err)
		}
	}
	s.origins.rec.mu.Lock()
	defer s.origins.rec.mu.Unlock()
	if err := merged.Merge(s.origins.rec.res); err != nil {
		return nil, err
	}
	return merged, nil
}

// restore ends the freezes and unhealthy spells still on, once.
func (s *session) restore() {
	s.restoreOnce.Do(func() {
		close(s.origins.ended)
		for _, err := range s.origins.restores.all() {
			s.c.cfg.Logger.Warn("kraken: ending a storm failed", "err", err)
		}
	})
}

func (s *session) line(l string) {
	if s.c.cfg.Progress != nil {
		fmt.Fprintln(s.c.cfg.Progress, l)
	}
}

// progress writes the run's progress line: the agents' counts added.
func (s *session) progress(now time.Time, phase string, t0 time.Time) {
	var m statusMsg
	for i := range s.agents {
		l := s.agents[i].last
		m.Held += l.Held
		m.Attempts += l.Attempts
		m.Failures += l.Failures
		m.Recovering += l.Recovering
		m.Published += l.Published
		m.Delivered += l.Delivered
	}
	clock := phase
	if phase == "run" {
		clock = fmt.Sprintf("t=%.1fs", now.Sub(t0).Seconds())
	}
	s.line(fmt.Sprintf("kraken: %s held %d/%d attempts %d failures %d recovering %d published %d delivered %d agents %d",
		clock, m.Held, s.c.pl.devices, m.Attempts, m.Failures, m.Recovering, m.Published, m.Delivered, s.c.agents))
}

// killChildren kills the local agents still running and waits for them.
func (s *session) killChildren() {
	for _, ch := range s.children {
		select {
		case <-ch.exit:
			continue
		default:
		}
		_ = ch.cmd.Process.Kill()
		select {
		case <-ch.exit:
		case <-time.After(10 * time.Second):
			s.c.cfg.Logger.Warn("kraken: a local agent did not exit after SIGKILL", "pid", ch.cmd.Process.Pid)
		}
	}
	s.children = nil
}

// startAgent starts a local agent's command: killed with this process
// (on Linux), inheriting no descriptor but its standard ones.
func startAgent(cmd *exec.Cmd) error {
	setDeathSignal(cmd)
	closeOnExecAll()
	return cmd.Start()
}
