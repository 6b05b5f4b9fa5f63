package hub

import (
	"testing"
	"time"

	"github.com/lxzan/gws"

	"github.com/corralhq/corral/wire"
	"github.com/corralhq/corral/wire/corralv1"
)

// rawFrame reads the next server frame of a raw WebSocket connection.
func (r *rawWS) rawFrame(t *testing.T, codec *wire.Codec) *corralv1.ServerFrame {
	t.Helper()
	select {
	case b := <-r.frames:
		var f corralv1.ServerFrame
		if err := codec.DecodeServerFrame(b, &f); err != nil {
			t.Fatal(err)
		}
		return &f
	case <-r.closed:
		t.Fatalf("closed with %d while a frame was expected", r.code)
	case <-time.After(10 * time.Second):
		t.Fatal("no frame")
	}
	return nil
}

// TestHelloRefusalIsNoClose subscribes in Hello to a channel the token
// does not allow, between two it does: the refusal is an Error with the
// Hello's id and the channel (not the id-0 Error that explains a close),
// the other entries are subscribed, and the session stays up.
func TestHelloRefusalIsNoClose(t *testing.T) {
	th := startHub(t, nil)
	codec, err := wire.NewCodec(wire.FormatProto, wire.Config{})
	if err != nil {
		t.Fatal(err)
	}
	r := dialRaw(t, th, wire.SubprotocolProto)
	send := func(f *corralv1.ClientFrame) {
		b, err := codec.AppendClientFrame(nil, f)
		if err != nil {
			t.Fatal(err)
		}
		_ = r.c.WriteMessage(gws.OpcodeBinary, b)
	}
	send(&corralv1.ClientFrame{Id: 9, Frame: &corralv1.ClientFrame_Hello{Hello: &corralv1.Hello{
		Token:     token(t, tokenOpts{channels: []string{"ok.>"}}),
		Subscribe: []*corralv1.Subscribe{{Channel: "ok.a"}, {Channel: "secret"}, {Channel: "ok.b"}},
	}}})
	if f := r.rawFrame(t, codec); f.GetWelcome() == nil || f.GetId() != 9 {
		t.Fatalf("first frame %v, want Welcome with id 9", f)
	}
	var subscribed []string
	for range 3 {
		f := r.rawFrame(t, codec)
		switch {
		case f.GetSubscribed() != nil:
			subscribed = append(subscribed, f.GetSubscribed().GetChannel())
		case f.GetError() != nil:
			e := f.GetError()
			if f.GetId() != 9 || e.GetChannel() != "secret" || e.GetCode() != uint32(wire.CloseForbidden) {
				t.Fatalf("refusal %v (id %d), want id 9, channel secret, 4005", e, f.GetId())
			}
		default:
			t.Fatalf("unexpected frame %v", f)
		}
	}
	if len(subscribed) != 2 || subscribed[0] != "ok.a" || subscribed[1] != "ok.b" {
		t.Fatalf("subscribed %v, want [ok.a ok.b]", subscribed)
	}
	send(&corralv1.ClientFrame{Id: 10, Frame: &corralv1.ClientFrame_Ping{Ping: &corralv1.Ping{}}})
	if f := r.rawFrame(t, codec); f.GetPong() == nil || f.GetId() != 10 {
		t.Fatalf("after the refusal: %v, want Pong 10 (the session is up)", f)
	}
}
