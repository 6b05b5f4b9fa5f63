package hub

import (
	"bytes"
	"context"
	"errors"
	"io"
	"runtime/pprof"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/corralhq/corral/hub/history"
	"github.com/corralhq/corral/internal/testkit"
	"github.com/corralhq/corral/wire"
	"github.com/corralhq/corral/wire/corralv1"
)

// openRelay opens a Corral.Relay stream to th with authorization (the
// whole metadata value; "" sends none), on a connection of its own.
func openRelay(t *testing.T, th *testHub, authorization string, opts ...grpc.DialOption) (corralv1.Corral_RelayClient, context.CancelFunc) {
	t.Helper()
	opts = append([]grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(16 << 20))}, opts...)
	cc, err := grpc.NewClient(th.GRPCAddr().String(), opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cc.Close() })
	return openRelayOn(t, cc, authorization)
}

// openRelayOn opens a Relay stream on cc.
func openRelayOn(t *testing.T, cc *grpc.ClientConn, authorization string) (corralv1.Corral_RelayClient, context.CancelFunc) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	if authorization != "" {
		ctx = metadata.AppendToOutgoingContext(ctx, "authorization", authorization)
	}
	stream, err := corralv1.NewCorralClient(cc).Relay(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return stream, cancel
}

// relayEdge is a raw Relay stream as an edge holds it: it sends tagged
// frames and sorts what the hub sends by tag. Its reader can be held
// (hold, release) to play an edge that reads nothing.
type relayEdge struct {
	t      *testing.T
	stream corralv1.Corral_RelayClient
	cancel context.CancelFunc
	smu    sync.Mutex

	mu    sync.Mutex
	tags  map[uint64]chan *corralv1.RelayFrame
	gate  chan struct{} // closed: reading; nil: read on
	done  chan struct{}
	err   error // how the stream ended (nil: status OK)
	total int   // frames read
}

func dialRelayEdge(t *testing.T, th *testHub, opts ...grpc.DialOption) *relayEdge {
	t.Helper()
	stream, cancel := openRelay(t, th, "Bearer "+testRelayKey, opts...)
	e := &relayEdge{t: t, stream: stream, cancel: cancel, tags: make(map[uint64]chan *corralv1.RelayFrame), done: make(chan struct{})}
	go e.read()
	return e
}

func (e *relayEdge) tag(tag uint64) chan *corralv1.RelayFrame {
	e.mu.Lock()
	defer e.mu.Unlock()
	c := e.tags[tag]
	if c == nil {
		c = make(chan *corralv1.RelayFrame, 4096)
		e.tags[tag] = c
	}
	return c
}

func (e *relayEdge) read() {
	defer close(e.done)
	for {
		e.mu.Lock()
		gate := e.gate
		e.mu.Unlock()
		if gate != nil {
			<-gate
		}
		f, err := e.stream.Recv()
		if err != nil {
			if !errors.Is(err, io.EOF) {
				e.err = err
			}
			return
		}
		e.mu.Lock()
		e.total++
		e.mu.Unlock()
		e.tag(f.GetSession()) <- f
	}
}

// hold stops reading (after the frame being read); release reads on.
func (e *relayEdge) hold() {
	e.mu.Lock()
	e.gate = make(chan struct{})
	e.mu.Unlock()
}

func (e *relayEdge) release() {
	e.mu.Lock()
	close(e.gate)
	e.gate = nil
	e.mu.Unlock()
}

func (e *relayEdge) sendFrame(f *corralv1.RelayFrame) {
	e.smu.Lock()
	defer e.smu.Unlock()
	_ = e.stream.Send(f)
}

func (e *relayEdge) open(tag uint64) {
	e.sendFrame(&corralv1.RelayFrame{Session: tag, Frame: &corralv1.RelayFrame_Open{Open: &corralv1.RelayOpen{RemoteAddr: "192.0.2.1:5000", Transport: "ws"}}})
}

func (e *relayEdge) client(tag uint64, f *corralv1.ClientFrame) {
	e.sendFrame(&corralv1.RelayFrame{Session: tag, Frame: &corralv1.RelayFrame_Client{Client: f}})
}

func (e *relayEdge) closeTag(tag uint64) {
	e.sendFrame(&corralv1.RelayFrame{Session: tag, Frame: &corralv1.RelayFrame_Close{Close: &corralv1.RelayClose{Code: uint32(wire.CloseNormal), Reason: "device left"}}})
}

// next returns the next frame the hub sent for tag.
func (e *relayEdge) next(tag uint64) *corralv1.RelayFrame {
	e.t.Helper()
	select {
	case f := <-e.tag(tag):
		return f
	case <-time.After(15 * time.Second):
		e.t.Fatalf("session %d: no frame from the hub", tag)
		return nil
	}
}

// server returns the next frame for tag, which must be a ServerFrame.
func (e *relayEdge) server(tag uint64) *corralv1.ServerFrame {
	e.t.Helper()
	f := e.next(tag)
	if f.GetServer() == nil {
		e.t.Fatalf("session %d: got %v, want a server frame", tag, f)
	}
	return f.GetServer()
}

// closed returns the Close of the next frame for tag, which must be a
// RelayClose.
func (e *relayEdge) closed(tag uint64) wire.Close {
	e.t.Helper()
	f := e.next(tag)
	if f.GetClose() == nil {
		e.t.Fatalf("session %d: got %v, want a RelayClose", tag, f)
	}
	return wire.CloseFromRelay(f.GetClose())
}

// ended waits for the end of the stream and returns its status.
func (e *relayEdge) ended() error {
	e.t.Helper()
	select {
	case <-e.done:
		return e.err
	case <-time.After(20 * time.Second):
		e.t.Fatal("the relay stream did not end")
		return nil
	}
}

// welcome opens tag and says Hello (subscribing to subs), and returns
// the Welcome.
func (e *relayEdge) welcome(tag uint64, tok string, subs ...string) *corralv1.Welcome {
	e.t.Helper()
	e.open(tag)
	e.client(tag, hello(tok, 0, subs...))
	f := e.server(tag)
	if f.GetWelcome() == nil {
		e.t.Fatalf("session %d: got %v, want Welcome", tag, f)
	}
	for range subs {
		if s := e.server(tag); s.GetSubscribed() == nil {
			e.t.Fatalf("session %d: got %v, want Subscribed", tag, s)
		}
	}
	return f.GetWelcome()
}

// ping sends a Ping on tag and waits for its Pong, failing on any other
// frame first.
func (e *relayEdge) ping(tag, id uint64) {
	e.t.Helper()
	e.client(tag, &corralv1.ClientFrame{Id: id, Frame: &corralv1.ClientFrame_Ping{Ping: &corralv1.Ping{}}})
	if f := e.server(tag); f.GetPong() == nil || f.GetId() != id {
		e.t.Fatalf("session %d: got %v, want Pong %d", tag, f, id)
	}
}

// pending returns the frames the hub sent for tag not read yet.
func (e *relayEdge) pending(tag uint64) int { return len(e.tag(tag)) }

// publish publishes data on channel from the subscribed session tag and
// returns the delivery it gets back (the reply and the delivery come in
// either order).
func (e *relayEdge) publish(tag, id uint64, channel, data string) *corralv1.Message {
	e.t.Helper()
	e.client(tag, publishFrame(id, channel, data))
	var m *corralv1.Message
	var p *corralv1.Published
	for m == nil || p == nil {
		switch f := e.server(tag); {
		case f.GetMessage() != nil && m == nil:
			m = f.GetMessage()
		case f.GetPublished() != nil && f.GetId() == id && p == nil:
			p = f.GetPublished()
		default:
			e.t.Fatalf("session %d: got %v, want Published %d and the message", tag, f, id)
		}
	}
	if string(m.GetData()) != data || m.GetOffset() != p.GetOffset() {
		e.t.Fatalf("session %d: message %v for publish %v", tag, m, p)
	}
	return m
}

func publishFrame(id uint64, channel, data string) *corralv1.ClientFrame {
	return &corralv1.ClientFrame{Id: id, Frame: &corralv1.ClientFrame_Publish{Publish: &corralv1.Publish{Channel: channel, Data: []byte(data)}}}
}

// TestRelaySessionsShareAStream runs several device sessions over one
// Relay stream: Hello, Subscribe, Publish, fan-out, Unsubscribe, the
// edge's close, and a resume in Hello on a new tag.
func TestRelaySessionsShareAStream(t *testing.T) {
	th := startHub(t, nil)
	e := dialRelayEdge(t, th)
	tok := token(t, tokenOpts{})
	for tag := uint64(1); tag <= 3; tag++ {
		w := e.welcome(tag, tok, "news")
		if w.GetNodeId() != th.NodeID() || w.GetSessionId() == "" {
			t.Fatalf("welcome %v", w)
		}
	}
	if got := th.metric("corral_hub_sessions", "transport", "relay"); got != 3 {
		t.Fatalf("corral_hub_sessions{relay} = %v, want 3", got)
	}
	if got := th.metric("corral_hub_relay_sessions", "device", "ws"); got != 3 {
		t.Fatalf("corral_hub_relay_sessions{ws} = %v, want 3", got)
	}
	if got := th.metric("corral_hub_relay_streams"); got != 1 {
		t.Fatalf("corral_hub_relay_streams = %v, want 1", got)
	}

	first := e.publish(1, 7, "news", "m1")
	for tag := uint64(2); tag <= 3; tag++ {
		if m := e.server(tag).GetMessage(); string(m.GetData()) != "m1" || m.GetOffset() != first.GetOffset() {
			t.Fatalf("session %d: got %v, want message m1", tag, m)
		}
	}
	e.ping(2, 8)

	// The device of session 3 leaves; frames for its tag that cross the
	// close are dropped, the other sessions go on.
	e.closeTag(3)
	testkit.WaitFor(t, 10*time.Second, "session 3 torn down", func() bool {
		return th.metric("corral_hub_relay_sessions") == 2 && th.Sessions() == 2
	})
	if n := th.metric("corral_hub_session_closes_total", "code", "1000"); n != 1 {
		t.Fatalf("%v closes 1000 counted, want the edge's one", n)
	}
	e.client(3, &corralv1.ClientFrame{Id: 9, Frame: &corralv1.ClientFrame_Ping{Ping: &corralv1.Ping{}}})
	e.publish(1, 10, "news", "m2")
	e.publish(1, 11, "news", "m3")
	for _, want := range []string{"m2", "m3"} {
		if m := e.server(2).GetMessage(); string(m.GetData()) != want {
			t.Fatalf("session 2: got %v, want %s", m, want)
		}
	}
	e.ping(2, 12)
	if n := e.pending(3); n != 0 {
		t.Fatalf("the hub sent %d frames for a closed tag", n)
	}

	// A new tag resumes after m1 in Hello: m2 and m3 come, recovered.
	e.open(4)
	e.client(4, &corralv1.ClientFrame{Id: 1, Frame: &corralv1.ClientFrame_Hello{Hello: &corralv1.Hello{Token: tok,
		Subscribe: []*corralv1.Subscribe{{Channel: "news", From: &corralv1.Position{Epoch: first.GetEpoch(), Offset: first.GetOffset()}}}}}})
	if f := e.server(4); f.GetWelcome() == nil {
		t.Fatalf("session 4: got %v, want Welcome", f)
	}
	sub := e.server(4).GetSubscribed()
	if !sub.GetResumed() || !sub.GetRecovered() {
		t.Fatalf("session 4: got %v, want a recovered resume", sub)
	}
	for _, want := range []string{"m2", "m3"} {
		if m := e.server(4).GetMessage(); string(m.GetData()) != want {
			t.Fatalf("session 4: got %v, want %s", m, want)
		}
	}
	e.client(2, &corralv1.ClientFrame{Id: 13, Frame: &corralv1.ClientFrame_Unsubscribe{Unsubscribe: &corralv1.Unsubscribe{Channel: "news"}}})
	for {
		f := e.server(2)
		if f.GetUnsubscribed() != nil {
			break
		}
		if f.GetMessage() == nil {
			t.Fatalf("session 2: got %v, want Unsubscribed", f)
		}
	}
}

// TestRelayAuth: without a valid relay key the stream fails before a
// frame is read and nothing else happens; a hub with no relay key refuses
// every stream with PermissionDenied.
func TestRelayAuth(t *testing.T) {
	tests := []struct {
		name   string
		noKeys bool
		auth   string
		want   codes.Code
	}{
		{name: "no metadata", want: codes.Unauthenticated},
		{name: "unknown key", auth: "Bearer not-the-relay-key-0123456789", want: codes.Unauthenticated},
		{name: "an API key is no relay key", auth: "Bearer " + testAPIKey, want: codes.Unauthenticated},
		{name: "the key without Bearer", auth: testRelayKey, want: codes.Unauthenticated},
		{name: "no relay key configured", noKeys: true, auth: "Bearer " + testRelayKey, want: codes.PermissionDenied},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			th := startHub(t, func(c *Config, _ *Options) {
				if tc.noKeys {
					c.Relay.Keys = nil
				}
			})
			stream, _ := openRelay(t, th, tc.auth)
			_ = stream.Send(&corralv1.RelayFrame{Session: 1, Frame: &corralv1.RelayFrame_Open{Open: &corralv1.RelayOpen{}}})
			_ = stream.Send(&corralv1.RelayFrame{Session: 1, Frame: &corralv1.RelayFrame_Client{Client: hello(token(t, tokenOpts{}), 0)}})
			_, err := stream.Recv()
			if status.Code(err) != tc.want {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
			if n := th.metric("corral_hub_sessions_opened_total", "transport", "relay"); n != 0 {
				t.Fatalf("%v relayed sessions opened", n)
			}
			if n := th.metric("corral_hub_relay_streams"); n != 0 {
				t.Fatalf("%v relay streams open", n)
			}
			wantRejected := 1.0
			if tc.noKeys {
				wantRejected = 0
			}
			if n := th.metric("corral_hub_auth_rejected_total", "reason", "relay_key"); n != wantRejected {
				t.Fatalf("relay_key rejections %v, want %v", n, wantRejected)
			}
		})
	}
}

// TestRelayFrameRules: tags out of order, frames for no session, frames
// an edge must not send and bad session frames close that one session
// (or answer its tag) with the right code; the stream and its other
// sessions go on. A frame over twice max_frame_bytes ends the stream.
func TestRelayFrameRules(t *testing.T) {
	th := startHub(t, func(c *Config, _ *Options) {
		c.Wire.MaxFrameBytes = 4096
		c.Session.HandshakeTimeout = 500 * time.Millisecond
	})
	e := dialRelayEdge(t, th)
	tok := token(t, tokenOpts{})
	e.welcome(1, tok) // the control session: it answers after every case
	pingID := uint64(100)
	tag := uint64(10)
	tests := []struct {
		name  string
		drive func() uint64 // the tag whose end is checked
		said  wire.CloseCode
		want  wire.CloseCode
	}{
		{name: "client frame before open", want: wire.CloseProtocolError, drive: func() uint64 {
			e.client(tag+1000, hello(tok, 0))
			return tag + 1000
		}},
		{name: "tag 0", want: wire.CloseProtocolError, drive: func() uint64 {
			e.open(0)
			return 0
		}},
		{name: "tag already open", said: wire.CloseProtocolError, want: wire.CloseProtocolError, drive: func() uint64 {
			e.welcome(tag, tok)
			e.open(tag)
			return tag
		}},
		{name: "tag not above the last opened", want: wire.CloseProtocolError, drive: func() uint64 {
			e.welcome(tag, tok)
			e.closeTag(tag)
			testkit.WaitFor(t, 10*time.Second, "the session gone", func() bool { return th.Sessions() == 1 })
			e.open(tag - 1)
			return tag - 1
		}},
		{name: "server frame from the edge", said: wire.CloseProtocolError, want: wire.CloseProtocolError, drive: func() uint64 {
			e.welcome(tag, tok)
			e.sendFrame(&corralv1.RelayFrame{Session: tag, Frame: &corralv1.RelayFrame_Server{Server: &corralv1.ServerFrame{}}})
			return tag
		}},
		{name: "empty relay frame", said: wire.CloseProtocolError, want: wire.CloseProtocolError, drive: func() uint64 {
			e.welcome(tag, tok)
			e.sendFrame(&corralv1.RelayFrame{Session: tag})
			return tag
		}},
		{name: "empty client frame", said: wire.CloseProtocolError, want: wire.CloseProtocolError, drive: func() uint64 {
			e.welcome(tag, tok)
			e.client(tag, &corralv1.ClientFrame{Id: 2})
			return tag
		}},
		{name: "subscribe before hello", said: wire.CloseBadRequest, want: wire.CloseBadRequest, drive: func() uint64 {
			e.open(tag)
			e.client(tag, &corralv1.ClientFrame{Id: 2, Frame: &corralv1.ClientFrame_Subscribe{Subscribe: &corralv1.Subscribe{Channel: "a"}}})
			return tag
		}},
		{name: "no hello within the handshake timeout", said: wire.CloseHandshakeTimeout, want: wire.CloseHandshakeTimeout, drive: func() uint64 {
			e.open(tag)
			return tag
		}},
		{name: "a frame above max_frame_bytes", said: wire.CloseTooBig, want: wire.CloseTooBig, drive: func() uint64 {
			e.welcome(tag, tok)
			// A Ping: no content rule of the codec looks at its size.
			e.client(tag, &corralv1.ClientFrame{Id: 2, Frame: &corralv1.ClientFrame_Ping{Ping: &corralv1.Ping{Payload: make([]byte, 5000)}}})
			return tag
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e.t = t
			tag += 10
			got := tc.drive()
			f := e.next(got)
			if tc.said != 0 {
				c, ok := wire.CloseFromFrame(f.GetServer())
				if !ok || c.Code != tc.said {
					t.Fatalf("got %v, want an Error or GoAway %v", f, tc.said)
				}
				f = e.next(got)
			}
			if f.GetClose() == nil {
				t.Fatalf("got %v, want RelayClose %v", f, tc.want)
			}
			if c := wire.CloseFromRelay(f.GetClose()); c.Code != tc.want {
				t.Fatalf("RelayClose %v, want %v", c, tc.want)
			}
			pingID++
			e.ping(1, pingID)
			testkit.WaitFor(t, 10*time.Second, "only the control session left", func() bool {
				return th.Sessions() == 1 && th.metric("corral_hub_relay_sessions") == 1
			})
		})
	}
	e.t = t
	// Far above the limit gRPC refuses the message: the stream ends, and
	// every session on it.
	e.client(1, publishFrame(2, "a", strings.Repeat("x", 3*4096)))
	if err := e.ended(); wire.CloseFromStatus(err).Code != wire.CloseTooBig {
		t.Fatalf("the stream ended with %v, want 1009", err)
	}
	testkit.WaitFor(t, 10*time.Second, "every session torn down", func() bool {
		return th.Sessions() == 0 && th.metric("corral_hub_relay_sessions") == 0 && th.metric("corral_hub_relay_streams") == 0
	})
}

// relayGoroutines counts the goroutines running relay code.
func relayGoroutines() int {
	var b bytes.Buffer
	_ = pprof.Lookup("goroutine").WriteTo(&b, 1)
	n := 0
	for _, g := range strings.Split(b.String(), "\n\n") {
		if strings.Contains(g, "hub.(*relayStream)") || strings.Contains(g, "hub.(*relayTransport)") || strings.Contains(g, "hub.(*grpcService).Relay") {
			n++
		}
	}
	return n
}

// TestRelayStreamEndTearsDown: when the edge cuts the stream or closes its
// side, every session on it is torn down: sessions, subscriptions and the
// relay's goroutines are gone.
func TestRelayStreamEndTearsDown(t *testing.T) {
	for _, how := range []string{"cancel", "close send"} {
		t.Run(how, func(t *testing.T) {
			th := startHub(t, nil)
			e := dialRelayEdge(t, th)
			tok := token(t, tokenOpts{})
			for tag := uint64(1); tag <= 30; tag++ {
				e.welcome(tag, tok, "news", "ch"+string(rune('a'+tag%5)))
			}
			e.open(31) // one without Hello yet
			testkit.WaitFor(t, 10*time.Second, "31 sessions", func() bool { return th.Sessions() == 31 })
			if n := th.metric("corral_hub_channels"); n != 6 {
				t.Fatalf("%v channels, want 6", n)
			}
			if how == "cancel" {
				e.cancel()
			} else {
				e.smu.Lock()
				_ = e.stream.CloseSend()
				e.smu.Unlock()
			}
			testkit.WaitFor(t, 10*time.Second, "everything torn down", func() bool {
				return th.Sessions() == 0 && th.metric("corral_hub_sessions", "transport", "relay") == 0 &&
					th.metric("corral_hub_relay_sessions") == 0 && th.metric("corral_hub_relay_streams") == 0 &&
					th.metric("corral_hub_channels") == 0 && relayGoroutines() == 0
			})
			if n := th.metric("corral_hub_session_closes_total", "code", "1001"); n != 31 {
				t.Fatalf("%v closes 1001, want 31", n)
			}
		})
	}
}

// TestRelayDrain: a drain sends each relayed session a GoAway with a
// jittered hint, then a RelayClose 1001 with the same hint, and then ends
// the stream (1001 with a hint); a stream with no session ends at once and
// a new one is refused.
func TestRelayDrain(t *testing.T) {
	th := startHub(t, func(c *Config, _ *Options) {
		c.Drain.Rate, c.Drain.RetryAfter, c.Drain.Deadline = 4, time.Second, 5*time.Second
	})
	e := dialRelayEdge(t, th)
	cc, err := grpc.NewClient(th.GRPCAddr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cc.Close() })
	idleStream, _ := openRelayOn(t, cc, "Bearer "+testRelayKey)
	idle := &relayEdge{t: t, stream: idleStream, tags: make(map[uint64]chan *corralv1.RelayFrame), done: make(chan struct{})}
	go idle.read()
	tok := token(t, tokenOpts{})
	const n = 8
	for tag := uint64(1); tag <= n; tag++ {
		e.welcome(tag, tok, "news")
	}
	idle.welcome(1, tok)
	idle.closeTag(1)
	testkit.WaitFor(t, 10*time.Second, "the idle stream's session gone", func() bool { return th.Sessions() == n })
	go func() { _ = th.Shutdown(context.Background()) }()
	// A stream that carries no session ends at once, while the drain goes
	// on (8 sessions at 4/s: about 2 s), and a new stream is refused.
	if c := wire.CloseFromStatus(idle.ended()); c.Code != wire.CloseGoingAway || c.RetryAfter < time.Second {
		t.Fatalf("the idle stream ended with %v, want 1001 with a hint", c)
	}
	late, _ := openRelayOn(t, cc, "Bearer "+testRelayKey)
	if _, err := late.Recv(); wire.CloseFromStatus(err).Code != wire.CloseGoingAway || wire.CloseFromStatus(err).RetryAfter < time.Second {
		t.Fatalf("a stream opened while draining: %v, want 1001 with a hint", err)
	}
	if th.Sessions() == 0 {
		t.Fatal("the drain was over before the idle stream ended")
	}
	hints := map[uint32]bool{}
	for tag := uint64(1); tag <= n; tag++ {
		g := e.server(tag).GetGoAway()
		if g == nil || !g.GetDrain() || g.GetCode() != uint32(wire.CloseGoingAway) {
			t.Fatalf("session %d: got %v, want a drain GoAway", tag, g)
		}
		if ms := g.GetRetryAfterMs(); ms < 1000 || ms > 2000 {
			t.Fatalf("session %d: hint %d ms, want 1000 to 2000", tag, ms)
		}
		c := e.closed(tag)
		if c.Code != wire.CloseGoingAway || c.RetryAfter != time.Duration(g.GetRetryAfterMs())*time.Millisecond {
			t.Fatalf("session %d: RelayClose %v after GoAway %v", tag, c, g)
		}
		hints[g.GetRetryAfterMs()] = true
	}
	if len(hints) < 2 {
		t.Fatalf("every hint is the same: %v", hints)
	}
	if c := wire.CloseFromStatus(e.ended()); c.Code != wire.CloseGoingAway || c.RetryAfter < time.Second {
		t.Fatalf("the stream ended with %v, want 1001 with a hint", c)
	}
	if n := th.metric("corral_hub_shed_total", "action", "drain"); n != 8 {
		t.Fatalf("%v sessions drained, want 8", n)
	}
}

// TestRelaySlowEdgeStaysBounded: an edge that stops reading fills the
// HTTP/2 windows; behind them each session has at most relayInflight
// frames in the stream's queue, and its own outbound queue drops P2 as it
// does for any slow consumer. When the edge reads again, another session's
// Pong comes behind a bounded number of the firehose's frames.
func TestRelaySlowEdgeStaysBounded(t *testing.T) {
	th := startHub(t, func(c *Config, _ *Options) {
		c.Session.OutboundBytes = 64 << 10
		c.Session.WriteTimeout = time.Minute
	})
	e := dialRelayEdge(t, th, grpc.WithInitialWindowSize(64<<10), grpc.WithInitialConnWindowSize(64<<10))
	tok := token(t, tokenOpts{})
	e.welcome(1, tok, "firehose")
	e.welcome(2, tok)
	e.hold()
	data := []byte(strings.Repeat("x", 16<<10))
	for range 300 {
		if _, err := th.Publish(context.Background(), PublishRequest{Tenant: "acme", Channel: "firehose", Data: data}); err != nil {
			t.Fatal(err)
		}
	}
	testkit.WaitFor(t, 10*time.Second, "every message handed to the session", func() bool {
		return th.metric("corral_hub_messages_delivered_total") >= 300
	})
	if th.metric("corral_hub_messages_dropped_total", "priority", "p2") == 0 {
		t.Fatal("no P2 message dropped")
	}
	th.relay.mu.Lock()
	var rs *relayStream
	for s := range th.relay.streams {
		rs = s
	}
	th.relay.mu.Unlock()
	rs.mu.Lock()
	unsent := rs.unsent
	rs.mu.Unlock()
	if unsent > 2*4 { // relayInflight places for each of the two sessions
		t.Fatalf("%d frames in the stream's queue, want at most 8", unsent)
	}
	for _, s := range th.snapshotSessions() {
		s.mu.Lock()
		b := int(s.q.bytes)
		s.mu.Unlock()
		if b > 64<<10+len(data)+64 {
			t.Fatalf("a session queues %d bytes", b)
		}
	}
	e.release()
	e.client(2, &corralv1.ClientFrame{Id: 5, Frame: &corralv1.ClientFrame_Ping{Ping: &corralv1.Ping{}}})
	e.mu.Lock()
	before := e.total
	e.mu.Unlock()
	if f := e.server(2); f.GetPong() == nil {
		t.Fatalf("got %v, want Pong", f)
	}
	e.mu.Lock()
	behind := e.total - before
	e.mu.Unlock()
	// The frames ahead of the Pong: what the HTTP/2 windows and gRPC's
	// write quota hold (64 KiB each, four 16 KiB messages), the batch the
	// writer took, and the firehose's places in the queue.
	if behind > 24 {
		t.Fatalf("%d frames came before the Pong", behind)
	}
}

// TestRelayEdgeThatReadsNothingIsCut: a Send blocked for the write timeout
// ends the stream (4000), and every session on it.
func TestRelayEdgeThatReadsNothingIsCut(t *testing.T) {
	th := startHub(t, func(c *Config, _ *Options) {
		c.Session.OutboundBytes = 1 << 30
		c.Session.WriteTimeout = 300 * time.Millisecond
	})
	e := dialRelayEdge(t, th, grpc.WithInitialWindowSize(64<<10), grpc.WithInitialConnWindowSize(64<<10))
	tok := token(t, tokenOpts{})
	e.welcome(1, tok, "firehose")
	e.welcome(2, tok)
	e.hold()
	data := []byte(strings.Repeat("x", 16<<10))
	for range 40 {
		if _, err := th.Publish(context.Background(), PublishRequest{Tenant: "acme", Channel: "firehose", Data: data}); err != nil {
			t.Fatal(err)
		}
	}
	testkit.WaitFor(t, 15*time.Second, "the stream cut", func() bool {
		return th.metric("corral_hub_relay_streams") == 0 && th.Sessions() == 0
	})
	e.release()
	if err := e.ended(); wire.CloseFromStatus(err).Code != wire.CloseSlowConsumer {
		t.Fatalf("the stream ended with %v, want 4000", err)
	}
}

// TestRelayHubSendsNoPing: the hub neither pings a relayed session nor
// closes it for silence (the edge owns the device's liveness), while a
// gRPC session as silent is closed after two ping intervals.
func TestRelayHubSendsNoPing(t *testing.T) {
	th := startHub(t, func(c *Config, _ *Options) { c.Session.PingInterval = 100 * time.Millisecond })
	tok := token(t, tokenOpts{})
	e := dialRelayEdge(t, th)
	e.welcome(1, tok)
	direct := dialGRPCPeer(t, th)
	direct.send(hello(tok, 0))
	// The direct session gets pings, answers none, and is closed: two
	// intervals have passed by then.
	if closed, _, _ := direct.result(t); closed != wire.CloseGoingAway {
		t.Fatalf("the silent gRPC session closed with %v, want 1001", closed)
	}
	if n := e.pending(1); n != 0 {
		t.Fatalf("the relayed session got %d frames, want none (no Ping)", n)
	}
	// The client sees its close before the hub has counted the session
	// out: wait for that, then the relayed session must still answer.
	testkit.WaitFor(t, 10*time.Second, "the silent session counted out", func() bool { return th.Sessions() <= 1 })
	e.ping(1, 2)
	if th.Sessions() != 1 {
		t.Fatalf("%d sessions, want the relayed one", th.Sessions())
	}
}

// blockingSince is a history store whose reads wait for release.
type blockingSince struct {
	history.Store
	release chan struct{}
}

func (b blockingSince) Since(ctx context.Context, key string, from history.Position) (history.Recovery, error) {
	select {
	case <-b.release:
	case <-ctx.Done():
		return history.Recovery{}, ctx.Err()
	}
	return b.Store.Since(ctx, key, from)
}

// TestRelayBlockedSessionBlocksNoOther: a session whose handling waits (a
// slow history read) holds up no other session of its stream, and frames
// that pile up behind it beyond session.outbound_bytes close it with 4002.
func TestRelayBlockedSessionBlocksNoOther(t *testing.T) {
	th := startHub(t, func(c *Config, _ *Options) {
		c.History.Window = 10 * time.Minute
		c.Session.OutboundBytes = 64 << 10
	})
	e := dialRelayEdge(t, th)
	tok := token(t, tokenOpts{})
	e.welcome(1, tok)
	release := make(chan struct{})
	defer close(release)
	th.mu.Lock()
	th.store = blockingSince{Store: th.store, release: release}
	th.mu.Unlock()
	e.open(2)
	e.client(2, &corralv1.ClientFrame{Id: 1, Frame: &corralv1.ClientFrame_Hello{Hello: &corralv1.Hello{
		Token: tok, Subscribe: []*corralv1.Subscribe{{Channel: "a", From: &corralv1.Position{Epoch: "e", Offset: 5}}},
	}}})
	if f := e.server(2); f.GetWelcome() == nil {
		t.Fatalf("got %v, want Welcome", f)
	}
	// Session 2 now waits in its resume; session 1 is served.
	e.ping(1, 2)
	pad := make([]byte, 3000)
	for i := range 30 { // 90 KiB behind the resume
		e.client(2, &corralv1.ClientFrame{Id: uint64(10 + i), Frame: &corralv1.ClientFrame_Ping{Ping: &corralv1.Ping{Payload: pad}}})
	}
	if c, ok := wire.CloseFromFrame(e.server(2)); !ok || c.Code != wire.CloseRateLimited {
		t.Fatalf("got %v, want Error 4002", c)
	}
	if c := e.closed(2); c.Code != wire.CloseRateLimited || c.RetryAfter != time.Second {
		t.Fatalf("RelayClose %v, want 4002 with a hint", c)
	}
	e.ping(1, 3)
}

// TestRelayRefusalsBounded: the reader queues at most relayReplies
// refusals the writer has not written, then waits (and so reads nothing
// more: HTTP/2 flow control holds the edge back).
func TestRelayRefusalsBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rs := &relayStream{kick: make(chan struct{}, 1), done: make(chan struct{}), emptied: make(chan struct{}),
			sessions: make(map[uint64]*relayTransport)} // no writer runs
		rs.room.L = &rs.mu
		var handled int
		finished := make(chan struct{})
		go func() {
			defer close(finished)
			for tag := uint64(1); tag <= 300; tag++ {
				rs.dispatch(&corralv1.RelayFrame{Session: tag, Frame: &corralv1.RelayFrame_Client{Client: &corralv1.ClientFrame{}}})
				handled++
			}
		}()
		synctest.Wait()
		if handled != 256 || rs.replies != 256 || rs.unsent != 256 {
			t.Fatalf("%d frames handled, %d refusals queued, want 256 and 256", handled, rs.replies)
		}
		rs.fail(wire.Close{Code: wire.CloseNormal}, relayEndedClose)
		<-finished
		if rs.unsent != 256 {
			t.Fatalf("%d refusals queued after the end, want no more", rs.unsent)
		}
	})
}

// TestRelaySharedEncoding: a delivery encoded once for every relayed
// session (RelayFrame field 4 as unknown bytes) is on the wire what a
// RelayFrame with its server field set is, and a frame above
// max_frame_bytes is refused instead of failing the stream.
func TestRelaySharedEncoding(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Admin.Addr = ""
	cfg.Wire.MaxFrameBytes = 4096
	h, err := New(cfg, Options{})
	if err != nil {
		t.Fatal(err)
	}
	d := newDelivery("news", history.Message{Epoch: "abcdef012345", Offset: 300, Priority: 1, Data: []byte("payload"), Time: time.UnixMilli(1700000000000)})
	b, err := h.relayEncoded(d)
	if err != nil {
		t.Fatal(err)
	}
	shared := &corralv1.RelayFrame{Session: 1 << 40}
	shared.ProtoReflect().SetUnknown(b)
	got, err := proto.Marshal(shared)
	if err != nil {
		t.Fatal(err)
	}
	want, err := proto.Marshal(&corralv1.RelayFrame{Session: 1 << 40, Frame: &corralv1.RelayFrame_Server{Server: d.frame}})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("shared encoding\n%x\nwant\n%x", got, want)
	}
	var back corralv1.RelayFrame
	if err := proto.Unmarshal(got, &back); err != nil || !proto.Equal(back.GetServer(), d.frame) {
		t.Fatalf("decoded %v (%v), want the delivery's frame", &back, err)
	}
	big := newDelivery("news", history.Message{Epoch: "e", Offset: 1, Data: make([]byte, 5000)})
	if _, err := h.relayEncoded(big); !errors.Is(err, errRelayTooBig) {
		t.Fatalf("a frame above the limit: %v, want errRelayTooBig", err)
	}
}

// TestRelayLastLeaveDuringFail: the last session of a stream that fails
// leaves while fail notifies the sessions (without the stream's lock):
// the leave sees the stream ended and empty, and so does the end of fail;
// emptied closes once (killing a hub of a fleet under kraken's
// TestHubKillLosesNoP0 panicked with a close of a closed channel).
func TestRelayLastLeaveDuringFail(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Admin.Addr = ""
	h, err := New(cfg, Options{})
	if err != nil {
		t.Fatal(err)
	}
	rs := &relayStream{h: h, kick: make(chan struct{}, 1), done: make(chan struct{}), emptied: make(chan struct{}),
		sessions: make(map[uint64]*relayTransport)}
	rs.room.L = &rs.mu
	tr := &relayTransport{rs: rs, tag: 1, device: "ws"}
	rs.sessions[1] = tr
	h.metrics.relaySessions.WithLabelValues("ws").Inc()
	// fail's first half: the stream is ended, the sessions are told
	// without the lock; meanwhile the last one leaves.
	rs.mu.Lock()
	rs.ended = true
	rs.mu.Unlock()
	tr.leave(relayEndedClose)
	rs.failed()
	select {
	case <-rs.emptied:
	default:
		t.Fatal("emptied not closed once the last session left")
	}
	select {
	case <-rs.done:
	default:
		t.Fatal("done not closed")
	}
}
