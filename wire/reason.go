package wire

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/protoadapt"
	"google.golang.org/protobuf/types/known/durationpb"
)

// MaxReasonBytes is the longest close reason a WebSocket close frame can
// carry (125 bytes of control payload minus the 2-byte code).
const MaxReasonBytes = 123

// reasonRetryKey prefixes the retry hint in a close reason, and
// reasonWithinKey the retry window after it.
const (
	reasonRetryKey  = "retry_after_ms="
	reasonWithinKey = "retry_within_ms="
)

// FormatReason builds the reason text of a close frame. With a positive
// retryAfter it is "retry_after_ms=N" (N in whole milliseconds, rounded up),
// then " retry_within_ms=W" when within is positive too (the retry window,
// see Close.RetryWithin), then a space and text when text is not empty;
// with retryAfter <= 0 it is text alone. The result is cut to
// MaxReasonBytes at a UTF-8 boundary. A peer that knows only the hint reads
// the window as the start of the text.
func FormatReason(retryAfter, within time.Duration, text string) string {
	var s string
	if retryAfter > 0 {
		s = reasonRetryKey + strconv.FormatInt(ceilMs(retryAfter), 10)
		if within > 0 {
			s += " " + reasonWithinKey + strconv.FormatInt(ceilMs(within), 10)
		}
		if text != "" {
			s += " " + text
		}
	} else {
		s = text
	}
	if len(s) <= MaxReasonBytes {
		return s
	}
	cut := MaxReasonBytes
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut]
}

// ParseReason splits a close reason built by FormatReason into the retry
// hint (0 when there is none), the retry window (0 when there is none) and
// the text. A reason that does not start with "retry_after_ms=" followed by
// a positive number and then a space or the end is returned whole as text
// with neither, so any peer's reason parses; a window is read only right
// after a hint, the same way ("retry_within_ms=", a positive number, a
// space or the end), else what follows the hint is all text.
func ParseReason(reason string) (retryAfter, within time.Duration, text string) {
	ms, rest, ok := reasonField(reason, reasonRetryKey)
	if !ok {
		return 0, 0, reason
	}
	retryAfter = time.Duration(ms) * time.Millisecond
	if w, after, ok := reasonField(rest, reasonWithinKey); ok {
		within, rest = time.Duration(w)*time.Millisecond, after
	}
	return retryAfter, within, rest
}

// reasonField reads "key" + a positive count of milliseconds (at most 12
// digits) at the start of s, followed by a space or the end; rest is what
// follows the space.
func reasonField(s, key string) (ms int64, rest string, ok bool) {
	rest, ok = strings.CutPrefix(s, key)
	if !ok {
		return 0, s, false
	}
	end := 0
	for end < len(rest) && rest[end] >= '0' && rest[end] <= '9' {
		end++
	}
	if end == 0 || end > 12 || (end < len(rest) && rest[end] != ' ') {
		return 0, s, false
	}
	ms, err := strconv.ParseInt(rest[:end], 10, 64)
	if err != nil || ms == 0 {
		return 0, s, false
	}
	rest = rest[end:]
	if rest != "" {
		rest = rest[1:]
	}
	return ms, rest, true
}

// Close describes how a session ends: the code, an optional retry hint and
// a text. It is the one value a transport turns into a WebSocket close frame
// (Reason) or a gRPC status (Status). The zero value is a normal close.
//
// RetryWithin is the retry window: with a positive RetryAfter, the server
// has spaced the clients it sends away itself (a virtual queue's places, a
// drain's pace) and asks each to come back uniformly within [RetryAfter,
// RetryAfter + RetryWithin] rather than to add its own policy's jitter
// above the hint (package backoff: Backoff.HintWithin), which would stretch
// the herd's return over as long again. Zero leaves the jitter to the
// client's policy, as from a server that sends no window.
type Close struct {
	Code        CloseCode
	RetryAfter  time.Duration
	RetryWithin time.Duration
	Text        string
}

// Reason returns the WebSocket close reason of c (FormatReason).
func (c Close) Reason() string { return FormatReason(c.RetryAfter, c.RetryWithin, c.Text) }

// Error returns "wire: close 1013 try again later: text (retry after 2s)".
func (c Close) Error() string {
	s := "wire: close " + c.Code.String()
	if c.Text != "" {
		s += ": " + c.Text
	}
	if c.RetryAfter > 0 {
		s += " (retry after " + c.RetryAfter.String()
		if c.RetryWithin > 0 {
			s += " within " + c.RetryWithin.String()
		}
		s += ")"
	}
	return s
}

// grpcDomain is the ErrorInfo domain of the statuses built by Status.
const grpcDomain = "corral.v1"

// Status returns the gRPC status a gRPC session or Publish call ends with:
// the code from GRPCCode, the text as message, a RetryInfo detail when
// RetryAfter is positive and an ErrorInfo detail carrying the exact close
// code and the retry window, metadata retry_within_ms, when there is one
// with the hint (so CloseFromStatus gets back what Status was given). A normal close
// gives a nil error from Status(...).Err().
func (c Close) Status() *status.Status {
	st := status.New(c.Code.GRPCCode(), c.Text)
	if c.Code == CloseNormal {
		return st
	}
	var details []protoadapt.MessageV1
	md := map[string]string{"close_code": strconv.Itoa(int(c.Code))}
	if c.RetryAfter > 0 && c.RetryWithin > 0 {
		md["retry_within_ms"] = strconv.FormatInt(ceilMs(c.RetryWithin), 10)
	}
	details = append(details, &errdetails.ErrorInfo{
		Reason:   "CLOSE_" + strconv.Itoa(int(c.Code)),
		Domain:   grpcDomain,
		Metadata: md,
	})
	if c.RetryAfter > 0 {
		details = append(details, &errdetails.RetryInfo{RetryDelay: durationpb.New(c.RetryAfter)})
	}
	withDetails, err := st.WithDetails(details...)
	if err != nil {
		return st
	}
	return withDetails
}

// CloseFromStatus reads a gRPC error back into a Close: the exact close code
// if the status carries corral's ErrorInfo, else CloseCodeFromGRPC of its
// code; the retry hint from RetryInfo; the message as text. A nil error is a
// normal close; an error that is not a gRPC status is CloseInternal.
//
// One bare status is read by its message: grpc-go refuses a message above
// a side's size limit itself, before the handler sees it, with a
// ResourceExhausted that carries no ErrorInfo ("grpc: received message
// larger than max (N vs. M)"); that reads as CloseTooBig, not as the
// CloseRateLimited of a bare ResourceExhausted.
func CloseFromStatus(err error) Close {
	if err == nil {
		return Close{Code: CloseNormal}
	}
	var carrier interface{ GRPCStatus() *status.Status }
	if !errors.As(err, &carrier) {
		return Close{Code: CloseInternal, Text: err.Error()}
	}
	st := carrier.GRPCStatus()
	c := Close{Code: CloseCodeFromGRPC(st.Code()), Text: st.Message()}
	if st.Code() == codes.OK {
		return Close{Code: CloseNormal}
	}
	if st.Code() == codes.ResourceExhausted && grpcSizeLimit(st.Message()) {
		c.Code = CloseTooBig
	}
	for _, d := range st.Details() {
		switch d := d.(type) {
		case *errdetails.ErrorInfo:
			if d.GetDomain() != grpcDomain {
				continue
			}
			n, perr := strconv.Atoi(d.GetMetadata()["close_code"])
			if perr == nil && n > 0 && n < 5000 {
				c.Code = CloseCode(n)
			}
			if w, werr := strconv.ParseUint(d.GetMetadata()["retry_within_ms"], 10, 32); werr == nil {
				c.RetryWithin = time.Duration(w) * time.Millisecond
			}
		case *errdetails.RetryInfo:
			if rd := d.GetRetryDelay(); rd != nil && rd.IsValid() {
				c.RetryAfter = rd.AsDuration()
			}
		}
	}
	if c.RetryAfter <= 0 {
		c.RetryWithin = 0 // a window means nothing without its hint
	}
	return c
}

// grpcSizeLimit reports whether msg is grpc-go's own text for a message
// over a size limit (received, after decompression, or sent).
func grpcSizeLimit(msg string) bool {
	return strings.HasPrefix(msg, "grpc: received message larger than max") ||
		strings.HasPrefix(msg, "grpc: message after decompression larger than max") ||
		strings.HasPrefix(msg, "grpc: received message after decompression larger than max") ||
		strings.HasPrefix(msg, "grpc: message too large") ||
		strings.HasPrefix(msg, "trying to send message larger than max")
}

// CloseOf returns the Close carried by err: err itself (or one it wraps)
// when it is a Close or a *DecodeError, else CloseInternal with err's text.
// A nil err is a normal close.
func CloseOf(err error) Close {
	if err == nil {
		return Close{Code: CloseNormal}
	}
	var c Close
	if errors.As(err, &c) {
		return c
	}
	var de *DecodeError
	if errors.As(err, &de) {
		return Close{Code: de.Code, Text: de.Error()}
	}
	return Close{Code: CloseInternal, Text: fmt.Sprint(err)}
}
