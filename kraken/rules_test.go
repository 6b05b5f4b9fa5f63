package kraken

import (
	"bufio"
	"context"
	"crypto/sha1"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/corralhq/corral/internal/testkit"
	"github.com/corralhq/corral/wire"
	"github.com/corralhq/corral/wire/corralv1"
)

// fakeHub is a scripted server side of the session protocol: it accepts
// connections, answers the upgrade and hands each connection to script.
// It holds every connection until the test ends: a net.Conn nothing
// refers to is closed by its finalizer at the next GC, which the device
// would see as a cut (the test's flake in CI, reproduced with GOGC=1).
type fakeHub struct {
	ln    net.Listener
	codec *wire.Codec
	conns chan *fakeConn

	mu   sync.Mutex
	held []net.Conn
}

type fakeConn struct {
	c      net.Conn
	r      *bufio.Reader
	remote netip.Addr
	codec  *wire.Codec
	at     time.Time // when the upgrade came
}

func startFakeHub(t *testing.T) *fakeHub {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	codec, _ := wire.NewCodec(wire.FormatProto, wire.Config{})
	h := &fakeHub{ln: ln, codec: codec, conns: make(chan *fakeConn, 8)}
	t.Cleanup(func() {
		ln.Close()
		h.mu.Lock()
		defer h.mu.Unlock()
		for _, c := range h.held {
			c.Close()
		}
	})
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go h.upgrade(c)
		}
	}()
	return h
}

func (h *fakeHub) url() string { return "ws://" + h.ln.Addr().String() + "/v1/ws" }

func (h *fakeHub) upgrade(c net.Conn) {
	h.mu.Lock()
	h.held = append(h.held, c)
	h.mu.Unlock()
	r := bufio.NewReader(c)
	req, err := http.ReadRequest(r)
	if err != nil {
		c.Close()
		return
	}
	sum := sha1.Sum([]byte(req.Header.Get("Sec-WebSocket-Key") + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"))
	fmt.Fprintf(c, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: %s\r\nSec-WebSocket-Protocol: %s\r\n\r\n",
		base64.StdEncoding.EncodeToString(sum[:]), wire.SubprotocolProto)
	_ = c.SetReadDeadline(time.Now().Add(20 * time.Second)) // a missing frame fails the test, never hangs it
	ap, _ := netip.ParseAddrPort(c.RemoteAddr().String())
	h.conns <- &fakeConn{c: c, r: r, remote: ap.Addr(), codec: h.codec, at: time.Now()}
}

// read returns the next client frame (masked, as a client must send).
func (f *fakeConn) read(t *testing.T) *corralv1.ClientFrame {
	t.Helper()
	for {
		var h [2]byte
		if _, err := io.ReadFull(f.r, h[:]); err != nil {
			t.Fatalf("reading a client frame: %v", err)
		}
		if h[1]&0x80 == 0 {
			t.Fatal("an unmasked client frame")
		}
		n := uint64(h[1] & 0x7f)
		switch n {
		case 126:
			var b [2]byte
			io.ReadFull(f.r, b[:])
			n = uint64(binary.BigEndian.Uint16(b[:]))
		case 127:
			var b [8]byte
			io.ReadFull(f.r, b[:])
			n = binary.BigEndian.Uint64(b[:])
		}
		var mask [4]byte
		io.ReadFull(f.r, mask[:])
		p := make([]byte, n)
		if _, err := io.ReadFull(f.r, p); err != nil {
			t.Fatalf("reading a client frame: %v", err)
		}
		for i := range p {
			p[i] ^= mask[i&3]
		}
		if h[0]&0x0f != 0x2 {
			continue // control frames
		}
		var cf corralv1.ClientFrame
		if err := f.codec.DecodeClientFrame(p, &cf); err != nil {
			t.Fatalf("decoding a client frame: %v", err)
		}
		return &cf
	}
}

// send writes server frames.
func (f *fakeConn) send(t *testing.T, frames ...*corralv1.ServerFrame) {
	t.Helper()
	for _, sf := range frames {
		b, err := f.codec.AppendServerFrame(nil, sf)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.c.Write(testkit.WSClientFrame(0x2, true, false, b)); err != nil {
			t.Fatal(err)
		}
	}
}

func msg(off uint64, p corralv1.Priority) *corralv1.ServerFrame {
	data := make([]byte, 8)
	binary.BigEndian.PutUint64(data, uint64(time.Now().UnixNano()))
	return &corralv1.ServerFrame{Frame: &corralv1.ServerFrame_Message{Message: &corralv1.Message{Channel: "c0", Epoch: "e1", Offset: off, Priority: p, Data: data}}}
}

const oneDevice = `
name: one
duration: 4s
population: {devices: 1, initial: 1, protocol: websocket, priorities: [{name: P0, share: 1}]}
dns: {policy: multivalue}
origins: [{name: hub, headroom: 2, max_new_per_second: 100}]
client:
  backoff: {policy: full, base: 20ms, cap: 50ms}
`

// TestSessionProtocolRules: one device against a scripted server, each
// rule of the README's engine section checked where it shows on the wire:
// the connection comes from the Sources range; Hello carries the token,
// the priority and a live subscription per channel; a Ping is answered
// with a Pong of its id; a P0 message is acknowledged by offset; a message
// whose offset was delivered already is dropped (wire_duplicates) and not
// given to the application; a GoAway with a retry hint before the close
// keeps the device away at least that long (the hint is the floor of
// package backoff's rule); the close is counted by its code; the next
// Hello resumes the channel from the highest offset delivered.
func TestSessionProtocolRules(t *testing.T) {
	h := startFakeHub(t)
	sources := netip.MustParsePrefix("127.99.0.0/16")
	k, err := New(loadScenario(t, "one.yaml", oneDevice), Config{
		Targets: []string{h.url()}, Token: func(tenant string, rank int) (string, error) { return "tok-" + tenant, nil },
		Sources: sources, Settle: 10 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan *Result, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		res, _ := k.Run(ctx) // Run fails only before it starts
		done <- res
	}()
	c := <-h.conns
	if !sources.Contains(c.remote) {
		t.Errorf("connection from %v, outside the sources %v", c.remote, sources)
	}
	hello := c.read(t).GetHello()
	if hello.GetToken() != "tok-t0" || hello.GetPriority() != corralv1.Priority_PRIORITY_P0 || len(hello.GetSubscribe()) != 1 ||
		hello.GetSubscribe()[0].GetChannel() != "c0" || hello.GetSubscribe()[0].GetFrom() != nil {
		t.Fatalf("first Hello %v: want token tok-t0, P0, one live subscription to c0", hello)
	}
	c.send(t,
		&corralv1.ServerFrame{Id: 1, Frame: &corralv1.ServerFrame_Welcome{Welcome: &corralv1.Welcome{SessionId: "s1", NodeId: "fake"}}},
		&corralv1.ServerFrame{Id: 1, Frame: &corralv1.ServerFrame_Subscribed{Subscribed: &corralv1.Subscribed{Channel: "c0", Position: &corralv1.Position{Epoch: "e1", Offset: 0}}}},
		&corralv1.ServerFrame{Id: 77, Frame: &corralv1.ServerFrame_Ping{Ping: &corralv1.Ping{Payload: []byte("p")}}},
	)
	if f := c.read(t); f.GetPong() == nil || f.GetId() != 77 {
		t.Fatalf("answer to Ping 77: %v, want a Pong with id 77", f)
	}
	c.send(t, msg(1, corralv1.Priority_PRIORITY_P0))
	if a := c.read(t).GetAck(); a.GetChannel() != "c0" || a.GetEpoch() != "e1" || a.GetOffset() != 1 {
		t.Fatalf("after P0 #1: %v, want Ack c0 e1 1", a)
	}
	c.send(t, msg(1, corralv1.Priority_PRIORITY_P0), msg(2, corralv1.Priority_PRIORITY_P2))
	hint := 700 * time.Millisecond
	away := wire.Close{Code: wire.CloseGoingAway, RetryAfter: hint, Text: "bye"}
	c.send(t, away.GoAwayFrame(true))
	reason := away.Reason()
	closed := time.Now()
	c.c.Write(testkit.WSClientFrame(0x8, true, false, append(binary.BigEndian.AppendUint16(nil, 1001), reason...)))

	c2 := <-h.conns
	if waited := c2.at.Sub(closed); waited < hint {
		t.Errorf("reconnected %v after a GoAway with retry_after %v: the hint is the floor", waited, hint)
	}
	hello = c2.read(t).GetHello()
	if s := hello.GetSubscribe(); len(s) != 1 || s[0].GetFrom().GetEpoch() != "e1" || s[0].GetFrom().GetOffset() != 2 {
		t.Fatalf("second Hello subscriptions %v, want c0 from e1 offset 2", s)
	}
	c2.send(t, &corralv1.ServerFrame{Id: 1, Frame: &corralv1.ServerFrame_Welcome{Welcome: &corralv1.Welcome{SessionId: "s2", NodeId: "fake"}}},
		&corralv1.ServerFrame{Id: 1, Frame: &corralv1.ServerFrame_Subscribed{Subscribed: &corralv1.Subscribed{Channel: "c0", Resumed: true, Recovered: true, Position: &corralv1.Position{Epoch: "e1", Offset: 2}}}})
	res := <-done
	m := res.Messages
	if m.Received.Total() != 3 || m.WireDuplicates != 1 || m.Delivered["p0"] != 1 || m.Delivered["p2"] != 1 || m.P0Duplicated != 0 {
		t.Errorf("messages %+v: want 3 received, 1 wire duplicate, P0 and P2 delivered once each, no P0 duplicated", m)
	}
	if res.Disconnects["close_1001"]["p0"] != 1 || res.Welcomes["fake"]["p0"] != 2 || res.Resumes.Recovered != 1 || res.Held != 1 {
		t.Errorf("disconnects %v welcomes %v resumes %+v held %d: want one close 1001, two Welcomes, one recovered resume, held 1",
			res.Disconnects, res.Welcomes, res.Resumes, res.Held)
	}
}
