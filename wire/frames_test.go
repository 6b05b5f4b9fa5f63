package wire

import (
	"math"
	"testing"
	"time"

	"github.com/corralhq/corral/wire/corralv1"
)

func TestCloseFrames(t *testing.T) {
	c := Close{Code: CloseGoingAway, RetryAfter: 1500 * time.Millisecond, RetryWithin: 300 * time.Millisecond, Text: "drain"}
	g := c.GoAwayFrame(true)
	if ga := g.GetGoAway(); ga.GetCode() != 1001 || ga.GetRetryAfterMs() != 1500 || ga.GetRetryWithinMs() != 300 || !ga.GetDrain() || ga.GetReason() != "drain" {
		t.Errorf("GoAwayFrame = %v", g)
	}
	if back, ok := CloseFromFrame(g); !ok || back != c {
		t.Errorf("CloseFromFrame(GoAway) = %+v, %v", back, ok)
	}
	e := Close{Code: CloseForbidden, Text: "channel a", RetryWithin: time.Second}.ErrorFrame(7)
	if e.GetId() != 7 || e.GetError().GetCode() != 4005 || e.GetError().GetRetryWithinMs() != 0 {
		t.Errorf("ErrorFrame = %v (a window without a hint is not sent)", e)
	}
	if back, ok := CloseFromFrame(e); !ok || back.Code != CloseForbidden || back.RetryAfter != 0 {
		t.Errorf("CloseFromFrame(Error) = %+v, %v", back, ok)
	}
	hinted := Close{Code: CloseTryAgainLater, RetryAfter: 2 * time.Second, RetryWithin: 150 * time.Millisecond}
	if back, _ := CloseFromFrame(hinted.ErrorFrame(0)); back != hinted {
		t.Errorf("CloseFromFrame(Error with a window) = %+v, want %+v", back, hinted)
	}
	stray := &corralv1.ServerFrame{Frame: &corralv1.ServerFrame_Error{Error: &corralv1.Error{Code: 1013, RetryWithinMs: 50}}}
	if back, _ := CloseFromFrame(stray); back.RetryWithin != 0 {
		t.Errorf("a window without a hint read as %v", back.RetryWithin)
	}
	if _, ok := CloseFromFrame(&corralv1.ServerFrame{Frame: &corralv1.ServerFrame_Ping{Ping: &corralv1.Ping{}}}); ok {
		t.Error("a Ping frame read as a close")
	}
	odd := &corralv1.ServerFrame{Frame: &corralv1.ServerFrame_Error{Error: &corralv1.Error{Code: 7}}}
	if back, _ := CloseFromFrame(odd); back.Code != CloseInternal {
		t.Errorf("code 7 read as %v", back.Code)
	}
	if got := retryMs(time.Duration(math.MaxInt64)); got != math.MaxUint32 {
		t.Errorf("retryMs saturates at %d", got)
	}
	if got := retryMs(time.Microsecond); got != 1 {
		t.Errorf("retryMs(1µs) = %d, want 1 (rounded up)", got)
	}
}

func TestRelayClose(t *testing.T) {
	c := Close{Code: CloseTryAgainLater, RetryAfter: 2500 * time.Millisecond, RetryWithin: 400 * time.Millisecond, Text: "overloaded"}
	rc := c.RelayClose()
	if rc.GetCode() != 1013 || rc.GetRetryAfterMs() != 2500 || rc.GetRetryWithinMs() != 400 || rc.GetReason() != "overloaded" {
		t.Errorf("RelayClose = %v", rc)
	}
	if back := CloseFromRelay(rc); back != c {
		t.Errorf("CloseFromRelay = %+v, want %+v", back, c)
	}
	for _, tc := range []struct {
		code uint32
		want CloseCode
	}{{0, CloseNormal}, {999, CloseInternal}, {5000, CloseInternal}, {4000, CloseSlowConsumer}} {
		if got := CloseFromRelay(&corralv1.RelayClose{Code: tc.code}).Code; got != tc.want {
			t.Errorf("code %d read as %v, want %v", tc.code, got, tc.want)
		}
	}
}

func TestFrameType(t *testing.T) {
	for _, tc := range []struct {
		f    *corralv1.ClientFrame
		want string
	}{
		{&corralv1.ClientFrame{Frame: &corralv1.ClientFrame_Hello{}}, "hello"},
		{&corralv1.ClientFrame{Frame: &corralv1.ClientFrame_Subscribe{}}, "subscribe"},
		{&corralv1.ClientFrame{Frame: &corralv1.ClientFrame_Unsubscribe{}}, "unsubscribe"},
		{&corralv1.ClientFrame{Frame: &corralv1.ClientFrame_Publish{}}, "publish"},
		{&corralv1.ClientFrame{Frame: &corralv1.ClientFrame_Ack{}}, "ack"},
		{&corralv1.ClientFrame{Frame: &corralv1.ClientFrame_Ping{}}, "ping"},
		{&corralv1.ClientFrame{Frame: &corralv1.ClientFrame_Pong{}}, "pong"},
		{&corralv1.ClientFrame{}, "empty"},
	} {
		if got := FrameType(tc.f); got != tc.want {
			t.Errorf("FrameType(%T) = %q, want %q", tc.f.GetFrame(), got, tc.want)
		}
	}
}
