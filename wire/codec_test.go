package wire

import (
	"errors"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/corralhq/corral/wire/corralv1"
)

func mustCodec(t testing.TB, f Format, cfg Config) *Codec {
	t.Helper()
	c, err := NewCodec(f, cfg)
	if err != nil {
		t.Fatalf("NewCodec(%v): %v", f, err)
	}
	return c
}

func sampleClientFrames() []*corralv1.ClientFrame {
	return []*corralv1.ClientFrame{
		{Id: 1, Frame: &corralv1.ClientFrame_Hello{Hello: &corralv1.Hello{
			Token: "eyJhbGciOi.x.y", Priority: corralv1.Priority_PRIORITY_P1,
			Subscribe: []*corralv1.Subscribe{
				{Channel: "news.eu", From: &corralv1.Position{Epoch: "e7", Offset: 18446744073709551615}},
				{Channel: "chat/room:1"},
			},
			PreviousSessionId: "s-1", Client: "corral-go/1",
		}}},
		{Id: 2, Frame: &corralv1.ClientFrame_Subscribe{Subscribe: &corralv1.Subscribe{Channel: "a"}}},
		{Frame: &corralv1.ClientFrame_Unsubscribe{Unsubscribe: &corralv1.Unsubscribe{Channel: "a"}}},
		{Id: 3, Frame: &corralv1.ClientFrame_Publish{Publish: &corralv1.Publish{
			Channel: "ingest.t1", Priority: corralv1.Priority_PRIORITY_P0, Data: []byte{0, 1, 2, 255}, ClientMessageId: "m-9",
		}}},
		{Frame: &corralv1.ClientFrame_Ack{Ack: &corralv1.Ack{Channel: "a", Epoch: "e", Offset: 42}}},
		{Id: 4, Frame: &corralv1.ClientFrame_Ping{Ping: &corralv1.Ping{Payload: []byte("x")}}},
		{Frame: &corralv1.ClientFrame_Pong{Pong: &corralv1.Pong{}}},
	}
}

func sampleServerFrames() []*corralv1.ServerFrame {
	return []*corralv1.ServerFrame{
		{Id: 1, Frame: &corralv1.ServerFrame_Welcome{Welcome: &corralv1.Welcome{
			SessionId: "s-2", NodeId: "hub-a", NodeEpoch: "boot-3", ServerTimeUnixMs: 1_800_000_000_000,
			Hints:    &corralv1.ServerHints{PingIntervalMs: 25000, MaxFrameBytes: 65536, MaxSubscriptions: 100, ReconnectBaseMs: 500, ReconnectCapMs: 30000, HistoryWindowMs: 30000, PublishRatePerSecond: 10},
			Priority: corralv1.Priority_PRIORITY_P1,
		}}},
		{Id: 2, Frame: &corralv1.ServerFrame_Subscribed{Subscribed: &corralv1.Subscribed{Channel: "a", Position: &corralv1.Position{Epoch: "e", Offset: 9}, Resumed: true, Recovered: false}}},
		{Frame: &corralv1.ServerFrame_Unsubscribed{Unsubscribed: &corralv1.Unsubscribed{Channel: "a", Reason: "revoked"}}},
		{Id: 3, Frame: &corralv1.ServerFrame_Published{Published: &corralv1.Published{Channel: "a", Epoch: "e", Offset: 10, Duplicate: true}}},
		{Frame: &corralv1.ServerFrame_Message{Message: &corralv1.Message{Channel: "a", Epoch: "e", Offset: 11, Priority: corralv1.Priority_PRIORITY_P0, Data: []byte("hello"), TimeUnixMs: 5}}},
		{Frame: &corralv1.ServerFrame_Gap{Gap: &corralv1.Gap{Channel: "a", Epoch: "e", FromOffset: 12, ToOffset: 20, Reason: "slow consumer"}}},
		{Frame: &corralv1.ServerFrame_GoAway{GoAway: &corralv1.GoAway{Code: 1001, Reason: "drain", RetryAfterMs: 1500, Drain: true}}},
		{Frame: &corralv1.ServerFrame_Ping{Ping: &corralv1.Ping{}}},
		{Id: 4, Frame: &corralv1.ServerFrame_Pong{Pong: &corralv1.Pong{Payload: []byte("x")}}},
		{Id: 5, Frame: &corralv1.ServerFrame_Error{Error: &corralv1.Error{Code: 4005, Text: "forbidden", RetryAfterMs: 0}}},
	}
}

func TestRoundTrip(t *testing.T) {
	for _, format := range []Format{FormatProto, FormatJSON} {
		c := mustCodec(t, format, Config{})
		var buf []byte
		for _, in := range sampleClientFrames() {
			var err error
			buf, err = c.AppendClientFrame(buf[:0], in)
			if err != nil {
				t.Fatalf("%v: append client frame %v: %v", format, in, err)
			}
			var out corralv1.ClientFrame
			if err := c.DecodeClientFrame(buf, &out); err != nil {
				t.Fatalf("%v: decode client frame %q: %v", format, buf, err)
			}
			if !proto.Equal(in, &out) {
				t.Errorf("%v: client frame changed in a round trip:\n in %v\nout %v", format, in, &out)
			}
			if err := c.CheckClientFrame(&out); err != nil {
				t.Errorf("%v: valid sample frame rejected: %v", format, err)
			}
		}
		for _, in := range sampleServerFrames() {
			var err error
			buf, err = c.AppendServerFrame(buf[:0], in)
			if err != nil {
				t.Fatalf("%v: append server frame: %v", format, err)
			}
			var out corralv1.ServerFrame
			if err := c.DecodeServerFrame(buf, &out); err != nil {
				t.Fatalf("%v: decode server frame %q: %v", format, buf, err)
			}
			if !proto.Equal(in, &out) {
				t.Errorf("%v: server frame changed in a round trip:\n in %v\nout %v", format, in, &out)
			}
		}
	}
}

func TestAppendKeepsPrefix(t *testing.T) {
	c := mustCodec(t, FormatProto, Config{})
	prefix := []byte("hdr")
	out, err := c.AppendServerFrame(prefix, sampleServerFrames()[4])
	if err != nil {
		t.Fatal(err)
	}
	if string(out[:3]) != "hdr" {
		t.Fatalf("prefix overwritten: %q", out[:3])
	}
	var f corralv1.ServerFrame
	if err := c.DecodeServerFrame(out[3:], &f); err != nil {
		t.Fatalf("decode after prefix: %v", err)
	}
}

func TestJSONIsText(t *testing.T) {
	c := mustCodec(t, FormatJSON, Config{})
	out, err := c.AppendServerFrame(nil, sampleServerFrames()[4])
	if err != nil {
		t.Fatal(err)
	}
	s := string(out)
	for _, want := range []string{`"message"`, `"offset":"11"`, `"priority":"PRIORITY_P0"`, `"data":"aGVsbG8="`} {
		if !strings.Contains(strings.ReplaceAll(s, " ", ""), want) {
			t.Errorf("JSON frame %s lacks %s", s, want)
		}
	}
	// Browsers may write proto field names too, and unknown fields from a
	// newer peer are ignored.
	var f corralv1.ClientFrame
	in := `{"id":"7","publish":{"channel":"a","client_message_id":"m","priority":"PRIORITY_P2","futureField":1}}`
	if err := c.DecodeClientFrame([]byte(in), &f); err != nil {
		t.Fatalf("decode %s: %v", in, err)
	}
	if f.GetId() != 7 || f.GetPublish().GetClientMessageId() != "m" {
		t.Errorf("decoded %v", &f)
	}
}

func TestFrameSizeLimit(t *testing.T) {
	const limit = 100
	for _, format := range []Format{FormatProto, FormatJSON} {
		c := mustCodec(t, format, Config{MaxFrameBytes: limit})
		big := &corralv1.ServerFrame{Frame: &corralv1.ServerFrame_Message{Message: &corralv1.Message{Channel: "a", Data: make([]byte, limit)}}}
		prefix := []byte("keep")
		out, err := c.AppendServerFrame(prefix, big)
		if !errors.Is(err, ErrTooBig) {
			t.Errorf("%v: append of an oversized frame: err %v, want ErrTooBig", format, err)
		}
		if string(out) != "keep" {
			t.Errorf("%v: append of an oversized frame changed dst to %q", format, out)
		}
		small := &corralv1.ServerFrame{Frame: &corralv1.ServerFrame_Message{Message: &corralv1.Message{Channel: "a", Data: make([]byte, 10)}}}
		if _, err := c.AppendServerFrame(nil, small); err != nil {
			t.Errorf("%v: small frame: %v", format, err)
		}
		var f corralv1.ClientFrame
		err = c.DecodeClientFrame(make([]byte, limit+1), &f)
		var de *DecodeError
		if !errors.As(err, &de) || de.Code != CloseTooBig || !errors.Is(err, ErrTooBig) {
			t.Errorf("%v: decode of %d bytes: err %v, want close 1009", format, limit+1, err)
		}
	}
	// Exactly at the limit is accepted.
	c := mustCodec(t, FormatProto, Config{MaxFrameBytes: limit})
	f := &corralv1.ClientFrame{Frame: &corralv1.ClientFrame_Publish{Publish: &corralv1.Publish{Channel: "a"}}}
	base := proto.Size(f)
	f.GetPublish().Data = make([]byte, limit-base-2) // 2: the length prefix of data
	if n := proto.Size(f); n != limit {
		t.Fatalf("test frame is %d bytes, want %d", n, limit)
	}
	out, err := c.AppendClientFrame(nil, f)
	if err != nil {
		t.Fatalf("frame of exactly the limit: %v", err)
	}
	var back corralv1.ClientFrame
	if err := c.DecodeClientFrame(out, &back); err != nil {
		t.Fatalf("decode of exactly the limit: %v", err)
	}
}

func TestDecodeErrorClasses(t *testing.T) {
	cases := []struct {
		name   string
		format Format
		data   []byte
		want   CloseCode
	}{
		{name: "binary truncated varint", format: FormatProto, data: []byte{0x08, 0xff}, want: CloseProtocolError},
		{name: "binary bad wire type", format: FormatProto, data: []byte{0x0f}, want: CloseProtocolError},
		{name: "binary length past end", format: FormatProto, data: []byte{0x12, 0x50, 0x01}, want: CloseProtocolError},
		{name: "binary invalid utf-8 in a string", format: FormatProto, data: []byte{0x1a, 0x03, 0x0a, 0x01, 0xff}, want: CloseProtocolError},
		{name: "binary empty frame", format: FormatProto, data: nil, want: CloseProtocolError},
		{name: "binary id only", format: FormatProto, data: []byte{0x08, 0x01}, want: CloseProtocolError},
		{name: "json invalid utf-8", format: FormatJSON, data: []byte("{\"ping\":{\"payload\":\"\xff\"}}"), want: CloseInvalidPayload},
		{name: "json not json", format: FormatJSON, data: []byte("hello"), want: CloseInvalidPayload},
		{name: "json wrong type", format: FormatJSON, data: []byte(`{"id":true}`), want: CloseInvalidPayload},
		{name: "json two oneof members", format: FormatJSON, data: []byte(`{"ping":{},"pong":{}}`), want: CloseInvalidPayload},
		{name: "json truncated", format: FormatJSON, data: []byte(`{"ping":{`), want: CloseInvalidPayload},
		{name: "json empty object", format: FormatJSON, data: []byte(`{}`), want: CloseProtocolError},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := mustCodec(t, tc.format, Config{})
			var f corralv1.ClientFrame
			err := c.DecodeClientFrame(tc.data, &f)
			var de *DecodeError
			if !errors.As(err, &de) {
				t.Fatalf("err = %v, want a *DecodeError", err)
			}
			if de.Code != tc.want {
				t.Errorf("close code %v, want %v (err %v)", de.Code, tc.want, err)
			}
			if !strings.HasPrefix(err.Error(), "wire: ") {
				t.Errorf("error %q does not start with the package name", err)
			}
			if got := CloseOf(err).Code; got != tc.want {
				t.Errorf("CloseOf: %v, want %v", got, tc.want)
			}
		})
	}
}

func TestDecodeReusesFrame(t *testing.T) {
	c := mustCodec(t, FormatProto, Config{})
	buf, _ := c.AppendClientFrame(nil, sampleClientFrames()[0])
	var f corralv1.ClientFrame
	if err := c.DecodeClientFrame(buf, &f); err != nil {
		t.Fatal(err)
	}
	buf2, _ := c.AppendClientFrame(nil, sampleClientFrames()[1])
	if err := c.DecodeClientFrame(buf2, &f); err != nil {
		t.Fatal(err)
	}
	if !proto.Equal(&f, sampleClientFrames()[1]) {
		t.Errorf("second decode into the same frame kept old fields: %v", &f)
	}
	// Decoded bytes do not alias the input buffer.
	pub := &corralv1.ClientFrame{Frame: &corralv1.ClientFrame_Publish{Publish: &corralv1.Publish{Channel: "a", Data: []byte("abc")}}}
	buf3, _ := c.AppendClientFrame(nil, pub)
	if err := c.DecodeClientFrame(buf3, &f); err != nil {
		t.Fatal(err)
	}
	for i := range buf3 {
		buf3[i] = 0
	}
	if string(f.GetPublish().GetData()) != "abc" {
		t.Errorf("decoded data aliases the input buffer: %q", f.GetPublish().GetData())
	}
}

func TestCheckClientFrame(t *testing.T) {
	c := mustCodec(t, FormatProto, Config{MaxChannelBytes: 10, MaxTokenBytes: 5, MaxHelloSubscriptions: 2, MaxIDBytes: 4})
	hello := func(h *corralv1.Hello) *corralv1.ClientFrame {
		return &corralv1.ClientFrame{Frame: &corralv1.ClientFrame_Hello{Hello: h}}
	}
	sub := func(ch string) *corralv1.Subscribe { return &corralv1.Subscribe{Channel: ch} }
	cases := []struct {
		name  string
		frame *corralv1.ClientFrame
		want  CloseCode // 0: accepted
	}{
		{name: "valid hello", frame: hello(&corralv1.Hello{Token: "t", Subscribe: []*corralv1.Subscribe{sub("a"), sub("b")}})},
		{name: "token too long", frame: hello(&corralv1.Hello{Token: "123456"}), want: CloseBadRequest},
		{name: "too many hello channels", frame: hello(&corralv1.Hello{Subscribe: []*corralv1.Subscribe{sub("a"), sub("b"), sub("c")}}), want: CloseSubscriptionLimit},
		{name: "bad channel in hello", frame: hello(&corralv1.Hello{Subscribe: []*corralv1.Subscribe{sub("a b")}}), want: CloseBadRequest},
		{name: "nil subscribe in hello", frame: hello(&corralv1.Hello{Subscribe: []*corralv1.Subscribe{nil}}), want: CloseBadRequest},
		{name: "unknown priority", frame: hello(&corralv1.Hello{Priority: 9}), want: CloseBadRequest},
		{name: "previous session id too long", frame: hello(&corralv1.Hello{PreviousSessionId: "12345"}), want: CloseBadRequest},
		{name: "channel too long", frame: &corralv1.ClientFrame{Frame: &corralv1.ClientFrame_Subscribe{Subscribe: sub("abcdefghijk")}}, want: CloseBadRequest},
		{name: "epoch too long", frame: &corralv1.ClientFrame{Frame: &corralv1.ClientFrame_Subscribe{Subscribe: &corralv1.Subscribe{Channel: "a", From: &corralv1.Position{Epoch: "12345"}}}}, want: CloseBadRequest},
		{name: "empty unsubscribe", frame: &corralv1.ClientFrame{Frame: &corralv1.ClientFrame_Unsubscribe{Unsubscribe: &corralv1.Unsubscribe{}}}, want: CloseBadRequest},
		{name: "publish wildcard channel", frame: &corralv1.ClientFrame{Frame: &corralv1.ClientFrame_Publish{Publish: &corralv1.Publish{Channel: "a.*"}}}, want: CloseBadRequest},
		{name: "publish id too long", frame: &corralv1.ClientFrame{Frame: &corralv1.ClientFrame_Publish{Publish: &corralv1.Publish{Channel: "a", ClientMessageId: "12345"}}}, want: CloseBadRequest},
		{name: "ack without channel", frame: &corralv1.ClientFrame{Frame: &corralv1.ClientFrame_Ack{Ack: &corralv1.Ack{Offset: 3}}}, want: CloseBadRequest},
		{name: "ping", frame: &corralv1.ClientFrame{Frame: &corralv1.ClientFrame_Ping{Ping: &corralv1.Ping{}}}},
		{name: "empty frame", frame: &corralv1.ClientFrame{}, want: CloseProtocolError},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := c.CheckClientFrame(tc.frame)
			if tc.want == 0 {
				if err != nil {
					t.Fatalf("rejected: %v", err)
				}
				return
			}
			var cl Close
			if !errors.As(err, &cl) || cl.Code != tc.want {
				t.Fatalf("err %v, want close %v", err, tc.want)
			}
		})
	}
}

func TestValidChannel(t *testing.T) {
	for _, tc := range []struct {
		name string
		ok   bool
	}{
		{"a", true}, {"news.eu.fr", true}, {"chat/room:1", true}, {"user@x=y+z~_-", true},
		{"", false}, {".a", false}, {"a.", false}, {"a..b", false}, {"a b", false},
		{"a.*", false}, {"a.>", false}, {"$JS", false}, {"é", false}, {"a\x00", false},
	} {
		if got := ValidChannel(tc.name); got != tc.ok {
			t.Errorf("ValidChannel(%q) = %v, want %v", tc.name, got, tc.ok)
		}
	}
}

func TestNewCodecRejects(t *testing.T) {
	if _, err := NewCodec(0, Config{}); err == nil || !strings.HasPrefix(err.Error(), "wire: ") {
		t.Errorf("format 0: err %v", err)
	}
	if _, err := NewCodec(FormatProto, Config{MaxFrameBytes: -1}); err == nil || !strings.Contains(err.Error(), "max_frame_bytes") {
		t.Errorf("negative max: err %v", err)
	}
	if _, err := NewCodec(FormatProto, Config{MaxFrameBytes: HardMaxFrameBytes + 1}); err == nil {
		t.Error("max above the hard limit accepted")
	}
	c := mustCodec(t, FormatJSON, Config{MaxFrameBytes: 10})
	if got := c.Config(); got.MaxFrameBytes != 10 || got.MaxChannelBytes != DefaultMaxChannelBytes {
		t.Errorf("Config() = %+v", got)
	}
}

func TestSubprotocols(t *testing.T) {
	for _, name := range Subprotocols() {
		f, err := ParseSubprotocol(name)
		if err != nil || f.Subprotocol() != name {
			t.Errorf("ParseSubprotocol(%q) = %v, %v", name, f, err)
		}
	}
	if _, err := ParseSubprotocol("corral.v2.proto"); err == nil {
		t.Error("unknown subprotocol accepted")
	}
	if !FormatProto.Binary() || FormatJSON.Binary() {
		t.Error("Binary: proto must be binary, json text")
	}
	if Format(9).Subprotocol() != "" || Format(9).String() != "invalid" {
		t.Error("invalid format has a name")
	}
}

func TestRank(t *testing.T) {
	if !(Rank(corralv1.Priority_PRIORITY_P0) < Rank(corralv1.Priority_PRIORITY_P1) && Rank(corralv1.Priority_PRIORITY_P1) < Rank(corralv1.Priority_PRIORITY_P2)) {
		t.Error("Rank does not order P0 < P1 < P2")
	}
	if Rank(corralv1.Priority_PRIORITY_UNSPECIFIED) != Rank(corralv1.Priority_PRIORITY_P2) {
		t.Error("unspecified is not ranked as P2")
	}
	if Normalize(corralv1.Priority_PRIORITY_UNSPECIFIED) != corralv1.Priority_PRIORITY_P2 || Normalize(corralv1.Priority_PRIORITY_P0) != corralv1.Priority_PRIORITY_P0 {
		t.Error("Normalize")
	}
	for _, p := range []corralv1.Priority{corralv1.Priority_PRIORITY_P0, corralv1.Priority_PRIORITY_P1, corralv1.Priority_PRIORITY_P2} {
		if got := PriorityOfRank(Rank(p)); got != p {
			t.Errorf("PriorityOfRank(Rank(%v)) = %v", p, got)
		}
	}
	if PriorityOfRank(7) != corralv1.Priority_PRIORITY_P2 || PriorityOfRank(-1) != corralv1.Priority_PRIORITY_P2 {
		t.Error("an out-of-range rank is not P2")
	}
}

func TestCheckPublish(t *testing.T) {
	c := mustCodec(t, FormatProto, Config{MaxChannelBytes: 10, MaxIDBytes: 4, MaxFrameBytes: 1024})
	cases := []struct {
		name  string
		p     *corralv1.Publish
		want  CloseCode // 0: accepted
		field string    // the field the text starts with
	}{
		{name: "valid", p: &corralv1.Publish{Channel: "a.b", ClientMessageId: "1234", Data: make([]byte, 1024)}},
		{name: "channel one byte too long", p: &corralv1.Publish{Channel: "abcdefghijk"}, want: CloseBadRequest, field: "channel"},
		{name: "channel grammar", p: &corralv1.Publish{Channel: "a..b"}, want: CloseBadRequest, field: "channel"},
		{name: "unknown priority", p: &corralv1.Publish{Channel: "a", Priority: 9}, want: CloseBadRequest, field: "priority"},
		{name: "id too long", p: &corralv1.Publish{Channel: "a", ClientMessageId: "12345"}, want: CloseBadRequest, field: "client_message_id"},
		{name: "data too big", p: &corralv1.Publish{Channel: "a", Data: make([]byte, 1025)}, want: CloseTooBig, field: "data"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := c.CheckPublish(tc.p)
			if tc.want == 0 {
				if err != nil {
					t.Fatalf("rejected: %v", err)
				}
				return
			}
			var cl Close
			if !errors.As(err, &cl) || cl.Code != tc.want || !strings.HasPrefix(cl.Text, tc.field+": ") {
				t.Fatalf("err %v, want close %v naming %q", err, tc.want, tc.field)
			}
			// The same publish in a session's frame: the same rule, the
			// field named under publish.
			f := &corralv1.ClientFrame{Frame: &corralv1.ClientFrame_Publish{Publish: tc.p}}
			if err := c.CheckClientFrame(f); !errors.As(err, &cl) || cl.Code != tc.want || !strings.HasPrefix(cl.Text, "publish."+tc.field+": ") {
				t.Fatalf("CheckClientFrame: %v, want close %v naming publish.%s", err, tc.want, tc.field)
			}
		})
	}
}
