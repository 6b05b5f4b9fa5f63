package kraken

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/corralhq/corral/internal/natsutil"
	"github.com/corralhq/corral/scenario"
)

// AgentConfig is how an agent process reaches the coordinator of a split
// run (corral kraken agent). The zero value is not valid: NATS is
// required.
type AgentConfig struct {
	// NATS is the URL of the NATS server the coordinator listens on
	// (nats://host:4222). Required.
	NATS string
	// Run is the id of the run to join; empty joins any run waiting for
	// agents.
	Run string
	// Name labels the agent in the coordinator's messages. Default
	// host:pid.
	Name string
	// Sources, when valid, replaces the coordinator's source range for
	// this agent's connections (an agent on another machine).
	Sources netip.Prefix
	// JoinTimeout bounds the search for a run to join. Default 30s.
	JoinTimeout time.Duration
	// Logger receives the agent's logs; nil discards them.
	Logger *slog.Logger
}

// RunAgent joins a split run over NATS, drives the part of the run's
// devices it is given, sends its Result to the coordinator and returns.
// It returns an error when no run takes it within JoinTimeout, when its
// part cannot run here, or when the run is aborted (the coordinator's
// order, or the coordinator silent for longer than the run allows).
func RunAgent(ctx context.Context, ac AgentConfig) error {
	if ac.NATS == "" {
		return errors.New("kraken: an agent needs the coordinator's NATS URL")
	}
	if ac.JoinTimeout <= 0 {
		ac.JoinTimeout = 30 * time.Second
	}
	if ac.Logger == nil {
		ac.Logger = slog.New(slog.DiscardHandler)
	}
	if ac.Name == "" {
		host, _ := os.Hostname()
		ac.Name = host + ":" + strconv.Itoa(os.Getpid())
	}
	conn, err := natsutil.Connect(ctx, natsutil.Config{URL: ac.NATS, ConnectTimeout: ac.JoinTimeout}, "kraken-agent "+ac.Name, ac.Logger)
	if err != nil {
		return fmt.Errorf("kraken: %w", err)
	}
	defer conn.Close()
	nc := conn.NC
	a, err := join(ctx, nc, ac)
	if err != nil {
		return err
	}
	rctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	l := &agentLink{nc: nc, a: a, cancel: cancel, start: make(chan struct{}), goCh: make(chan struct{}), done: make(chan struct{})}
	l.lastCtl.Store(time.Now().UnixNano())
	sub, err := nc.Subscribe(subjectCtl(a.Run), l.onCtl)
	if err != nil {
		return fmt.Errorf("kraken: %w", err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	k, err := newAgentKraken(a, ac)
	if err != nil {
		l.send(statusMsg{Kind: stFailed, Error: err.Error()})
		_ = nc.Flush()
		return err
	}
	k.link = l
	l.send(statusMsg{Kind: stReady})
	go l.watch(rctx)
	select {
	case <-l.goCh:
	case <-rctx.Done():
		return fmt.Errorf("kraken: agent %d: %w", a.Agent, context.Cause(rctx))
	}
	res, err := k.Run(rctx)
	close(l.done)
	if err != nil {
		l.send(statusMsg{Kind: stFailed, Error: err.Error()})
		_ = nc.Flush()
		return err
	}
	if cause := context.Cause(rctx); cause != nil && ctx.Err() == nil {
		return fmt.Errorf("kraken: agent %d: %w", a.Agent, cause) // aborted: the coordinator wants no result
	}
	b, err := json.Marshal(res)
	if err != nil {
		return fmt.Errorf("kraken: %w", err)
	}
	l.send(statusMsg{Kind: stResult, Result: b})
	if err := nc.FlushTimeout(a.Silence); err != nil {
		return fmt.Errorf("kraken: agent %d: sending the result: %w", a.Agent, err)
	}
	return nil
}

// join asks for a part of a run until one answers or JoinTimeout passes.
func join(ctx context.Context, nc *nats.Conn, ac AgentConfig) (*assignment, error) {
	subject := subjectJoinAny
	if ac.Run != "" {
		subject = subjectJoin(ac.Run)
	}
	req, _ := json.Marshal(joinRequest{Name: ac.Name, PID: os.Getpid(), MaxDevices: maxDevicesHere()}) // plain types: cannot fail
	deadline := time.Now().Add(ac.JoinTimeout)
	for {
		msg, err := nc.Request(subject, req, time.Second)
		if err == nil {
			var a assignment
			if err := json.Unmarshal(msg.Data, &a); err != nil {
				return nil, fmt.Errorf("kraken: the coordinator's answer: %w", err)
			}
			if a.Refused != "" {
				return nil, fmt.Errorf("kraken: the run refused this agent: %s", a.Refused)
			}
			return &a, nil
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("kraken: no run took this agent on %s within %v (%v)", subject, ac.JoinTimeout, err)
		}
		sleepCtx(ctx, 200*time.Millisecond)
		if ctx.Err() != nil {
			return nil, fmt.Errorf("kraken: %w", ctx.Err())
		}
	}
}

// newAgentKraken checks the agent's part of the run and returns it, as
// New does for a whole run.
func newAgentKraken(a *assignment, ac AgentConfig) (*Kraken, error) {
	sc, err := scenario.Decode(a.File, a.Scenario)
	if err != nil {
		return nil, err
	}
	if a.Agents < 1 || a.Agent < 0 || a.Agent >= a.Agents || len(a.Tokens) == 0 {
		return nil, fmt.Errorf("kraken: a bad assignment (agent %d of %d, %d tenants' tokens)", a.Agent, a.Agents, len(a.Tokens))
	}
	cfg := Config{
		Targets: a.Targets, Resolver: a.Resolver, PublishURL: a.PublishURL, APIKey: a.APIKey,
		Token: func(tenant string, rank int) (string, error) {
			t, err := strconv.Atoi(tenant[1:])
			if err != nil || t < 0 || t >= len(a.Tokens) || rank < 0 || rank > 2 {
				return "", fmt.Errorf("kraken: no token for tenant %s, P%d in the assignment", tenant, rank)
			}
			return a.Tokens[t][rank], nil
		},
		Regions: a.Regions, caPEM: a.CA,
		// The coordinator acts on the origins (mass closes, kills,
		// freezes, unhealthy spells: it holds the way to reach them); an
		// agent only marks the storm.
		MassClose: func(context.Context, int) error { return nil },
		Kill:      func(context.Context, KillRequest) (func() error, error) { return nil, nil },
		Unhealthy: func(context.Context, int) (func() error, error) { return nil, nil },
		Pollers:   a.Pollers, ProgressEvery: a.Every, Settle: a.Settle, Logger: ac.Logger,
	}
	if a.Sources != "" {
		if cfg.Sources, err = netip.ParsePrefix(a.Sources); err != nil {
			return nil, fmt.Errorf("kraken: the assignment's sources %q: %w", a.Sources, err)
		}
	}
	if ac.Sources.IsValid() {
		cfg.Sources = ac.Sources
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	pl, err := newPlan(sc, cfg, false, part{a.Agent, a.Agents})
	if err != nil {
		return nil, err
	}
	return &Kraken{cfg: cfg, pl: pl}, nil
}

// agentLink is an agent's side of a split run while it runs: the
// coordinator's orders, the agent's reports, the P0 offsets shared with
// the other agents. It is safe for concurrent use.
type agentLink struct {
	nc     *nats.Conn
	a      *assignment
	r      *runner
	cancel context.CancelCauseFunc

	goCh, start, done chan struct{}
	goOnce, startOnce sync.Once
	stop              atomic.Pointer[string]
	lastCtl           atomic.Int64 // UnixNano of the coordinator's last message

	p0Sent, p0Got atomic.Int64
	p0Final       atomic.Int64 // the publisher's count, -1 until its Done
}

func (l *agentLink) send(m statusMsg) {
	m.Agent = l.a.Agent
	b, _ := json.Marshal(m) // plain types and a marshalled result: cannot fail
	if err := l.nc.Publish(subjectStatus(l.a.Run), b); err != nil && l.r != nil {
		l.r.cfg.Logger.Warn("kraken: a report to the coordinator failed", "err", err)
	}
}

// onCtl takes an order of the coordinator.
func (l *agentLink) onCtl(msg *nats.Msg) {
	var c ctlMsg
	if json.Unmarshal(msg.Data, &c) != nil {
		return
	}
	l.lastCtl.Store(time.Now().UnixNano())
	switch c.Kind {
	case ctlGo:
		l.goOnce.Do(func() { close(l.goCh) })
	case ctlStart:
		l.startOnce.Do(func() { close(l.start) })
	case ctlStop:
		why := c.Reason
		l.stop.CompareAndSwap(nil, &why)
	case ctlAbort:
		l.cancel(fmt.Errorf("the coordinator aborted the run: %s", c.Reason))
	}
}

// watch ends the agent's run when the coordinator falls silent.
func (l *agentLink) watch(ctx context.Context) {
	t := time.NewTicker(l.a.Silence / 4)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-l.done:
			return
		case <-t.C:
			if since := time.Since(time.Unix(0, l.lastCtl.Load())); since > l.a.Silence {
				l.cancel(fmt.Errorf("the coordinator sent nothing for %v", since.Round(time.Millisecond)))
				return
			}
		}
	}
}

// attach links the run r to the coordinator: its reports start, and the
// other agents' P0 offsets feed its publisher's logs.
func (l *agentLink) attach(r *runner) {
	l.r = r
	l.p0Final.Store(-1)
	if !r.pl.part.publishes() {
		if _, err := l.nc.Subscribe(subjectP0(l.a.Run), l.onP0); err != nil {
			r.cfg.Logger.Warn("kraken: cannot follow the published P0 offsets", "err", err)
		}
	}
	go l.report()
}

// report sends the run's counts every ProgressEvery, and at once when its
// recovered state changes.
func (l *agentLink) report() {
	t := time.NewTicker(20 * time.Millisecond)
	defer t.Stop()
	var last time.Time
	was := false
	for {
		select {
		case <-l.done:
			return
		case now := <-t.C:
			rec := l.r.recovered(now)
			if rec == was && now.Sub(last) < l.r.cfg.ProgressEvery {
				continue
			}
			was, last = rec, now
			l.send(l.status(rec))
		}
	}
}

func (l *agentLink) status(recovered bool) statusMsg {
	r := l.r
	m := statusMsg{Kind: stStatus, Held: r.held.Load(), Attempts: r.attempts.Load(), Recovering: r.recovering.Load(), Recovered: recovered}
	r.rec.mu.Lock()
	for _, c := range r.rec.res.Failures {
		m.Failures += c.Total()
	}
	m.Published = r.rec.res.Messages.Published.Total()
	m.Delivered = r.rec.res.Messages.Delivered.Total()
	r.rec.mu.Unlock()
	return m
}

// warm reports the agent's warm-up done and waits for the scenario's clock
// to start (every agent warm), or for ctx.
func (l *agentLink) warm(ctx context.Context) {
	l.send(statusMsg{Kind: stWarm})
	select {
	case <-l.start:
	case <-ctx.Done():
	}
}

// stopReason is the coordinator's reason to stop, "" until it gives one.
func (l *agentLink) stopReason() string {
	if p := l.stop.Load(); p != nil {
		return *p
	}
	return ""
}

// p0Acked tells the other agents of a P0 offset the hub acknowledged.
func (l *agentLink) p0Acked(key, epoch string, offset uint64) {
	b, _ := json.Marshal(p0Msg{Key: key, Epoch: epoch, Offset: offset}) // plain types: cannot fail
	if l.nc.Publish(subjectP0(l.a.Run), b) == nil {
		l.p0Sent.Add(1)
	}
}

func (l *agentLink) onP0(msg *nats.Msg) {
	var m p0Msg
	if json.Unmarshal(msg.Data, &m) != nil {
		return
	}
	if m.Done {
		l.p0Final.Store(m.Count)
		return
	}
	l.r.pub.addP0(m.Key, m.Epoch, m.Offset)
	l.p0Got.Add(1)
}

// p0Settle, once the publishers stopped: the publishing agent sends its
// count of offsets; the others wait (until deadline) for every offset it
// sent, so that their P0 tallies are complete.
func (l *agentLink) p0Settle(deadline time.Time) {
	if l.r.pl.part.publishes() {
		b, _ := json.Marshal(p0Msg{Done: true, Count: l.p0Sent.Load()}) // plain types: cannot fail
		_ = l.nc.Publish(subjectP0(l.a.Run), b)
		_ = l.nc.FlushTimeout(time.Until(deadline))
		return
	}
	for time.Now().Before(deadline) {
		if n := l.p0Final.Load(); n >= 0 && l.p0Got.Load() >= n {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
}
