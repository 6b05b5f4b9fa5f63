package hub

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/corralhq/corral/client"
	"github.com/corralhq/corral/internal/fdcount"
	"github.com/corralhq/corral/internal/testkit"
	"github.com/corralhq/corral/limit"
	"github.com/corralhq/corral/wire"
)

// forcedStage is an Overload policy held in one limit.Stage, with the
// stage semantics of limit.Shedder: each stage rejects or severs what the
// stages below it do, plus its own.
type forcedStage struct {
	mu    sync.Mutex
	stage limit.Stage
	retry time.Duration
}

func (f *forcedStage) set(s limit.Stage) {
	f.mu.Lock()
	f.stage = s
	f.mu.Unlock()
}

func (f *forcedStage) get() limit.Stage {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.stage
}

func (f *forcedStage) AdmitAt(p limit.Priority, _ time.Time) limit.Decision {
	st := f.get()
	rejects := (p == limit.P2 && st >= limit.StageRejectP2) || (p == limit.P1 && st >= limit.StageRejectP1) || (p == limit.P0 && st >= limit.StageLifeboat)
	if rejects {
		return limit.Decision{Stage: st, RetryAfter: f.retry}
	}
	return limit.Decision{Admit: true, Stage: st}
}

func (f *forcedStage) SeverQuotaAt(open limit.Counts, _ time.Time) limit.Counts {
	st := f.get()
	var q limit.Counts
	if st >= limit.StageSeverP2 {
		q[limit.P2] = open[limit.P2]
	}
	if st >= limit.StageSeverP1 {
		q[limit.P1] = open[limit.P1]
	}
	return q
}

func (f *forcedStage) RetryWindowAt(limit.Priority, time.Time) limit.Retry {
	return limit.Retry{After: f.retry}
}

func TestSheddingStages(t *testing.T) {
	tests := []struct {
		stage    limit.Stage
		rejected [3]bool // new sessions of P0, P1, P2 rejected with 1013
		severed  [3]bool // open sessions of P0, P1, P2 severed with 1001
	}{
		{limit.StageNormal, [3]bool{}, [3]bool{}},
		{limit.StageRejectP2, [3]bool{false, false, true}, [3]bool{}},
		{limit.StageSeverP2, [3]bool{false, false, true}, [3]bool{false, false, true}},
		{limit.StageRejectP1, [3]bool{false, true, true}, [3]bool{false, false, true}},
		{limit.StageSeverP1, [3]bool{false, true, true}, [3]bool{false, true, true}},
		{limit.StageLifeboat, [3]bool{true, true, true}, [3]bool{false, true, true}},
	}
	prios := []client.Priority{client.PriorityP0, client.PriorityP1, client.PriorityP2}
	for _, tc := range tests {
		t.Run(tc.stage.String(), func(t *testing.T) {
			policy := &forcedStage{retry: 3 * time.Second}
			th := startHub(t, func(_ *Config, o *Options) { o.Overload = policy })
			tok := token(t, tokenOpts{prio: 0})
			var open []*client.Client
			for i, p := range prios {
				addr := th.wsAddr()
				if i == 1 {
					addr = th.grpcAddr()
				}
				open = append(open, dialClient(t, client.Config{Addrs: []string{addr}, Token: tok, Priority: p, ReconnectMin: time.Hour, ReconnectMax: time.Hour}))
			}
			policy.set(tc.stage)

			// New sessions.
			for i, p := range prios {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				c, err := client.Dial(ctx, client.Config{Addrs: []string{th.grpcAddr()}, Token: tok, Priority: p})
				cancel()
				if !tc.rejected[i] {
					if err != nil {
						t.Fatalf("new P%d rejected: %v", i, err)
					}
					_ = c.Close()
					continue
				}
				var cl wire.Close
				if !errors.As(err, &cl) || cl.Code != wire.CloseTryAgainLater || cl.RetryAfter != 3*time.Second {
					t.Fatalf("new P%d: %v, want close 1013 with a 3s hint", i, err)
				}
			}

			// Open sessions.
			nsevered := 0
			for i, c := range open {
				if !tc.severed[i] {
					continue
				}
				nsevered++
				e := nextEvent(t, c, client.EventDisconnected)
				if e.Close.Code != wire.CloseGoingAway || e.Close.RetryAfter != 3*time.Second {
					t.Fatalf("severed P%d closed with %+v, want 1001 with a 3s hint", i, e.Close)
				}
			}
			testkit.WaitFor(t, 15*time.Second, "severed sessions to leave", func() bool { return th.Sessions() == len(open)-nsevered })
			for i, c := range open {
				if !tc.severed[i] && c.Addr() == "" {
					t.Errorf("P%d session was cut", i)
				}
				if got := th.metric("corral_hub_shed_total", "action", "sever", "priority", priorityLabel(i)); (got > 0) != tc.severed[i] {
					t.Errorf("P%d severed %v times", i, got)
				}
			}
		})
	}
}

// TestShedderLifeboat drives a real limit.Shedder: a heap at its ceiling is
// a resource emergency, the stage jumps to lifeboat, new sessions of every
// priority are turned away with 1013 and a retry hint.
func TestShedderLifeboat(t *testing.T) {
	clk := testkit.NewClock(time.Now())
	sh, err := limit.NewShedder(limit.ShedderConfig{Clock: clk, Resources: limit.ResourceConfig{MaxHeap: 1 << 30}})
	if err != nil {
		t.Fatal(err)
	}
	th := startHub(t, func(_ *Config, o *Options) { o.Overload = sh; o.Now = clk.Now })
	tok := token(t, tokenOpts{prio: 0})
	dialClient(t, client.Config{Addrs: []string{th.wsAddr()}, Token: tok, Priority: client.PriorityP0})
	sh.ObserveResources(1<<30, 0)
	clk.Advance(2 * time.Second)
	if st := sh.EvaluateAt(clk.Now()); st != limit.StageLifeboat {
		t.Fatalf("stage %v, want lifeboat", st)
	}
	for _, p := range []client.Priority{client.PriorityP0, client.PriorityP2} {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_, err := client.Dial(ctx, client.Config{Addrs: []string{th.wsAddr()}, Token: tok, Priority: p})
		cancel()
		var cl wire.Close
		if !errors.As(err, &cl) || cl.Code != wire.CloseTryAgainLater || cl.RetryAfter <= 0 {
			t.Fatalf("new P%d in lifeboat: %v, want 1013 with a hint", p.Rank(), err)
		}
	}
}

// TestPublishLimiter: with a fixed limit of one publish in flight, the
// reserve kept for higher priorities leaves no slot to P2 publishes, which
// get 1013 with a hint, while P0 publishes go through.
func TestPublishLimiter(t *testing.T) {
	fixed, err := limit.NewFixed(1)
	if err != nil {
		t.Fatal(err)
	}
	th := startHub(t, func(c *Config, _ *Options) {
		c.Overload.Enabled = true
		c.Overload.Publish = limit.LimiterConfig{Limit: fixed}
	})
	ctx := context.Background()
	c := dialClient(t, client.Config{Addrs: []string{th.grpcAddr()}, Token: token(t, tokenOpts{prio: 0}), Priority: client.PriorityP0})
	if _, err := c.Publish(ctx, "x", client.PriorityP0, []byte("p0"), ""); err != nil {
		t.Fatalf("P0 publish: %v", err)
	}
	_, err = c.Publish(ctx, "x", client.PriorityP2, []byte("p2"), "")
	var cl wire.Close
	if !errors.As(err, &cl) || cl.Code != wire.CloseTryAgainLater || cl.RetryAfter <= 0 {
		t.Fatalf("P2 publish with no P2 slot: %v, want 1013 with a hint", err)
	}
}

// TestLatencyStagesAreOptIn: by default the hub's Shedder moves on its
// heap and descriptors only, and handshake latency (a herd's own queue in
// a storm) raises no stage and refuses nothing; with
// overload.latency_stages it does. Every handshake here is over the 1 ns
// target.
func TestLatencyStagesAreOptIn(t *testing.T) {
	tok := token(t, tokenOpts{})
	for _, on := range []bool{false, true} {
		th := startHub(t, func(c *Config, _ *Options) {
			c.Overload.Enabled, c.Overload.LatencyStages = true, on
			c.Overload.Shedder = limit.ShedderConfig{Target: time.Nanosecond, MinSamples: 1, EvalInterval: time.Millisecond, RiseDwell: time.Nanosecond}
		})
		refused := 0
		for range 10 {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			c, err := client.Dial(ctx, client.Config{Addrs: []string{th.wsAddr()}, Token: tok})
			cancel()
			var cl wire.Close
			switch {
			case errors.As(err, &cl) && cl.Code == wire.CloseTryAgainLater:
				refused++
			case err != nil:
				t.Fatal(err)
			default:
				_ = c.Close()
			}
			time.Sleep(2 * time.Millisecond) // an evaluation between handshakes
		}
		st := th.Stats().Stage
		if on && st == limit.StageNormal && refused == 0 {
			t.Errorf("latency_stages on: stage normal and nothing refused after 10 handshakes over the target")
		}
		if !on && (st != limit.StageNormal || refused > 0) {
			t.Errorf("latency_stages off: stage %v, %d of 10 refused; want normal, none", st, refused)
		}
	}
}

// fdRecorder is an embedder's Overload (a Shedder underneath) that keeps
// the descriptor counts the hub feeds it.
type fdRecorder struct {
	*limit.Shedder
	fds atomic.Int64
}

func (r *fdRecorder) ObserveResources(heap uint64, fds int) {
	r.fds.Store(int64(fds))
	r.Shedder.ObserveResources(heap, fds)
}

// TestResourcesReachThePolicy: the hub counts its open descriptors for a
// policy that can use them, an embedder's own or a Shedder with
// resources.max_fds (a ceiling of 1 is a resource emergency: lifeboat);
// a Shedder without the ceiling is not given them (the count costs about
// 0.5 us a descriptor, internal/fdcount).
func TestResourcesReachThePolicy(t *testing.T) {
	if _, ok := fdcount.Open(); !ok {
		t.Skip("no /proc/self/fd here")
	}
	t.Run("an embedder's policy", func(t *testing.T) {
		sh, err := limit.NewShedder(limit.ShedderConfig{})
		if err != nil {
			t.Fatal(err)
		}
		rec := &fdRecorder{Shedder: sh}
		startHub(t, func(_ *Config, o *Options) { o.Overload = rec })
		testkit.WaitFor(t, 10*time.Second, "the policy to learn the descriptors", func() bool { return rec.fds.Load() > 0 })
	})
	t.Run("a Shedder with max_fds", func(t *testing.T) {
		th := startHub(t, func(c *Config, _ *Options) {
			c.Overload.Enabled = true
			c.Overload.Shedder.Resources.MaxFDs = 1
		})
		testkit.WaitFor(t, 15*time.Second, "lifeboat", func() bool {
			return th.metric("corral_hub_overload_stage") == float64(limit.StageLifeboat)
		})
	})
	t.Run("a Shedder without max_fds", func(t *testing.T) {
		th := startHub(t, func(c *Config, _ *Options) { c.Overload.Enabled = true })
		if th.countFDs {
			t.Error("the hub counts its descriptors for a Shedder without a ceiling")
		}
	})
}

// TestSeverableFollowsTheSessions: the open sessions the severing loop
// gives the policy (Hub.severable) are the welcomed sessions not closing,
// by priority, as clients arrive and leave and as the hub closes one
// (whose client comes back: counted out once, in again once).
func TestSeverableFollowsTheSessions(t *testing.T) {
	th := startHub(t, nil)
	listed := func() limit.Counts {
		var c limit.Counts
		for _, s := range th.snapshotSessions() {
			if s.helloDone.Load() && !s.isClosing() {
				c[s.rank]++
			}
		}
		return c
	}
	expect := func(what string, want limit.Counts) {
		t.Helper()
		testkit.WaitFor(t, 15*time.Second, what, func() bool { return th.severable.Load() == want && listed() == want })
	}
	tok := token(t, tokenOpts{prio: 0})
	var cs []*client.Client
	for _, p := range []client.Priority{client.PriorityP0, client.PriorityP1, client.PriorityP1, client.PriorityP2} {
		cs = append(cs, dialClient(t, client.Config{Addrs: []string{th.wsAddr()}, Token: tok, Priority: p}))
	}
	expect("1 P0, 2 P1, 1 P2", limit.Counts{1, 2, 1})
	_ = cs[3].Close()
	expect("the P2 gone", limit.Counts{1, 2, 0})
	opened := th.opened.Load()
	var closed *session
	for _, s := range th.snapshotSessions() {
		if s.rank == 1 {
			closed = s
			s.close(wire.Close{Code: wire.CloseGoingAway, Text: "test", RetryAfter: time.Millisecond}, true)
			s.close(wire.Close{Code: wire.CloseGoingAway, Text: "again"}, true)
			break
		}
	}
	if closed == nil || !closed.isClosing() {
		t.Fatal("no P1 session closed")
	}
	testkit.WaitFor(t, 15*time.Second, "the P1 client back", func() bool { return th.opened.Load() > opened })
	expect("the closed P1 back", limit.Counts{1, 2, 0})
	for _, c := range cs[:3] {
		_ = c.Close()
	}
	expect("none", limit.Counts{})
}
