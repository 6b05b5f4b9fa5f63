package client

import (
	"context"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"

	"github.com/corralhq/corral/wire"
	"github.com/corralhq/corral/wire/corralv1"
)

// fakeHub is a gRPC server that speaks just enough of the session protocol
// for the reconnect loop: it answers Hello with Welcome, Subscribe with
// Subscribed, refuses the Hello subscriptions it is told to, and hands each
// session to the test, which cuts its TCP connection or ends it with a
// status.
type fakeHub struct {
	corralv1.UnimplementedCorralServer
	addr     string
	sessions chan *fakeSession
	refuse   chan string // channels to refuse in the next Hello
	// refuseID is the frame id of a refusal: the Hello's (as the hub
	// sends it), or 0 to check that a channel alone keeps it from
	// reading as a close.
	refuseID func(hello uint64) uint64
	// pingFirst makes the hub send a Ping carrying a Subscribe's id before
	// its answer (a server's Ping ids are its own, and may be any number).
	pingFirst atomic.Bool
	pongs     chan *corralv1.Pong

	mu    sync.Mutex
	conns map[string]net.Conn // by remote address
	// helloErr, when set, is the status the hub ends a Connect with instead
	// of a Welcome, with trailer as its trailing metadata.
	helloErr error
	trailer  metadata.MD
	// hints go into every Welcome.
	hints *corralv1.ServerHints
}

// refuseHellos makes the hub answer every Hello with err (nil: Welcome
// again) and the trailer md.
func (h *fakeHub) refuseHellos(err error, md metadata.MD) {
	h.mu.Lock()
	h.helloErr, h.trailer = err, md
	h.mu.Unlock()
}

// fakeSession is one session on a fakeHub.
type fakeSession struct {
	hub   *fakeHub
	hello *corralv1.Hello
	conn  net.Conn
	end   chan error // the status Connect returns
}

// trackListener remembers every accepted connection by remote address,
// so that a test can cut one.
type trackListener struct {
	net.Listener
	h *fakeHub
}

func (l trackListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		l.h.mu.Lock()
		l.h.conns[c.RemoteAddr().String()] = c
		l.h.mu.Unlock()
	}
	return c, err
}

func startFakeHub(t *testing.T, refuseID func(uint64) uint64) *fakeHub {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	h := &fakeHub{addr: ln.Addr().String(), sessions: make(chan *fakeSession, 8), refuse: make(chan string, 8), conns: make(map[string]net.Conn), refuseID: refuseID, pongs: make(chan *corralv1.Pong, 8)}
	s := grpc.NewServer()
	corralv1.RegisterCorralServer(s, h)
	go func() { _ = s.Serve(trackListener{Listener: ln, h: h}) }()
	t.Cleanup(s.Stop)
	return h
}

func (h *fakeHub) Connect(stream corralv1.Corral_ConnectServer) error {
	f, err := stream.Recv()
	if err != nil || f.GetHello() == nil {
		return err
	}
	p, _ := peer.FromContext(stream.Context())
	h.mu.Lock()
	fs := &fakeSession{hub: h, hello: f.GetHello(), conn: h.conns[p.Addr.String()], end: make(chan error, 1)}
	herr, trailer, hints := h.helloErr, h.trailer, h.hints
	h.mu.Unlock()
	if herr != nil {
		stream.SetTrailer(trailer)
		return herr
	}
	refused := map[string]bool{}
	for len(h.refuse) > 0 {
		refused[<-h.refuse] = true
	}
	if err := stream.Send(&corralv1.ServerFrame{Id: f.GetId(), Frame: &corralv1.ServerFrame_Welcome{Welcome: &corralv1.Welcome{SessionId: fmt.Sprint("s-", h.addr, "-", time.Now().UnixNano()), Hints: hints}}}); err != nil {
		return err
	}
	for _, sub := range fs.hello.GetSubscribe() {
		var reply *corralv1.ServerFrame
		if refused[sub.GetChannel()] {
			reply = wire.Close{Code: wire.CloseForbidden, Text: "not allowed"}.ErrorFrame(h.refuseID(f.GetId()))
			reply.GetError().Channel = sub.GetChannel()
		} else {
			reply = &corralv1.ServerFrame{Frame: &corralv1.ServerFrame_Subscribed{Subscribed: &corralv1.Subscribed{Channel: sub.GetChannel(), Position: &corralv1.Position{Epoch: "e"}}}}
		}
		if err := stream.Send(reply); err != nil {
			return err
		}
	}
	h.sessions <- fs
	go func() {
		for {
			f, err := stream.Recv()
			if err != nil {
				return
			}
			if p := f.GetPong(); p != nil {
				h.pongs <- p
			}
			if sub := f.GetSubscribe(); sub != nil {
				if h.pingFirst.Load() {
					_ = stream.Send(&corralv1.ServerFrame{Id: f.GetId(), Frame: &corralv1.ServerFrame_Ping{Ping: &corralv1.Ping{Payload: []byte("p")}}})
				}
				_ = stream.Send(&corralv1.ServerFrame{Id: f.GetId(), Frame: &corralv1.ServerFrame_Subscribed{Subscribed: &corralv1.Subscribed{Channel: sub.GetChannel(), Position: &corralv1.Position{Epoch: "e"}}}})
			}
		}
	}()
	select {
	case err := <-fs.end:
		return err
	case <-stream.Context().Done():
		return nil
	}
}

// next returns the next session the hub accepts.
func (h *fakeHub) next(t *testing.T) *fakeSession {
	t.Helper()
	select {
	case s := <-h.sessions:
		return s
	case <-time.After(10 * time.Second):
		t.Fatalf("no session on %s", h.addr)
		return nil
	}
}

// cut closes the session's TCP connection without a word.
func (s *fakeSession) cut() { _ = s.conn.Close() }

func (s *fakeSession) channels() []string {
	var out []string
	for _, sub := range s.hello.GetSubscribe() {
		out = append(out, sub.GetChannel())
	}
	return out
}

// waitEvent returns the next event of kind, failing on any disconnect
// that is not expected.
func waitEvent(t *testing.T, c *Client, kind EventKind) Event {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		select {
		case e, ok := <-c.Events():
			if !ok {
				c.mu.Lock()
				defer c.mu.Unlock()
				t.Fatalf("events closed while waiting for kind %d: the client stopped (%v)", kind, c.final)
			}
			if e.Kind == kind {
				return e
			}
		case <-timeout:
			t.Fatalf("no event of kind %d", kind)
		}
	}
}

// TestReconnectLoop drives the reconnect loop against two fake hubs: a
// plain TCP cut makes the client reconnect to the next address, a
// refused resubscription (an Error naming its channel) drops that channel
// and does not end anything, a later TCP cut still reconnects, and only a
// terminal close the client received (1008) stops it.
func TestReconnectLoop(t *testing.T) {
	for _, tc := range []struct {
		name     string
		refuseID func(uint64) uint64
	}{
		{"refusal with the hello's id", func(id uint64) uint64 { return id }},
		{"refusal with id 0 and the channel", func(uint64) uint64 { return 0 }},
	} {
		t.Run(tc.name, func(t *testing.T) { testReconnectLoop(t, tc.refuseID) })
	}
}

func testReconnectLoop(t *testing.T, refuseID func(uint64) uint64) {
	a, b := startFakeHub(t, refuseID), startFakeHub(t, refuseID)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c, err := Dial(ctx, Config{
		Addrs: []string{"grpc://" + a.addr, "grpc://" + b.addr}, InOrder: true, Token: "t",
		ReconnectMin: time.Millisecond, ReconnectMax: 5 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	sa := a.next(t)
	if e := waitEvent(t, c, EventConnected); e.Addr != "grpc://"+a.addr {
		t.Fatalf("first session on %s, want %s", e.Addr, a.addr)
	}
	for _, ch := range []string{"news", "sport"} {
		if _, err := c.Subscribe(ctx, ch); err != nil {
			t.Fatal(err)
		}
	}

	// A TCP cut: reconnect, to the next address, resubscribing both.
	b.refuse <- "news"
	sa.cut()
	if e := waitEvent(t, c, EventDisconnected); !e.Close.Code.Retryable() {
		t.Fatalf("a TCP cut read as %v", e.Close)
	}
	sb := b.next(t)
	if e := waitEvent(t, c, EventConnected); e.Addr != "grpc://"+b.addr {
		t.Fatalf("reconnected to %s, want the next address %s", e.Addr, b.addr)
	}
	if got := fmt.Sprint(sb.channels()); got != "[news sport]" {
		t.Fatalf("resubscribed %s, want [news sport]", got)
	}
	// b refused "news" (Error with the Hello's id and the channel): the
	// session stays, the channel is dropped.
	if e := waitEvent(t, c, EventRefused); e.Channel != "news" || e.Close.Code != wire.CloseForbidden {
		t.Fatalf("refusal event %+v, want news with 4005", e)
	}

	// Another plain TCP cut: the refusal was no close, so the client
	// reconnects (to a again) without the refused channel.
	sb.cut()
	if e := waitEvent(t, c, EventDisconnected); !e.Close.Code.Retryable() {
		t.Fatalf("a TCP cut after a refusal read as %v", e.Close)
	}
	sa = a.next(t)
	if e := waitEvent(t, c, EventConnected); e.Addr != "grpc://"+a.addr {
		t.Fatalf("reconnected to %s, want %s", e.Addr, a.addr)
	}
	if got := fmt.Sprint(sa.channels()); got != "[sport]" {
		t.Fatalf("resubscribed %s, want [sport] (news was refused)", got)
	}

	// A terminal close received from the server: the client stops.
	sa.end <- wire.Close{Code: wire.ClosePolicyViolation, Text: "token revoked"}.Status().Err()
	if e := waitEvent(t, c, EventDisconnected); e.Close.Code != wire.ClosePolicyViolation {
		t.Fatalf("terminal close read as %v, want 1008", e.Close)
	}
	timeout := time.After(10 * time.Second)
	for stopped := false; !stopped; {
		select {
		case e, ok := <-c.Events():
			if e.Kind == EventConnected {
				t.Fatalf("the client reconnected to %s after 1008", e.Addr)
			}
			stopped = !ok
		case <-timeout:
			t.Fatal("the client did not stop after a terminal close")
		}
	}
	select {
	case s := <-a.sessions:
		t.Fatalf("the client reconnected after 1008 (hello %v)", s.hello)
	case s := <-b.sessions:
		t.Fatalf("the client reconnected after 1008 (hello %v)", s.hello)
	default:
	}
}

// TestPingIsNoReply: a server Ping whose id happens to equal that of a
// pending request is answered with a Pong and is not taken for the
// request's reply.
func TestPingIsNoReply(t *testing.T) {
	h := startFakeHub(t, func(hello uint64) uint64 { return hello })
	h.pingFirst.Store(true)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c, err := Dial(ctx, Config{Addrs: []string{"grpc://" + h.addr}, Token: "t"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	h.next(t)
	s, err := c.Subscribe(ctx, "news")
	if err != nil {
		t.Fatal(err)
	}
	if s.GetChannel() != "news" {
		t.Fatalf("Subscribe answered %v: the Ping with its id was taken for the reply", s)
	}
	select {
	case p := <-h.pongs:
		if string(p.GetPayload()) != "p" {
			t.Fatalf("pong payload %q, want the ping's", p.GetPayload())
		}
	case <-ctx.Done():
		t.Fatal("the ping got no pong")
	}
}
