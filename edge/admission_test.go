package edge

import (
	"errors"
	"io"
	"math"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/corralhq/corral/internal/fdcount"
	"github.com/corralhq/corral/internal/testkit"
	"github.com/corralhq/corral/limit"
	"github.com/corralhq/corral/wire"
	"github.com/corralhq/corral/wire/corralv1"
)

// welcomed opens a raw gRPC session of priority rank and waits for its
// Welcome.
func welcomed(t *testing.T, te *testEdge, rank int) *rawGRPC {
	t.Helper()
	r := dialRawGRPC(t, te)
	h := helloFrame(token(t, tokenOpts{}))
	h.GetHello().Priority = wire.PriorityOfRank(rank)
	r.send(t, h)
	f, err := r.stream.Recv()
	if err != nil || f.GetWelcome() == nil {
		t.Fatalf("P%d: first frame %v, %v; want a Welcome", rank, f, err)
	}
	return r
}

// TestLightLoadIsNeverRefused: with admission on (the limiters' defaults,
// as in examples/edge.yaml), a lightly loaded edge admits every handshake
// and every publish, one after the other, far beyond the limiters' initial
// limits.
func TestLightLoadIsNeverRefused(t *testing.T) {
	th := startHub(t, nil)
	te := startEdge(t, func(c *Config) {
		c.Admission.Enabled = true
		// The limiters are under test, not this machine's latency: a
		// handshake above the Shedder's 100 ms target (-race on a busy
		// machine) would rightly shed P2.
		c.Admission.Shedder.Target = time.Minute
	}, th)
	for i := range 60 {
		r := welcomed(t, te, i%3)
		for j := range 3 {
			r.send(t, &corralv1.ClientFrame{Id: uint64(10 + j), Frame: &corralv1.ClientFrame_Publish{Publish: &corralv1.Publish{Channel: "light", Data: []byte("x")}}})
			f, err := r.stream.Recv()
			if err != nil || f.GetPublished() == nil {
				t.Fatalf("session %d publish %d: %v %v, want Published", i, j, f, err)
			}
		}
		r.cancel()
	}
	for _, a := range []string{"reject", "reject_handshake", "reject_publish", "reject_connection", "sever"} {
		if n := te.metric("corral_edge_shed_total", "action", a); n != 0 {
			t.Errorf("shed %s: %v, want 0", a, n)
		}
	}
}

// raise feeds the Shedder slow handshakes until it reaches stage.
func raise(t *testing.T, te *testEdge, stage limit.Stage) {
	t.Helper()
	sh := te.adm.shedder
	testkit.WaitFor(t, 10*time.Second, "stage "+stage.String(), func() bool {
		for range 5 {
			sh.Observe(time.Second)
		}
		return sh.EvaluateAt(time.Now()) >= stage
	})
}

// TestOverloadShedsByPriority: as the Shedder's stage rises, a new P2 is
// refused with 1013 and a hint while P0 is admitted, open P2 sessions are
// severed with GoAway(retry_after) then 1001 while P0 stays, and in the
// lifeboat stage a WebSocket upgrade gets 503 with Retry-After and a gRPC
// stream Unavailable with grpc-retry-pushback-ms.
func TestOverloadShedsByPriority(t *testing.T) {
	th := startHub(t, nil)
	te := startEdge(t, func(c *Config) {
		c.Admission.Enabled = true
		c.Admission.Shedder = limit.ShedderConfig{Target: 10 * time.Millisecond, EvalInterval: time.Millisecond, MinSamples: 1,
			RiseDwell: time.Millisecond, FallDwell: time.Hour, MaxFallDwell: time.Hour, SeverRate: 1000,
			// Latency alone reaches the lifeboat here, to test its refusals
			// (the edge's default stops latency at sever-p1).
			LatencyCeiling: limit.StageLifeboat}
	}, th)
	p2 := welcomed(t, te, 2)
	p0 := welcomed(t, te, 0)

	raise(t, te, limit.StageRejectP2)
	r := dialRawGRPC(t, te)
	h := helloFrame(token(t, tokenOpts{}))
	h.GetHello().Priority = corralv1.Priority_PRIORITY_P2
	r.send(t, h)
	_, err := r.end(t)
	if c := wire.CloseFromStatus(err); c.Code != wire.CloseTryAgainLater || c.RetryAfter <= 0 {
		t.Fatalf("new P2 in %v: %v, want 1013 with a retry hint", te.adm.shedder.Stage(), c)
	}
	welcomed(t, te, 0).cancel()

	raise(t, te, limit.StageSeverP2)
	// Severing goes on while the evaluations find the overload: keep
	// feeding it until the P2 session is severed.
	testkit.WaitFor(t, 10*time.Second, "the P2 session severed", func() bool {
		for range 5 {
			te.adm.shedder.Observe(time.Second)
		}
		time.Sleep(2 * time.Millisecond)
		return te.severOnce() > 0
	})
	frames, err := p2.end(t)
	var g *corralv1.GoAway
	for _, f := range frames {
		if f.GetGoAway() != nil {
			g = f.GetGoAway()
		}
	}
	if g == nil || g.GetRetryAfterMs() == 0 || wire.CloseFromStatus(err).Code != wire.CloseGoingAway {
		t.Fatalf("severed P2: frames %v, end %v; want GoAway with a hint, then 1001", frames, err)
	}
	p0.send(t, &corralv1.ClientFrame{Id: 9, Frame: &corralv1.ClientFrame_Ping{Ping: &corralv1.Ping{}}})
	if f, err := p0.stream.Recv(); err != nil || f.GetPong() == nil {
		t.Fatalf("P0 after the severing: %v %v, want it open", f, err)
	}

	raise(t, te, limit.StageLifeboat)
	resp, err := http.Get("http://" + te.Addr().String() + "/v1/ws")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if ra, _ := strconv.Atoi(resp.Header.Get("Retry-After")); resp.StatusCode != http.StatusServiceUnavailable || ra < 1 {
		t.Fatalf("upgrade in the lifeboat: %s, Retry-After %q; want 503 with a hint", resp.Status, resp.Header.Get("Retry-After"))
	}
	r = dialRawGRPC(t, te)
	_, err = r.stream.Recv()
	if status.Code(err) != codes.Unavailable || len(r.stream.Trailer().Get("grpc-retry-pushback-ms")) != 1 {
		t.Fatalf("gRPC stream in the lifeboat: %v, trailer %v; want Unavailable with grpc-retry-pushback-ms", err, r.stream.Trailer())
	}
	// P0 sessions already open are untouched by latency: only a resource
	// emergency severs them.
	p0.send(t, &corralv1.ClientFrame{Id: 10, Frame: &corralv1.ClientFrame_Ping{Ping: &corralv1.Ping{}}})
	if f, err := p0.stream.Recv(); err != nil || f.GetPong() == nil {
		t.Fatalf("P0 in the lifeboat: %v %v, want it open", f, err)
	}
}

// TestOriginSlownessNeverRefusesP0: the edge's handshake latency is its
// origins'; five minutes of handshakes ten times over the Shedder's
// target take its stage to sever-p1 and no further, and a new P0 is
// admitted throughout. A configured latency_ceiling of lifeboat is kept.
func TestOriginSlownessNeverRefusesP0(t *testing.T) {
	slowFor := func(a *admission) (top limit.Stage, p0Refused int) {
		now := time.Now()
		for range 600 {
			now = now.Add(500 * time.Millisecond)
			for range 20 {
				a.observeHandshake(time.Second)
			}
			top = max(top, a.shedder.EvaluateAt(now))
			if _, ok := a.admitSession(wire.Rank(corralv1.Priority_PRIORITY_P0), now); !ok {
				p0Refused++
			}
		}
		return top, p0Refused
	}
	var def admission
	if err := def.init(AdmissionConfig{Enabled: true, LatencyStages: true}, 0); err != nil {
		t.Fatal(err)
	}
	if top, n := slowFor(&def); top != limit.StageSeverP1 || n != 0 {
		t.Errorf("a slow origin took the edge to %v and refused %d P0; want sever-p1 at most and none", top, n)
	}
	var boat admission
	if err := boat.init(AdmissionConfig{Enabled: true, LatencyStages: true, Shedder: limit.ShedderConfig{LatencyCeiling: limit.StageLifeboat}}, 0); err != nil {
		t.Fatal(err)
	}
	if top, n := slowFor(&boat); top != limit.StageLifeboat || n == 0 {
		t.Errorf("latency_ceiling lifeboat: reached %v, refused %d P0; want the lifeboat", top, n)
	}
}

// herdAtTheLimit holds the only handshake slot of an edge, sends n Hellos
// (each followed at once by a Subscribe, before its Welcome), then frees
// the slot, and returns each session's first two frames or its end.
func herdAtTheLimit(t *testing.T, n int, wait time.Duration) (te *testEdge, first, second []*corralv1.ServerFrame, ends []error) {
	th := startHub(t, nil)
	te = startEdge(t, func(c *Config) {
		c.Admission.Enabled = true
		one, err := limit.NewFixed(1)
		if err != nil {
			t.Fatal(err)
		}
		c.Admission.Handshake.Limit = one
		c.Admission.Handshake.Queue.MaxWait = wait
	}, th)
	held, w := te.adm.handshake.AcquireOrWait(limit.P0, nil)
	if w != limit.Acquired {
		t.Fatalf("holding the slot: %v", w)
	}
	rs := make([]*rawGRPC, n)
	for i := range rs {
		rs[i] = dialRawGRPC(t, te)
		h := helloFrame(token(t, tokenOpts{}))
		h.GetHello().Priority = wire.PriorityOfRank(2 - i%3)
		rs[i].send(t, h)
		// Without a waiting room the edge may have refused the Hello and
		// ended the stream already: gRPC's Send then says io.EOF, and the
		// stream's status (the refusal) is Recv's to read below.
		sub := &corralv1.ClientFrame{Id: 2, Frame: &corralv1.ClientFrame_Subscribe{Subscribe: &corralv1.Subscribe{Channel: "early"}}}
		if err := rs[i].stream.Send(sub); err != nil && !errors.Is(err, io.EOF) {
			t.Fatalf("send: %v", err)
		}
	}
	if wait > 0 {
		testkit.WaitFor(t, 10*time.Second, "every Hello waiting", func() bool { return te.adm.handshake.Waiting() == n })
	}
	held.Success()
	first, second, ends = make([]*corralv1.ServerFrame, n), make([]*corralv1.ServerFrame, n), make([]error, n)
	for i, r := range rs {
		if first[i], ends[i] = r.stream.Recv(); ends[i] == nil {
			second[i], ends[i] = r.stream.Recv()
		}
	}
	return te, first, second, ends
}

// TestHerdWaitsForHandshakeSlots: Hellos that find the handshake limit
// full wait in its waiting room and are all welcomed once slots free up,
// none refused, and a frame a device sent before its Welcome reaches the
// origin after its Hello (the Subscribe is answered). Without the waiting
// room the same Hellos are refused with 1013, a hint and its retry window.
func TestHerdWaitsForHandshakeSlots(t *testing.T) {
	const n = 30
	te, first, second, ends := herdAtTheLimit(t, n, 0)
	for i := range n {
		if first[i].GetWelcome() == nil || second[i].GetSubscribed() == nil {
			t.Fatalf("session %d: %v then %v (%v); want Welcome, then the early Subscribe answered", i, first[i], second[i], ends[i])
		}
	}
	if q, r := te.metric("corral_edge_shed_total", "action", "queue_handshake"), te.metric("corral_edge_shed_total", "action", "reject_handshake"); q != n || r != 0 {
		t.Errorf("Hellos queued %v, refused %v; want %d and 0", q, r, n)
	}

	te, first, _, ends = herdAtTheLimit(t, n, -1)
	refused, hinted := 0, 0.0
	for i := range n {
		c := wire.CloseFromStatus(ends[i])
		if first[i].GetWelcome() == nil && c.Code == wire.CloseTryAgainLater && c.RetryAfter > 0 {
			refused++
			hinted += c.RetryAfter.Seconds()
			// The hint comes with its window (the Limiter's, spread 0.1),
			// which the device draws within.
			if c.RetryWithin <= 0 || c.RetryWithin > c.RetryAfter/5 {
				t.Errorf("session %d refused with %v and a window of %v; want the place's window, about a tenth of the hint", i, c.RetryAfter, c.RetryWithin)
			}
		}
	}
	// P0's reserved slot (TryAcquirePriority's) lets one P0 past the
	// held limit.
	if rej := te.metric("corral_edge_shed_total", "action", "reject_handshake"); refused < n-1 || rej != float64(refused) {
		t.Errorf("without a waiting room: %d of %d refused with 1013 and a hint (%v counted); want all but P0's reserved slot", refused, n, rej)
	}
	// Every hint is in the histogram of hints, as the devices got it
	// (the wire carries milliseconds).
	const hints = "corral_edge_handshake_retry_after_seconds"
	if c, sum := te.metric(hints), histogramSum(te.reg, hints); c != float64(refused) || math.Abs(sum-hinted) > float64(refused)*0.001 {
		t.Errorf("%s: %v hints summing to %.3f s; want the %d the devices got, %.3f s", hints, c, sum, refused, hinted)
	}
}

// TestResourcesReachTheShedder: with admission.shedder.resources.max_fds
// the edge counts its open descriptors for the Shedder (a ceiling of 1 is
// a resource emergency: lifeboat); without it, it does not count them
// (the count costs about 0.5 us a descriptor, internal/fdcount).
func TestResourcesReachTheShedder(t *testing.T) {
	if _, ok := fdcount.Open(); !ok {
		t.Skip("no /proc/self/fd here")
	}
	for _, tc := range []struct {
		name   string
		maxFDs int
		want   limit.Stage
	}{
		{"max_fds 1: lifeboat", 1, limit.StageLifeboat},
		{"no max_fds: not counted, normal", 0, limit.StageNormal},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := testkit.NewClock(time.Now())
			var a admission
			cfg := AdmissionConfig{Enabled: true}
			cfg.Shedder.Clock = clk
			cfg.Shedder.Resources.MaxFDs = tc.maxFDs
			if err := a.init(cfg, 10*time.Second); err != nil {
				t.Fatal(err)
			}
			if a.countFDs != (tc.maxFDs > 0) {
				t.Errorf("countFDs %v with max_fds %d", a.countFDs, tc.maxFDs)
			}
			a.observeResources()
			clk.Advance(2 * time.Second)
			if st := a.shedder.EvaluateAt(clk.Now()); st != tc.want {
				t.Errorf("stage %v, want %v", st, tc.want)
			}
		})
	}
}

// TestSeverableFollowsTheSessions: the open sessions the severing loop
// gives the Shedder (Edge.severable) are the welcomed sessions not
// closing, by priority, as devices arrive, leave and are closed by the
// edge, each counted out once.
func TestSeverableFollowsTheSessions(t *testing.T) {
	th := startHub(t, nil)
	te := startEdge(t, nil, th)
	listed := func() limit.Counts {
		var c limit.Counts
		for _, s := range te.snapshotSessions() {
			if s.state.Load() == stateWelcomed && !s.isClosing() {
				c[s.rank]++
			}
		}
		return c
	}
	expect := func(what string, want limit.Counts) {
		t.Helper()
		testkit.WaitFor(t, 10*time.Second, what, func() bool { return te.severable.Load() == want && listed() == want })
	}
	var rs []*rawGRPC
	for _, rank := range []int{0, 1, 1, 2} {
		rs = append(rs, welcomed(t, te, rank))
	}
	expect("1 P0, 2 P1, 1 P2", limit.Counts{1, 2, 1})
	rs[3].cancel() // the P2 device leaves
	expect("the P2 gone", limit.Counts{1, 2, 0})
	for _, s := range te.snapshotSessions() {
		if s.rank == 1 {
			s.close(wire.Close{Code: wire.CloseGoingAway, Text: "test"}, true)
			s.close(wire.Close{Code: wire.CloseGoingAway, Text: "again"}, true)
			break
		}
	}
	expect("a P1 closed by the edge, counted out once", limit.Counts{1, 1, 0})
	rs[0].cancel()
	rs[1].cancel()
	rs[2].cancel()
	expect("none", limit.Counts{})
}

// TestMaxSessions: at max_sessions a new connection is refused before its
// Hello, a WebSocket upgrade with 503 and a Retry-After within
// drain.retry_after and twice it, a gRPC stream with Unavailable and
// grpc-retry-pushback-ms, each counted; once a session leaves, a new one
// is welcomed.
func TestMaxSessions(t *testing.T) {
	th := startHub(t, nil)
	te := startEdge(t, func(c *Config) {
		c.MaxSessions = 2
		c.Drain.RetryAfter = 2 * time.Second
	}, th)
	a := welcomed(t, te, 1)
	welcomed(t, te, 1)

	resp, err := http.Get("http://" + te.Addr().String() + "/v1/ws")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if ra, _ := strconv.Atoi(resp.Header.Get("Retry-After")); resp.StatusCode != http.StatusServiceUnavailable || ra < 2 || ra > 4 {
		t.Fatalf("upgrade at max_sessions: %s, Retry-After %q; want 503 with 2 to 4 s", resp.Status, resp.Header.Get("Retry-After"))
	}
	r := dialRawGRPC(t, te)
	_, err = r.stream.Recv()
	pushback := r.stream.Trailer().Get("grpc-retry-pushback-ms")
	if ms, _ := strconv.Atoi(strings.Join(pushback, "")); status.Code(err) != codes.Unavailable || ms < 2000 || ms > 4000 {
		t.Fatalf("gRPC stream at max_sessions: %v, pushback %v; want Unavailable with 2000 to 4000 ms", err, pushback)
	}
	if n := te.metric("corral_edge_connections_at_capacity_total"); n != 2 {
		t.Errorf("corral_edge_connections_at_capacity_total %v, want 2", n)
	}
	if te.Sessions() != 2 {
		t.Errorf("%d sessions, want the 2 welcomed", te.Sessions())
	}

	a.cancel()
	testkit.WaitFor(t, 10*time.Second, "the session to leave", func() bool { return te.Sessions() == 1 })
	welcomed(t, te, 1)
}
