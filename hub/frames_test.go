package hub

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/lxzan/gws"

	"github.com/corralhq/corral/client"
	"github.com/corralhq/corral/wire"
	"github.com/corralhq/corral/wire/corralv1"
)

// rawWS is a WebSocket connection that sends whatever it is told and
// records how the hub closed it.
type rawWS struct {
	c      *gws.Conn
	mu     sync.Mutex
	code   wire.CloseCode
	reason string
	closed chan struct{}
	frames chan []byte
}

func (r *rawWS) OnOpen(*gws.Conn)         {}
func (r *rawWS) OnPing(*gws.Conn, []byte) {}
func (r *rawWS) OnPong(*gws.Conn, []byte) {}
func (r *rawWS) OnMessage(_ *gws.Conn, m *gws.Message) {
	select {
	case r.frames <- bytes.Clone(m.Bytes()):
	default:
	}
	m.Close()
}
func (r *rawWS) OnClose(_ *gws.Conn, err error) {
	r.mu.Lock()
	var ce *gws.CloseError
	if errors.As(err, &ce) {
		r.code, r.reason = wire.CloseCode(ce.Code), string(ce.Reason)
	}
	r.mu.Unlock()
	close(r.closed)
}

func dialRaw(t *testing.T, th *testHub, subprotocol string) *rawWS {
	t.Helper()
	r := &rawWS{closed: make(chan struct{}), frames: make(chan []byte, 64)}
	c, _, err := gws.NewClient(r, &gws.ClientOption{
		Addr:          th.wsAddr(),
		RequestHeader: http.Header{"Sec-WebSocket-Protocol": []string{subprotocol}},
	})
	if err != nil {
		t.Fatal(err)
	}
	r.c = c
	go c.ReadLoop()
	t.Cleanup(func() { _ = c.NetConn().Close() })
	return r
}

func (r *rawWS) waitClose(t *testing.T) wire.CloseCode {
	t.Helper()
	select {
	case <-r.closed:
	case <-time.After(15 * time.Second):
		t.Fatal("hub did not close the connection")
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.code
}

func helloFrame(t *testing.T, tok string) []byte {
	b, err := wire.NewCodec(wire.FormatProto, wire.Config{})
	if err != nil {
		t.Fatal(err)
	}
	out, err := b.AppendClientFrame(nil, &corralv1.ClientFrame{Id: 1, Frame: &corralv1.ClientFrame_Hello{Hello: &corralv1.Hello{Token: tok}}})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestMalformedFramesAndLimits(t *testing.T) {
	th := startHub(t, func(c *Config, _ *Options) {
		c.Session.HandshakeTimeout = 300 * time.Millisecond
		c.Wire.MaxFrameBytes = 4096
	})
	tok := token(t, tokenOpts{})
	tests := []struct {
		name  string
		proto string
		send  func(r *rawWS)
		want  wire.CloseCode
	}{
		{"binary garbage", wire.SubprotocolProto, func(r *rawWS) { _ = r.c.WriteMessage(gws.OpcodeBinary, []byte{0xff, 0xff, 0xff}) }, wire.CloseProtocolError},
		{"text that is not UTF-8", wire.SubprotocolJSON, func(r *rawWS) { _ = r.c.WriteMessage(gws.OpcodeText, []byte{'{', 0xff, '}'}) }, wire.CloseInvalidPayload},
		{"text on the binary subprotocol", wire.SubprotocolProto, func(r *rawWS) { _ = r.c.WriteMessage(gws.OpcodeText, []byte("{}")) }, wire.CloseProtocolError},
		{"JSON that is not JSON", wire.SubprotocolJSON, func(r *rawWS) { _ = r.c.WriteMessage(gws.OpcodeText, []byte("{nope")) }, wire.CloseInvalidPayload},
		{"JSON of no frame", wire.SubprotocolJSON, func(r *rawWS) { _ = r.c.WriteMessage(gws.OpcodeText, []byte(`{"id":"3"}`)) }, wire.CloseProtocolError},
		{"frame above the size limit", wire.SubprotocolProto, func(r *rawWS) { _ = r.c.WriteMessage(gws.OpcodeBinary, make([]byte, 5000)) }, wire.CloseTooBig},
		{"subscribe before hello", wire.SubprotocolJSON, func(r *rawWS) {
			_ = r.c.WriteMessage(gws.OpcodeText, []byte(`{"subscribe":{"channel":"a"}}`))
		}, wire.CloseBadRequest},
		{"bad channel name", wire.SubprotocolJSON, func(r *rawWS) {
			_ = r.c.WriteMessage(gws.OpcodeText, []byte(`{"hello":{"token":"`+tok+`"}}`))
			_ = r.c.WriteMessage(gws.OpcodeText, []byte(`{"subscribe":{"channel":"a b"}}`))
		}, wire.CloseBadRequest},
		{"no hello: slowloris", wire.SubprotocolProto, func(*rawWS) {}, wire.CloseHandshakeTimeout},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := dialRaw(t, th, tc.proto)
			tc.send(r)
			if got := r.waitClose(t); got != tc.want {
				t.Fatalf("closed with %v, want %v", got, tc.want)
			}
		})
	}
	t.Run("hello then silence is fine", func(t *testing.T) {
		r := dialRaw(t, th, wire.SubprotocolProto)
		_ = r.c.WriteMessage(gws.OpcodeBinary, helloFrame(t, tok))
		select {
		case <-r.frames: // Welcome
		case <-time.After(10 * time.Second):
			t.Fatal("no welcome")
		}
		ok := false
		for range 50 {
			if th.metric("corral_hub_sessions", "transport", "ws") >= 1 {
				ok = true
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
		if !ok {
			t.Fatal("session not counted")
		}
	})
}

func TestSubscriptionAndRateLimits(t *testing.T) {
	th := startHub(t, func(c *Config, _ *Options) {
		c.Session.MaxSubscriptions = 2
		c.Session.PublishRate, c.Session.PublishBurst = 1, 3
	})
	ctx := context.Background()
	c := dialClient(t, client.Config{Addrs: []string{th.grpcAddr()}})
	for _, ch := range []string{"a", "b"} {
		if _, err := c.Subscribe(ctx, ch); err != nil {
			t.Fatal(err)
		}
	}
	var cl wire.Close
	if _, err := c.Subscribe(ctx, "c"); !errors.As(err, &cl) || cl.Code != wire.CloseSubscriptionLimit {
		t.Fatalf("third subscription: %v, want 4001", err)
	}
	var limited error
	for range 5 {
		if _, err := c.Publish(ctx, "a", client.PriorityP2, nil, ""); err != nil {
			limited = err
			break
		}
	}
	if !errors.As(limited, &cl) || cl.Code != wire.CloseRateLimited || cl.RetryAfter <= 0 {
		t.Fatalf("publishing above the rate: %v, want 4002 with a hint", limited)
	}
}

// FuzzClientFrames feeds arbitrary bytes to the session's frame path in
// both formats: decoding never panics, a frame that does not decode closes
// with 1002, 1007 or 1009, and one that does is handled without panic.
func FuzzClientFrames(f *testing.F) {
	f.Add([]byte{}, true)
	f.Add([]byte(`{"hello":{"token":"x"}}`), false)
	f.Add([]byte(`{"subscribe":{"channel":"a.b","from":{"epoch":"e","offset":"3"}}}`), false)
	f.Add([]byte{0x12, 0x02, 0x0a, 0x00}, true)
	f.Add([]byte{0xff, 0x00}, true)
	h, err := New(Config{Listen: "127.0.0.1:0"}, Options{})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, data []byte, binary bool) {
		format := wire.FormatJSON
		if binary {
			format = wire.FormatProto
		}
		codec := h.codecs[format]
		var fr corralv1.ClientFrame
		if err := codec.DecodeClientFrame(data, &fr); err != nil {
			switch wire.CloseOf(err).Code {
			case wire.CloseProtocolError, wire.CloseInvalidPayload, wire.CloseTooBig:
			default:
				t.Fatalf("decode error %v closes with %v", err, wire.CloseOf(err).Code)
			}
			return
		}
		tr := &nullTransport{}
		s := h.newSession(tr)
		s.handle(context.Background(), &fr)
		s.close(wire.Close{Code: wire.CloseNormal}, false)
	})
}

// nullTransport discards frames.
type nullTransport struct{}

func (nullTransport) kind() string                           { return "null" }
func (nullTransport) writeFrame(*corralv1.ServerFrame) error { return nil }
func (nullTransport) writeDelivery(*delivery) error          { return nil }
func (nullTransport) closeWith(wire.Close, time.Duration)    {}

func TestFrameRateCloses(t *testing.T) {
	th := startHub(t, func(c *Config, _ *Options) { c.Session.FrameRate, c.Session.FrameBurst = 5, 5 })
	r := dialRaw(t, th, wire.SubprotocolJSON)
	_ = r.c.WriteMessage(gws.OpcodeText, []byte(`{"hello":{"token":"`+token(t, tokenOpts{})+`"}}`))
	for range 50 {
		if r.c.WriteMessage(gws.OpcodeText, []byte(`{"ping":{}}`)) != nil {
			break
		}
	}
	if got := r.waitClose(t); got != wire.CloseRateLimited {
		t.Fatalf("closed with %v, want 4002", got)
	}
}
