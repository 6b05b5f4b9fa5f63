package hub

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/corralhq/corral/hub/history"
	"github.com/corralhq/corral/internal/testkit"
	"github.com/corralhq/corral/limit"
	"github.com/corralhq/corral/wire"
	"github.com/corralhq/corral/wire/corralv1"
)

// closePeer is one raw session for TestClosePaths, over either transport:
// it sends what it is told, reads (or, stalled, does not read) what the
// hub sends, and records how the session ended as the client saw it.
type closePeer interface {
	send(f *corralv1.ClientFrame)
	// sendRaw sends one WebSocket message with opcode op (WebSocket only).
	sendRaw(op byte, b []byte)
	// stall stops reading after n frames; resume reads on.
	stall(n int)
	resume()
	// frames returns how many frames were read.
	frames() int
	// result waits for the end: the close code the client observed (0:
	// the connection ended without one) and the code of the Error (id 0)
	// or GoAway that announced it (0: none).
	result(t *testing.T) (closed, said wire.CloseCode, err error)
}

// peerState is what both peers share: the read gate and what was seen.
type peerState struct {
	mu     sync.Mutex
	n      int
	stallN int // stop reading after stallN frames; -1 never
	gate   chan struct{}
	said   wire.CloseCode
	closed wire.CloseCode
	err    error
	done   chan struct{}
}

func newPeerState() *peerState {
	return &peerState{stallN: -1, gate: make(chan struct{}), done: make(chan struct{})}
}

func (p *peerState) stall(n int) {
	p.mu.Lock()
	p.stallN = n
	p.mu.Unlock()
}

func (p *peerState) resume() {
	p.mu.Lock()
	p.stallN = -1
	close(p.gate)
	p.mu.Unlock()
}

func (p *peerState) frames() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.n
}

// wait blocks the reader while it is stalled.
func (p *peerState) wait() {
	p.mu.Lock()
	stalled := p.stallN >= 0 && p.n >= p.stallN
	gate := p.gate
	p.mu.Unlock()
	if stalled {
		<-gate
	}
}

func (p *peerState) saw(f *corralv1.ServerFrame) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.n++
	if f.GetGoAway() != nil || (f.GetError() != nil && f.GetId() == 0 && f.GetError().GetChannel() == "") {
		c, _ := wire.CloseFromFrame(f)
		p.said = c.Code
	}
}

// end records how the session ended; the first end counts.
func (p *peerState) end(closed wire.CloseCode, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.done:
		return
	default:
	}
	p.closed, p.err = closed, err
	close(p.done)
}

func (p *peerState) result(t *testing.T) (wire.CloseCode, wire.CloseCode, error) {
	t.Helper()
	select {
	case <-p.done:
	case <-time.After(20 * time.Second):
		t.Fatal("the session did not end")
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.closed, p.said, p.err
}

// wsPeer is a WebSocket client on a bare TCP connection; it answers the
// hub's close frame with its own, as RFC 6455 asks.
type wsPeer struct {
	*peerState
	c     net.Conn
	r     *bufio.Reader
	codec *wire.Codec
	wmu   sync.Mutex
}

func dialWSPeer(t *testing.T, th *testHub, subprotocol string) *wsPeer {
	w := dialTCPWSProto(t, th, subprotocol)
	_ = w.c.SetDeadline(time.Time{})
	f := wire.FormatProto
	if subprotocol == wire.SubprotocolJSON {
		f = wire.FormatJSON
	}
	codec, err := wire.NewCodec(f, wire.Config{MaxFrameBytes: 16 << 20})
	if err != nil {
		t.Fatal(err)
	}
	p := &wsPeer{peerState: newPeerState(), c: w.c, r: w.r, codec: codec}
	go p.read()
	return p
}

// sendRaw writes one message; a failed write (a reset) closes the
// connection, as client libraries do, so a close frame not yet read is
// lost.
func (p *wsPeer) sendRaw(op byte, b []byte) {
	p.wmu.Lock()
	defer p.wmu.Unlock()
	if _, err := p.c.Write(clientFrame(op, true, true, b)); err != nil {
		_ = p.c.Close()
	}
}

func (p *wsPeer) send(f *corralv1.ClientFrame) {
	b, err := p.codec.AppendClientFrame(nil, f)
	if err != nil {
		panic(err)
	}
	op := byte(2)
	if !p.codec.Format().Binary() {
		op = 1
	}
	p.sendRaw(op, b)
}

func (p *wsPeer) read() {
	for {
		p.wait()
		var h [2]byte
		if _, err := io.ReadFull(p.r, h[:]); err != nil {
			p.end(0, err)
			return
		}
		n := uint64(h[1] & 0x7f)
		switch n {
		case 126:
			var b [2]byte
			_, _ = io.ReadFull(p.r, b[:])
			n = uint64(binary.BigEndian.Uint16(b[:]))
		case 127:
			var b [8]byte
			_, _ = io.ReadFull(p.r, b[:])
			n = binary.BigEndian.Uint64(b[:])
		}
		payload := make([]byte, n)
		if _, err := io.ReadFull(p.r, payload); err != nil {
			p.end(0, err)
			return
		}
		switch h[0] & 0x0f {
		case 8: // close: answer it, then the hub ends TCP
			code := wire.CloseCode(0)
			if len(payload) >= 2 {
				code = wire.CloseCode(binary.BigEndian.Uint16(payload))
				p.sendRaw(8, payload[:2])
			}
			p.end(code, nil)
			return
		case 1, 2:
			var f corralv1.ServerFrame
			if err := p.codec.DecodeServerFrame(payload, &f); err == nil {
				p.saw(&f)
			}
		}
	}
}

// grpcPeer is a raw Corral.Connect stream.
type grpcPeer struct {
	*peerState
	stream corralv1.Corral_ConnectClient
	smu    sync.Mutex
}

func dialGRPCPeer(t *testing.T, th *testHub) *grpcPeer {
	cc, err := grpc.NewClient(th.GRPCAddr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(16<<20)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cc.Close() })
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	stream, err := corralv1.NewCorralClient(cc).Connect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	p := &grpcPeer{peerState: newPeerState(), stream: stream}
	go p.read()
	return p
}

func (p *grpcPeer) send(f *corralv1.ClientFrame) {
	p.smu.Lock()
	defer p.smu.Unlock()
	_ = p.stream.Send(f)
}

func (p *grpcPeer) sendRaw(byte, []byte) { panic("grpcPeer: no raw WebSocket messages") }

func (p *grpcPeer) read() {
	for {
		p.wait()
		f, err := p.stream.Recv()
		if errors.Is(err, io.EOF) {
			p.end(wire.CloseNormal, nil) // status OK
			return
		}
		if err != nil {
			p.end(wire.CloseFromStatus(err).Code, nil)
			return
		}
		p.saw(f)
	}
}

// relayPeer is one session (tag 1) on a Relay stream of its own; the
// close it observes is its RelayClose, or the stream's status when the
// stream ends first.
type relayPeer struct {
	*peerState
	stream corralv1.Corral_RelayClient
	smu    sync.Mutex
}

func dialRelayPeer(t *testing.T, th *testHub) *relayPeer {
	stream, _ := openRelay(t, th, "Bearer "+testRelayKey)
	p := &relayPeer{peerState: newPeerState(), stream: stream}
	p.sendRelay(&corralv1.RelayFrame{Session: 1, Frame: &corralv1.RelayFrame_Open{Open: &corralv1.RelayOpen{Transport: "grpc"}}})
	go p.read()
	return p
}

func (p *relayPeer) sendRelay(f *corralv1.RelayFrame) {
	p.smu.Lock()
	defer p.smu.Unlock()
	_ = p.stream.Send(f)
}

func (p *relayPeer) send(f *corralv1.ClientFrame) {
	p.sendRelay(&corralv1.RelayFrame{Session: 1, Frame: &corralv1.RelayFrame_Client{Client: f}})
}

func (p *relayPeer) sendRaw(byte, []byte) { panic("relayPeer: no raw WebSocket messages") }

func (p *relayPeer) read() {
	for {
		p.wait()
		f, err := p.stream.Recv()
		if errors.Is(err, io.EOF) {
			p.end(wire.CloseNormal, nil)
			return
		}
		if err != nil {
			p.end(wire.CloseFromStatus(err).Code, nil)
			return
		}
		switch {
		case f.GetSession() != 1:
		case f.GetClose() != nil:
			p.end(wire.CloseFromRelay(f.GetClose()).Code, nil)
			return
		case f.GetServer() != nil:
			p.saw(f.GetServer())
		}
	}
}

func hello(tok string, prio corralv1.Priority, subs ...string) *corralv1.ClientFrame {
	h := &corralv1.Hello{Token: tok, Priority: prio}
	for _, s := range subs {
		h.Subscribe = append(h.Subscribe, &corralv1.Subscribe{Channel: s})
	}
	return &corralv1.ClientFrame{Id: 1, Frame: &corralv1.ClientFrame_Hello{Hello: h}}
}

// failingSince is a history store whose reads fail.
type failingSince struct{ history.Store }

func (failingSince) Since(context.Context, string, history.Position) (history.Recovery, error) {
	return history.Recovery{}, errors.New("history: store down (test)")
}

// closingWith reports whether a session of th is closing with code (the
// hub decided; the closing handshake may still be under way).
func closingWith(th *testHub, code wire.CloseCode) bool {
	for _, s := range th.snapshotSessions() {
		s.mu.Lock()
		c := s.closing && s.closeReason().Code == code
		s.mu.Unlock()
		if c {
			return true
		}
	}
	return th.metric("corral_hub_session_closes_total", "code", closeCodeLabel(code)) > 0
}

// publishUntil publishes 16 KiB messages on tenant acme's channel until a
// stalledFirehose subscribes p to "firehose" with a P0 Hello (token tok), waits until
// the first message has reached it, and leaves p reading nothing more: a
// live subscription behind a stalled reader.
func stalledFirehose(t *testing.T, th *testHub, p closePeer, tok string) {
	t.Helper()
	p.stall(3) // Welcome, Subscribed, the first message
	p.send(hello(tok, corralv1.Priority_PRIORITY_P0, "firehose"))
	testkit.WaitFor(t, 10*time.Second, "subscribed", func() bool { return p.frames() >= 2 })
	if _, err := th.Publish(context.Background(), PublishRequest{Tenant: "acme", Channel: "firehose", Data: []byte("first")}); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, 10*time.Second, "the first message", func() bool { return p.frames() >= 3 })
}

// session closes with code, failing after limit publishes.
func publishUntil(t *testing.T, th *testHub, channel string, prio wire.Priority, code wire.CloseCode, limit int) {
	t.Helper()
	data := []byte(strings.Repeat("x", 16<<10))
	for i := 0; !closingWith(th, code); i++ {
		if i == limit {
			t.Fatalf("no close with %v after %d publishes", code, limit)
		}
		if _, err := th.Publish(context.Background(), PublishRequest{Tenant: "acme", Channel: channel, Priority: prio, Data: data}); err != nil {
			t.Fatal(err)
		}
	}
}

// TestClosePaths drives every close path of the close-code table in
// wire/README.md, over WebSocket, gRPC and a Relay stream where the path
// exists on each, and checks that the code the client observes (the close
// frame, the gRPC status, the RelayClose) is the table's, and so is the
// code of the Error or GoAway that announced it.
func TestClosePaths(t *testing.T) {
	tok := token(t, tokenOpts{prio: 0})
	forced := &forcedStage{retry: 2 * time.Second}
	tests := []struct {
		name       string
		want       wire.CloseCode
		transports []string
		proto      string // WebSocket subprotocol; default binary
		mod        func(*Config, *Options)
		drive      func(t *testing.T, th *testHub, p closePeer)
		repeat     int // runs of a path that fails only sometimes when broken
	}{
		{
			name: "the client ends the session", want: wire.CloseNormal, transports: []string{"ws", "grpc", "relay"},
			drive: func(t *testing.T, th *testHub, p closePeer) {
				p.send(hello(tok, 0))
				testkit.WaitFor(t, 10*time.Second, "welcome", func() bool { return p.frames() >= 1 })
				switch p := p.(type) {
				case *wsPeer:
					p.sendRaw(8, binary.BigEndian.AppendUint16(nil, uint16(wire.CloseNormal)))
				case *grpcPeer:
					_ = p.stream.CloseSend()
				case *relayPeer:
					// The edge's RelayClose: the hub answers nothing.
					p.sendRelay(&corralv1.RelayFrame{Session: 1, Frame: &corralv1.RelayFrame_Close{Close: wire.Close{Code: wire.CloseNormal}.RelayClose()}})
					testkit.WaitFor(t, 10*time.Second, "the session torn down", func() bool { return th.Sessions() == 0 })
					p.end(wire.CloseNormal, nil)
				}
			},
		},
		{
			name: "drain", want: wire.CloseGoingAway, transports: []string{"ws", "grpc", "relay"},
			drive: func(t *testing.T, th *testHub, p closePeer) {
				p.send(hello(tok, 0))
				testkit.WaitFor(t, 10*time.Second, "welcome", func() bool { return p.frames() >= 1 })
				go func() { _ = th.Shutdown(context.Background()) }()
			},
		},
		{
			name: "shedding severs a P2 session", want: wire.CloseGoingAway, transports: []string{"ws", "grpc", "relay"},
			mod: func(_ *Config, o *Options) { o.Overload = forced },
			drive: func(t *testing.T, th *testHub, p closePeer) {
				forced.set(limit.StageNormal)
				p.send(hello(tok, corralv1.Priority_PRIORITY_P2))
				testkit.WaitFor(t, 10*time.Second, "welcome", func() bool { return p.frames() >= 1 })
				forced.set(limit.StageSeverP2)
			},
		},
		{
			name: "malformed binary frame", want: wire.CloseProtocolError, transports: []string{"ws"},
			drive: func(t *testing.T, th *testHub, p closePeer) { p.sendRaw(2, []byte{0xff, 0xff, 0xff}) },
		},
		{
			name: "empty frame", want: wire.CloseProtocolError, transports: []string{"ws", "grpc", "relay"},
			drive: func(t *testing.T, th *testHub, p closePeer) { p.send(&corralv1.ClientFrame{Id: 3}) },
		},
		{
			name: "text frame not UTF-8", want: wire.CloseInvalidPayload, transports: []string{"ws"}, proto: wire.SubprotocolJSON,
			drive: func(t *testing.T, th *testHub, p closePeer) { p.sendRaw(1, []byte{'{', 0xff, '}'}) },
		},
		{
			name: "forged token", want: wire.ClosePolicyViolation, transports: []string{"ws", "grpc", "relay"},
			drive: func(t *testing.T, th *testHub, p closePeer) {
				p.send(hello(token(t, tokenOpts{secret: "another-secret-0123456789"}), 0))
			},
		},
		{
			name: "priority above the token's", want: wire.ClosePolicyViolation, transports: []string{"ws", "grpc", "relay"},
			drive: func(t *testing.T, th *testHub, p closePeer) {
				p.send(hello(token(t, tokenOpts{prio: 2}), corralv1.Priority_PRIORITY_P0))
			},
		},
		{
			name: "frame above the size limit", want: wire.CloseTooBig, transports: []string{"ws", "grpc", "relay"},
			mod: func(c *Config, _ *Options) { c.Wire.MaxFrameBytes = 4096 },
			drive: func(t *testing.T, th *testHub, p closePeer) {
				p.send(hello(tok, 0))
				// A Ping: no content rule of the codec looks at its size.
				p.send(&corralv1.ClientFrame{Id: 2, Frame: &corralv1.ClientFrame_Ping{Ping: &corralv1.Ping{Payload: make([]byte, 5000)}}})
			},
		},
		{
			name: "history unavailable for a resume in hello", want: wire.CloseInternal, transports: []string{"ws", "grpc", "relay"},
			// A long window: the sweep, which reads the store, does not
			// run while the test swaps it.
			mod: func(c *Config, _ *Options) { c.History.Window = 10 * time.Minute },
			drive: func(t *testing.T, th *testHub, p closePeer) {
				th.mu.Lock() // sessions register under h.mu: they see the swap
				th.store = failingSince{th.store}
				th.mu.Unlock()
				p.send(&corralv1.ClientFrame{Id: 1, Frame: &corralv1.ClientFrame_Hello{Hello: &corralv1.Hello{
					Token: tok, Subscribe: []*corralv1.Subscribe{{Channel: "a", From: &corralv1.Position{Epoch: "e", Offset: 5}}},
				}}})
			},
		},
		{
			name: "admission refused", want: wire.CloseTryAgainLater, transports: []string{"ws", "grpc", "relay"},
			mod: func(_ *Config, o *Options) { o.Overload = forced },
			drive: func(t *testing.T, th *testHub, p closePeer) {
				forced.set(limit.StageRejectP2)
				p.send(hello(tok, corralv1.Priority_PRIORITY_P2))
			},
		},
		{
			name: "slow consumer: a P0 message finds the queue full", want: wire.CloseSlowConsumer, transports: []string{"ws", "grpc", "relay"},
			mod: func(c *Config, _ *Options) { c.Session.OutboundBytes = 64 << 10 },
			drive: func(t *testing.T, th *testHub, p closePeer) {
				stalledFirehose(t, th, p, tok)
				publishUntil(t, th, "firehose", wire.P0, wire.CloseSlowConsumer, 20000)
				p.resume()
			},
		},
		{
			name: "slow consumer: a stalled reader of P2 only", want: wire.CloseSlowConsumer, transports: []string{"ws", "grpc", "relay"},
			mod: func(c *Config, _ *Options) {
				c.Session.OutboundBytes = 64 << 10
				c.Session.WriteTimeout = 300 * time.Millisecond
			},
			drive: func(t *testing.T, th *testHub, p closePeer) {
				stalledFirehose(t, th, p, tok)
				publishUntil(t, th, "firehose", wire.P2, wire.CloseSlowConsumer, 20000)
				p.resume()
			},
		},
		{
			name: "slow consumer: a stalled reader, the queue never full", want: wire.CloseSlowConsumer, transports: []string{"ws", "grpc", "relay"},
			mod: func(c *Config, _ *Options) {
				c.Session.OutboundBytes = 1 << 30
				c.Session.WriteTimeout = 300 * time.Millisecond
			},
			drive: func(t *testing.T, th *testHub, p closePeer) {
				stalledFirehose(t, th, p, tok)
				data := []byte(strings.Repeat("x", 16<<10))
				for range 2000 { // 32 MiB: more than the kernel and HTTP/2 windows hold, far less than the queue
					if _, err := th.Publish(context.Background(), PublishRequest{Tenant: "acme", Channel: "firehose", Data: data}); err != nil {
						t.Fatal(err)
					}
				}
				testkit.WaitFor(t, 15*time.Second, "a close with 4000", func() bool { return closingWith(th, wire.CloseSlowConsumer) })
				p.resume()
			},
		},
		{
			name: "too many channels in hello", want: wire.CloseSubscriptionLimit, transports: []string{"ws", "grpc", "relay"},
			drive: func(t *testing.T, th *testHub, p closePeer) {
				subs := make([]string, 257)
				for i := range subs {
					subs[i] = "c" + strings.Repeat("x", i%7) + string(rune('a'+i%26)) + strings.Repeat("y", i/26)
				}
				p.send(hello(tok, 0, subs...))
			},
		},
		{
			name: "frames above the rate, the client still sending", want: wire.CloseRateLimited, transports: []string{"ws", "grpc", "relay"}, repeat: 8,
			mod: func(c *Config, _ *Options) { c.Session.FrameRate, c.Session.FrameBurst = 1, 20 },
			drive: func(t *testing.T, th *testHub, p closePeer) {
				p.send(hello(tok, 0))
				go func() {
					// Keep sending after the close: the close frame must
					// still arrive (no reset).
					pad := make([]byte, 32<<10)
					for i := range 2000 {
						p.send(&corralv1.ClientFrame{Id: uint64(i + 2), Frame: &corralv1.ClientFrame_Ping{Ping: &corralv1.Ping{Payload: pad}}})
					}
				}()
			},
		},
		{
			name: "no hello", want: wire.CloseHandshakeTimeout, transports: []string{"ws", "grpc", "relay"},
			mod: func(c *Config, _ *Options) {
				c.Session.HandshakeTimeout = 300 * time.Millisecond
				// The upgrade's head read defaults to the handshake timeout:
				// on a busy machine 300 ms could end the upgrade itself
				// (an EOF, not this row's close). Only the Hello is timed.
				c.Connections.HTTPReadHeaderTimeout = 30 * time.Second
			},
			drive: func(t *testing.T, th *testHub, p closePeer) {},
		},
		{
			name: "subscribe before hello", want: wire.CloseBadRequest, transports: []string{"ws", "grpc", "relay"},
			drive: func(t *testing.T, th *testHub, p closePeer) {
				p.send(&corralv1.ClientFrame{Id: 2, Frame: &corralv1.ClientFrame_Subscribe{Subscribe: &corralv1.Subscribe{Channel: "a"}}})
			},
		},
		{
			name: "second hello", want: wire.CloseBadRequest, transports: []string{"ws", "grpc", "relay"},
			drive: func(t *testing.T, th *testHub, p closePeer) {
				p.send(hello(tok, 0))
				p.send(hello(tok, 0))
			},
		},
	}
	// The codes of the table that end no session of the hub, and why.
	noPath := map[wire.CloseCode]string{
		wire.CloseForbidden:        "an Error reply, never a close (TestHelloRefusalIsNoClose)",
		wire.CloseResumeImpossible: "the hub keeps no session state to resume: every resume can be served or reports recovered=false",
		wire.CloseSessionReplaced:  "the hub does not take sessions over",
	}
	covered := map[wire.CloseCode]bool{}
	for _, tc := range tests {
		covered[tc.want] = true
	}
	for _, c := range wire.CloseCodes() {
		if !covered[c] && noPath[c] == "" {
			t.Errorf("close code %v of the table has no close path in this test", c)
		}
	}
	for _, tc := range tests {
		for _, tr := range tc.transports {
			for run := range max(tc.repeat, 1) {
				t.Run(tc.name+"/"+tr, func(t *testing.T) {
					th := startHub(t, tc.mod)
					var p closePeer
					if tr == "ws" {
						proto := tc.proto
						if proto == "" {
							proto = wire.SubprotocolProto
						}
						p = dialWSPeer(t, th, proto)
					} else if tr == "grpc" {
						p = dialGRPCPeer(t, th)
					} else {
						p = dialRelayPeer(t, th)
					}
					tc.drive(t, th, p)
					closed, said, err := p.result(t)
					if closed != tc.want {
						t.Fatalf("the client observed %v (read error %v), want %v", closed, err, tc.want)
					}
					if said != 0 && said != tc.want {
						t.Fatalf("the close was announced with %v, closed with %v (run %d)", said, closed, run)
					}
				})
			}
		}
	}
}
