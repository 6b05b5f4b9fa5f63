package wire

import (
	"math"
	"time"

	"github.com/corralhq/corral/wire/corralv1"
)

// retryMs converts a retry hint to the uint32 milliseconds of the frames,
// rounding up and saturating.
func retryMs(d time.Duration) uint32 {
	if d <= 0 {
		return 0
	}
	ms := ceilMs(d)
	if ms > math.MaxUint32 {
		return math.MaxUint32
	}
	return uint32(ms)
}

// ErrorFrame returns the Error frame that reports c: as the reply to the
// client frame with id (0 when it explains a close).
func (c Close) ErrorFrame(id uint64) *corralv1.ServerFrame {
	return &corralv1.ServerFrame{Id: id, Frame: &corralv1.ServerFrame_Error{Error: &corralv1.Error{
		Code: uint32(c.Code), Text: c.Text, RetryAfterMs: retryMs(c.RetryAfter), RetryWithinMs: c.withinMs(),
	}}}
}

// GoAwayFrame returns the GoAway frame that announces c (usually
// CloseGoingAway with a retry hint); drain tells the client the server is
// shutting down rather than shedding.
func (c Close) GoAwayFrame(drain bool) *corralv1.ServerFrame {
	return &corralv1.ServerFrame{Frame: &corralv1.ServerFrame_GoAway{GoAway: &corralv1.GoAway{
		Code: uint32(c.Code), Reason: c.Text, RetryAfterMs: retryMs(c.RetryAfter), RetryWithinMs: c.withinMs(), Drain: drain,
	}}}
}

// CloseFromFrame reads the Close carried by an Error or GoAway frame; ok is
// false for any other frame. A code outside 1000-4999 reads as
// CloseInternal.
func CloseFromFrame(f *corralv1.ServerFrame) (c Close, ok bool) {
	var code, ms, wms uint32
	switch fr := f.GetFrame().(type) {
	case *corralv1.ServerFrame_Error:
		code, ms, wms, c.Text = fr.Error.GetCode(), fr.Error.GetRetryAfterMs(), fr.Error.GetRetryWithinMs(), fr.Error.GetText()
	case *corralv1.ServerFrame_GoAway:
		code, ms, wms, c.Text = fr.GoAway.GetCode(), fr.GoAway.GetRetryAfterMs(), fr.GoAway.GetRetryWithinMs(), fr.GoAway.GetReason()
	default:
		return Close{}, false
	}
	c.Code = CloseCode(code)
	if code < 1000 || code > 4999 {
		c.Code = CloseInternal
	}
	c.RetryAfter, c.RetryWithin = hint(ms, wms)
	return c, true
}

// withinMs is the retry window of c in the frames' milliseconds: 0 without
// a hint.
func (c Close) withinMs() uint32 {
	if c.RetryAfter <= 0 {
		return 0
	}
	return retryMs(c.RetryWithin)
}

// hint reads a frame's retry hint and window; a window without a hint is
// none.
func hint(ms, wms uint32) (after, within time.Duration) {
	if ms == 0 {
		return 0, 0
	}
	return time.Duration(ms) * time.Millisecond, time.Duration(wms) * time.Millisecond
}

// ceilMs returns d in whole milliseconds, rounded up, without overflow.
func ceilMs(d time.Duration) int64 {
	ms := int64(d / time.Millisecond)
	if d%time.Millisecond > 0 {
		ms++
	}
	return ms
}

// RelayClose returns the RelayClose that carries c over Corral.Relay: its
// code, its text as reason and its retry hint and window in milliseconds
// (rounded up, as in the Error and GoAway frames).
func (c Close) RelayClose() *corralv1.RelayClose {
	return &corralv1.RelayClose{Code: uint32(c.Code), Reason: c.Text, RetryAfterMs: retryMs(c.RetryAfter), RetryWithinMs: c.withinMs()}
}

// CloseFromRelay reads the Close a RelayClose carries, the inverse of
// Close.RelayClose. A code of 0 (the field unset) reads as CloseNormal, a
// code outside 1000-4999 as CloseInternal.
func CloseFromRelay(rc *corralv1.RelayClose) Close {
	code := rc.GetCode()
	c := Close{Code: CloseCode(code), Text: rc.GetReason()}
	c.RetryAfter, c.RetryWithin = hint(rc.GetRetryAfterMs(), rc.GetRetryWithinMs())
	switch {
	case code == 0:
		c.Code = CloseNormal
	case code < 1000 || code > 4999:
		c.Code = CloseInternal
	}
	return c
}

// FrameType names the kind of a client frame ("hello", "subscribe",
// "unsubscribe", "publish", "ack", "ping", "pong"; "empty" when none is
// set): the label servers count received frames by.
func FrameType(f *corralv1.ClientFrame) string {
	switch f.GetFrame().(type) {
	case *corralv1.ClientFrame_Hello:
		return "hello"
	case *corralv1.ClientFrame_Subscribe:
		return "subscribe"
	case *corralv1.ClientFrame_Unsubscribe:
		return "unsubscribe"
	case *corralv1.ClientFrame_Publish:
		return "publish"
	case *corralv1.ClientFrame_Ack:
		return "ack"
	case *corralv1.ClientFrame_Ping:
		return "ping"
	case *corralv1.ClientFrame_Pong:
		return "pong"
	}
	return "empty"
}
