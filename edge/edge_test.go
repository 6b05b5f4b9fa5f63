package edge

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/corralhq/corral/client"
	"github.com/corralhq/corral/hub"
	"github.com/corralhq/corral/internal/testkit"
	"github.com/corralhq/corral/limit"
	"github.com/corralhq/corral/wire"
	"github.com/corralhq/corral/wire/corralv1"
)

// transports are the device transports every session test runs over.
var transports = []struct {
	name string
	addr func(*testEdge) string
}{
	{"ws", (*testEdge).wsAddr},
	{"grpc", (*testEdge).grpcAddr},
}

func TestSessionThroughEdge(t *testing.T) {
	th := startHub(t, func(c *hub.Config) { c.NodeID = "hub-a" })
	te := startEdge(t, nil, th)
	for _, tr := range transports {
		t.Run(tr.name, func(t *testing.T) {
			c := dialClient(t, client.Config{Addrs: []string{tr.addr(te)}})
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if _, err := c.Subscribe(ctx, "news."+tr.name); err != nil {
				t.Fatal(err)
			}
			for i := range 3 {
				if _, err := c.Publish(ctx, "news."+tr.name, client.PriorityP0, []byte("m"+strconv.Itoa(i)), ""); err != nil {
					t.Fatal(err)
				}
			}
			if got := collect(t, c, 3); strings.Join(got, ",") != "m0,m1,m2" {
				t.Fatalf("messages %v, want m0,m1,m2", got)
			}
			testkit.WaitFor(t, 5*time.Second, "the hub counts the relayed session", func() bool {
				return th.metric("corral_hub_relay_sessions", "device", tr.name) >= 1
			})
		})
	}
	// Welcome names the edge and the hub.
	r := dialRawGRPC(t, te)
	r.send(t, helloFrame(token(t, tokenOpts{})))
	f, err := r.stream.Recv()
	if err != nil {
		t.Fatal(err)
	}
	w := f.GetWelcome()
	if w == nil || w.GetNodeId() != "edge-test/hub-a" {
		t.Fatalf("first frame %v, want a Welcome of node edge-test/hub-a", f)
	}
	if got := w.GetHints().GetPingIntervalMs(); got != uint32(te.sess.PingInterval.Milliseconds()) {
		t.Errorf("ping hint %d ms, want the edge's %v", got, te.sess.PingInterval)
	}
	// Ping is answered by the edge; nothing reaches the hub. The hub
	// handles a session's frames in order: once the Subscribe sent after
	// the Ping is answered, a relayed Ping would have been counted.
	before := th.metric("corral_hub_frames_received_total", "type", "ping")
	r.send(t, &corralv1.ClientFrame{Id: 7, Frame: &corralv1.ClientFrame_Ping{Ping: &corralv1.Ping{Payload: []byte("x")}}})
	f, err = r.stream.Recv()
	if err != nil || f.GetPong() == nil || f.GetId() != 7 || string(f.GetPong().GetPayload()) != "x" {
		t.Fatalf("answer to ping: %v, %v; want Pong 7 x", f, err)
	}
	r.send(t, &corralv1.ClientFrame{Id: 8, Frame: &corralv1.ClientFrame_Subscribe{Subscribe: &corralv1.Subscribe{Channel: "after.ping"}}})
	if f, err = r.stream.Recv(); err != nil || f.GetSubscribed() == nil {
		t.Fatalf("answer to subscribe: %v, %v", f, err)
	}
	if after := th.metric("corral_hub_frames_received_total", "type", "ping"); after != before {
		t.Errorf("the hub received %v pings, want none", after-before)
	}
}

// TestResumeThroughEdge: a device that loses its session resumes through
// the edge and misses nothing.
func TestResumeThroughEdge(t *testing.T) {
	th := startHub(t, nil)
	te := startEdge(t, nil, th)
	for _, tr := range transports {
		t.Run(tr.name, func(t *testing.T) {
			ch := "resume." + tr.name
			c := dialClient(t, client.Config{Addrs: []string{tr.addr(te)}, ReconnectMin: 10 * time.Millisecond, ReconnectMax: 50 * time.Millisecond})
			ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
			defer cancel()
			if _, err := c.Subscribe(ctx, ch); err != nil {
				t.Fatal(err)
			}
			publish := func(from, n int) {
				for i := range n {
					req := hub.PublishRequest{Tenant: "acme", Channel: ch, Priority: corralv1.Priority_PRIORITY_P0, Data: []byte("m" + strconv.Itoa(from+i))}
					if _, err := th.Publish(ctx, req); err != nil {
						t.Fatal(err)
					}
				}
			}
			publish(0, 3)
			if got := collect(t, c, 3); strings.Join(got, ",") != strings.Join(seq("m", 0, 3), ",") {
				t.Fatalf("before: %v", got)
			}
			// Cut the device's session at the edge (as a drain of this
			// edge would) and publish while it is away.
			for _, s := range te.snapshotSessions() {
				s.close(wire.Close{Code: wire.CloseGoingAway, Text: "test cut"}, true)
			}
			nextEvent(t, c, client.EventDisconnected)
			publish(3, 3)
			e := nextEvent(t, c, client.EventResumed)
			if !e.Subscribed.GetRecovered() {
				t.Fatalf("resume not recovered: %v", e.Subscribed)
			}
			if got := collect(t, c, 3); strings.Join(got, ",") != strings.Join(seq("m", 3, 3), ",") {
				t.Fatalf("after the resume: %v, want m3..m5", got)
			}
		})
	}
}

// TestBoundsBeforeUpstream: every bound the hub enforces is enforced at
// the edge, with the hub's close code, and nothing reaches the hub.
func TestBoundsBeforeUpstream(t *testing.T) {
	th := startHub(t, nil)
	te := startEdge(t, func(c *Config) {
		c.Session.HandshakeTimeout = 300 * time.Millisecond
		c.Wire.MaxFrameBytes = 4096
		c.Session.MaxSubscriptions = 2
		c.Session.PublishRate, c.Session.PublishBurst = 1, 2
		c.Session.FrameRate, c.Session.FrameBurst = 1, 20
	}, th)
	tok := token(t, tokenOpts{})
	tests := []struct {
		name string
		send func(t *testing.T, r *rawGRPC)
		want wire.CloseCode // the close; 0: the session stays open (errs are Error replies)
		errs []wire.CloseCode
		// upstream is what the hub may see: no session at all ("none"),
		// or the session's Hello and no frame of the kind ("subscribe",
		// "publish").
		upstream string
	}{
		{name: "frame above max_frame_bytes", send: func(t *testing.T, r *rawGRPC) {
			r.send(t, &corralv1.ClientFrame{Frame: &corralv1.ClientFrame_Publish{Publish: &corralv1.Publish{Channel: "a", Data: make([]byte, 5000)}}})
		}, want: wire.CloseTooBig, upstream: "none"},
		{name: "subscribe before hello", send: func(t *testing.T, r *rawGRPC) {
			r.send(t, &corralv1.ClientFrame{Frame: &corralv1.ClientFrame_Subscribe{Subscribe: &corralv1.Subscribe{Channel: "a"}}})
		}, want: wire.CloseBadRequest, upstream: "none"},
		{name: "bad channel name in hello", send: func(t *testing.T, r *rawGRPC) {
			r.send(t, helloFrame(tok, "a b"))
		}, want: wire.CloseBadRequest, upstream: "none"},
		{name: "empty frame", send: func(t *testing.T, r *rawGRPC) {
			r.send(t, &corralv1.ClientFrame{})
		}, want: wire.CloseProtocolError, upstream: "none"},
		{name: "no hello within the handshake timeout", send: func(*testing.T, *rawGRPC) {}, want: wire.CloseHandshakeTimeout, upstream: "none"},
		{name: "frame flood", send: func(t *testing.T, r *rawGRPC) {
			r.send(t, helloFrame(tok))
			for range 40 {
				if r.stream.Send(&corralv1.ClientFrame{Frame: &corralv1.ClientFrame_Ack{Ack: &corralv1.Ack{Channel: "a"}}}) != nil {
					return
				}
			}
		}, want: wire.CloseRateLimited, upstream: "acks"},
		{name: "too many subscriptions", send: func(t *testing.T, r *rawGRPC) {
			r.send(t, helloFrame(tok, "s1", "s2", "s3"))
			r.send(t, &corralv1.ClientFrame{Id: 2, Frame: &corralv1.ClientFrame_Subscribe{Subscribe: &corralv1.Subscribe{Channel: "s4"}}})
		}, errs: []wire.CloseCode{wire.CloseSubscriptionLimit, wire.CloseSubscriptionLimit}, upstream: "subscribe"},
		{name: "publish flood", send: func(t *testing.T, r *rawGRPC) {
			r.send(t, helloFrame(tok))
			for i := range 4 {
				r.send(t, &corralv1.ClientFrame{Id: uint64(10 + i), Frame: &corralv1.ClientFrame_Publish{Publish: &corralv1.Publish{Channel: "p", Data: []byte("x")}}})
			}
		}, errs: []wire.CloseCode{wire.CloseRateLimited, wire.CloseRateLimited}, upstream: "publish2"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			opened := th.metric("corral_hub_sessions_opened_total")
			subs := th.metric("corral_hub_frames_received_total", "type", "subscribe")
			pubs := th.metric("corral_hub_frames_received_total", "type", "publish")
			acks := th.metric("corral_hub_frames_received_total", "type", "ack")
			hubSubs := th.metric("corral_hub_channels")
			r := dialRawGRPC(t, te)
			tc.send(t, r)
			var frames []*corralv1.ServerFrame
			var err error
			if tc.want != 0 {
				frames, err = r.end(t)
				if got := wire.CloseFromStatus(err).Code; got != tc.want {
					t.Fatalf("closed with %v (%v), want %v", got, err, tc.want)
				}
			} else {
				testkit.WaitFor(t, 5*time.Second, "the refusals", func() bool {
					for len(countErrors(frames)) < len(tc.errs) {
						f, err := r.stream.Recv()
						if err != nil {
							t.Fatalf("stream ended: %v", err)
						}
						frames = append(frames, f)
					}
					return true
				})
				if got := countErrors(frames); !equalCodes(got, tc.errs) {
					t.Fatalf("errors %v, want %v", got, tc.errs)
				}
			}
			switch tc.upstream {
			case "none":
				if d := th.metric("corral_hub_sessions_opened_total") - opened; d != 0 {
					t.Errorf("the hub opened %v sessions, want none", d)
				}
			case "subscribe":
				// The Hello's two channels went up, the third and the
				// Subscribe did not.
				testkit.WaitFor(t, 5*time.Second, "the hub's channels", func() bool { return th.metric("corral_hub_channels")-hubSubs == 2 })
				if d := th.metric("corral_hub_frames_received_total", "type", "subscribe") - subs; d != 0 {
					t.Errorf("the hub received %v Subscribe frames, want none", d)
				}
			case "acks":
				// Hello took one token of the burst of 20: 19 acks at most.
				if d := th.metric("corral_hub_frames_received_total", "type", "ack") - acks; d > 19 {
					t.Errorf("the hub received %v acks, want at most 19", d)
				}
			case "publish2":
				testkit.WaitFor(t, 5*time.Second, "the two publishes", func() bool {
					return th.metric("corral_hub_frames_received_total", "type", "publish")-pubs == 2
				})
			}
			r.cancel()
		})
	}
}

func countErrors(frames []*corralv1.ServerFrame) []wire.CloseCode {
	var out []wire.CloseCode
	for _, f := range frames {
		if e := f.GetError(); e != nil {
			out = append(out, wire.CloseCode(e.GetCode()))
		}
	}
	return out
}

func equalCodes(a, b []wire.CloseCode) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestHubCloseRelayedUnchanged: the hub's close of a session reaches the
// device with the same code, text and retry hint.
func TestHubCloseRelayedUnchanged(t *testing.T) {
	th := startHub(t, nil)
	te := startEdge(t, nil, th)
	r := dialRawGRPC(t, te)
	r.send(t, helloFrame("not-a-token"))
	frames, err := r.end(t)
	c := wire.CloseFromStatus(err)
	if c.Code != wire.ClosePolicyViolation || c.Text != "token rejected" {
		t.Fatalf("close %v, want 1008 token rejected (the hub's)", c)
	}
	if n := countErrors(frames); len(n) != 1 || n[0] != wire.ClosePolicyViolation {
		t.Fatalf("frames %v: want the hub's Error 1008", frames)
	}
}

// TestOriginLost: when the Relay stream breaks (the hub crashed), every
// session on it gets a GoAway with a retry hint, then 1001 (Unavailable
// with grpc-retry-pushback-ms over gRPC).
func TestOriginLost(t *testing.T) {
	th := startHub(t, nil)
	te := startEdge(t, nil, th)
	r := dialRawGRPC(t, te)
	r.send(t, helloFrame(token(t, tokenOpts{})))
	if f, err := r.stream.Recv(); err != nil || f.GetWelcome() == nil {
		t.Fatalf("no Welcome: %v %v", f, err)
	}
	th.Kill()
	frames, err := r.end(t)
	var goAway *corralv1.GoAway
	for _, f := range frames {
		if g := f.GetGoAway(); g != nil {
			goAway = g
		}
	}
	if goAway == nil || goAway.GetCode() != uint32(wire.CloseGoingAway) || goAway.GetRetryAfterMs() == 0 {
		t.Fatalf("frames %v: want a GoAway 1001 with a retry hint", frames)
	}
	if status.Code(err) != codes.Unavailable {
		t.Fatalf("stream ended with %v, want Unavailable", err)
	}
	tr := r.stream.Trailer().Get("grpc-retry-pushback-ms")
	if len(tr) != 1 {
		t.Fatalf("trailer %v: want grpc-retry-pushback-ms", r.stream.Trailer())
	}
	if ms, _ := strconv.Atoi(tr[0]); ms < int(te.drainCfg.RetryAfter.Milliseconds()) || ms > 2*int(te.drainCfg.RetryAfter.Milliseconds()) {
		t.Errorf("pushback %s ms, want drain.retry_after plus up to 100 %% jitter", tr[0])
	}
	if c := wire.CloseFromStatus(err); c.Code != wire.CloseGoingAway {
		t.Errorf("close code %v, want 1001", c.Code)
	}
}

// TestResumeAnsweredFromTheCache: a device that resumes while another
// device of the edge kept receiving the channel is answered from the
// replay cache: upstream goes a resume from the newest cached offset, the
// device gets the messages it missed once each, in order.
func TestResumeAnsweredFromTheCache(t *testing.T) {
	th := startHub(t, nil)
	te := startEdge(t, nil, th)
	for _, tr := range transports {
		t.Run(tr.name, func(t *testing.T) {
			ch := "cached." + tr.name
			ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
			defer cancel()
			watcher := dialClient(t, client.Config{Addrs: []string{tr.addr(te)}})
			c := dialClient(t, client.Config{Addrs: []string{tr.addr(te)}, ReconnectMin: 10 * time.Millisecond, ReconnectMax: 50 * time.Millisecond})
			for _, d := range []*client.Client{watcher, c} {
				if _, err := d.Subscribe(ctx, ch); err != nil {
					t.Fatal(err)
				}
			}
			publish := func(from, n int) {
				for i := range n {
					req := hub.PublishRequest{Tenant: "acme", Channel: ch, Priority: corralv1.Priority_PRIORITY_P0, Data: []byte("m" + strconv.Itoa(from+i))}
					if _, err := th.Publish(ctx, req); err != nil {
						t.Fatal(err)
					}
				}
			}
			publish(0, 3)
			collect(t, watcher, 3)
			collect(t, c, 3)
			hits := te.metric("corral_edge_replay_hits_total")
			served := te.metric("corral_edge_replay_messages_served_total")
			for _, s := range te.snapshotSessions() {
				if s.seq == newestSession(te) {
					s.close(wire.Close{Code: wire.CloseGoingAway, Text: "test cut"}, true)
				}
			}
			nextEvent(t, c, client.EventDisconnected)
			publish(3, 3)
			collect(t, watcher, 3) // the cache has m3..m5 once the watcher got them
			e := nextEvent(t, c, client.EventResumed)
			if !e.Subscribed.GetRecovered() {
				t.Fatalf("resume not recovered: %v", e.Subscribed)
			}
			if got := collect(t, c, 3); strings.Join(got, ",") != "m3,m4,m5" {
				t.Fatalf("after the resume: %v, want m3,m4,m5", got)
			}
			if d := te.metric("corral_edge_replay_hits_total") - hits; d != 1 {
				t.Errorf("cache hits %v, want 1", d)
			}
			if d := te.metric("corral_edge_replay_messages_served_total") - served; d != 3 {
				t.Errorf("messages served from the cache %v, want 3", d)
			}
			if n := c.Duplicates(); n != 0 {
				t.Errorf("the device dropped %d duplicates: the hub sent what the cache served", n)
			}
		})
	}
}

// newestSession returns the seq of the edge's newest session.
func newestSession(te *testEdge) uint64 {
	var n uint64
	for _, s := range te.snapshotSessions() {
		n = max(n, s.seq)
	}
	return n
}

// TestIdenticalMissesCoalesced: a resume the cache does not cover, while an
// identical one is on its way upstream, waits for it and is then answered
// from the cache: upstream goes a resume from the newest offset, the device
// gets every message once.
func TestIdenticalMissesCoalesced(t *testing.T) {
	th := startHub(t, nil)
	te := startEdge(t, nil, th)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	const ch = "coalesced"
	pub := func(i int) *corralv1.Published {
		res, err := th.Publish(ctx, hub.PublishRequest{Tenant: "acme", Channel: ch, Priority: corralv1.Priority_PRIORITY_P0, Data: []byte("m" + strconv.Itoa(i))})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	first := pub(1) // before any device of the edge watches: not cached
	watcher := dialClient(t, client.Config{Addrs: []string{te.grpcAddr()}})
	if _, err := watcher.Subscribe(ctx, ch); err != nil {
		t.Fatal(err)
	}
	pub(2)
	pub(3)
	collect(t, watcher, 2) // the cache holds 2..3: a resume from 0 is not covered
	from := &corralv1.Position{Epoch: first.GetEpoch(), Offset: 0}
	// The test is the leader of the resume from 0 (as a session of another
	// device would be).
	lead := te.cache.Resume("acme", ch, from)
	if lead.Kind != ReplayLead {
		t.Fatalf("the first resume is a %v, want a lead", lead.Kind)
	}
	coalesced := te.metric("corral_edge_replay_coalesced_total")
	r := welcomed(t, te, 0)
	r.send(t, &corralv1.ClientFrame{Id: 5, Frame: &corralv1.ClientFrame_Subscribe{Subscribe: &corralv1.Subscribe{Channel: ch, From: from}}})
	testkit.WaitFor(t, 5*time.Second, "the device's resume waiting for the leader", func() bool {
		return te.metric("corral_edge_replay_waiting") == 1
	})
	// The leader's catch-up brings offset 1; then it is done.
	te.cache.Add("acme", &corralv1.Message{Channel: ch, Epoch: first.GetEpoch(), Offset: 1, Priority: corralv1.Priority_PRIORITY_P0, Data: []byte("m1")})
	lead.Ticket.Done(&corralv1.Position{Epoch: first.GetEpoch(), Offset: 3})
	f, err := r.stream.Recv()
	if err != nil || f.GetSubscribed() == nil || !f.GetSubscribed().GetRecovered() {
		t.Fatalf("answer to the resume: %v %v, want Subscribed recovered", f, err)
	}
	for i := 1; i <= 3; i++ {
		f, err := r.stream.Recv()
		if err != nil || string(f.GetMessage().GetData()) != "m"+strconv.Itoa(i) {
			t.Fatalf("message %d: %v %v", i, f, err)
		}
	}
	if d := te.metric("corral_edge_replay_coalesced_total") - coalesced; d != 1 {
		t.Errorf("coalesced reads %v, want 1", d)
	}
	// Nothing more: the hub resumed from 3 and sends what comes next only.
	pub(4)
	if f, err := r.stream.Recv(); err != nil || string(f.GetMessage().GetData()) != "m4" {
		t.Fatalf("next: %v %v, want m4 (no repeat of 1..3)", f, err)
	}
}

// TestStats: Stats reads the sessions per origin and the cache for
// programs and tests that embed the edge.
func TestStats(t *testing.T) {
	a, b := startHub(t, nil), startHub(t, nil)
	te := startEdge(t, func(c *Config) { c.Admission.Enabled = true }, a, b)
	for range 6 {
		welcomed(t, te, 2)
	}
	st := te.Stats()
	if st.Sessions != 6 || st.OriginSessions[a.GRPCAddr().String()]+st.OriginSessions[b.GRPCAddr().String()] != 6 {
		t.Fatalf("stats %+v: want 6 sessions over the two origins", st)
	}
	if got := int64(a.Sessions() + b.Sessions()); got != 6 {
		t.Errorf("the hubs hold %d sessions, want 6", got)
	}
	if st.HandshakeLimit == 0 || st.Stage != limit.StageNormal {
		t.Errorf("admission in stats: %+v", st)
	}
}
