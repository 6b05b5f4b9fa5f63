package wire_test

import (
	"errors"
	"fmt"
	"time"

	"github.com/corralhq/corral/wire"
	"github.com/corralhq/corral/wire/corralv1"
)

// A server picks the codec of the negotiated subprotocol, decodes a client
// frame into a reused frame and encodes its reply into a reused buffer.
func ExampleCodec() {
	format, err := wire.ParseSubprotocol("corral.v1.json")
	if err != nil {
		panic(err)
	}
	codec, err := wire.NewCodec(format, wire.Config{})
	if err != nil {
		panic(err)
	}
	var in corralv1.ClientFrame
	if err := codec.DecodeClientFrame([]byte(`{"id":"1","subscribe":{"channel":"news.eu"}}`), &in); err != nil {
		panic(err)
	}
	if err := codec.CheckClientFrame(&in); err != nil {
		panic(err)
	}
	reply := &corralv1.ServerFrame{Id: in.GetId(), Frame: &corralv1.ServerFrame_Subscribed{
		Subscribed: &corralv1.Subscribed{Channel: in.GetSubscribe().GetChannel(), Position: &corralv1.Position{Epoch: "e1", Offset: 41}},
	}}
	buf := make([]byte, 0, 512)
	buf, err = codec.AppendServerFrame(buf[:0], reply)
	if err != nil {
		panic(err)
	}
	var back corralv1.ServerFrame
	if err := codec.DecodeServerFrame(buf, &back); err != nil {
		panic(err)
	}
	fmt.Println(format.Binary(), back.GetId(), back.GetSubscribed().GetChannel(), back.GetSubscribed().GetPosition().GetOffset())
	// Output: false 1 news.eu 41
}

// A malformed frame tells the transport which close code to send.
func ExampleDecodeError() {
	codec, _ := wire.NewCodec(wire.FormatJSON, wire.Config{})
	var f corralv1.ClientFrame
	err := codec.DecodeClientFrame([]byte("{not json"), &f)
	var de *wire.DecodeError
	if errors.As(err, &de) {
		fmt.Println(de.Code)
	}
	// Output: 1007 invalid payload
}

// Shedding closes a session with 1001 and a retry hint in the reason; the
// same Close becomes a gRPC status for gRPC sessions.
func ExampleClose() {
	c := wire.Close{Code: wire.CloseGoingAway, RetryAfter: 2500 * time.Millisecond, RetryWithin: 250 * time.Millisecond, Text: "shed p2"}
	reason := c.Reason()
	retry, within, text := wire.ParseReason(reason)
	fmt.Println(reason)
	fmt.Println(retry, within, text)
	fmt.Println(c.Status().Code())
	fmt.Println(wire.CloseFromStatus(c.Status().Err()) == c)
	// Output:
	// retry_after_ms=2500 retry_within_ms=250 shed p2
	// 2.5s 250ms shed p2
	// Unavailable
	// true
}
