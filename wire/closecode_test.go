package wire

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

func TestCloseCodeTable(t *testing.T) {
	seen := map[CloseCode]bool{}
	prev := CloseCode(0)
	for _, c := range CloseCodes() {
		if seen[c] {
			t.Errorf("%v listed twice", c)
		}
		seen[c] = true
		if c <= prev {
			t.Errorf("CloseCodes not in numeric order at %v", c)
		}
		prev = c
		if !c.Known() || !strings.Contains(c.String(), " ") {
			t.Errorf("%d has no name", c)
		}
		if c != CloseNormal && c.GRPCCode() == codes.OK {
			t.Errorf("%v maps to gRPC OK", c)
		}
		if c >= 1004 && c <= 1006 || c == 1015 {
			t.Errorf("%v is reserved by RFC 6455 and must not be sent", c)
		}
	}
	if CloseCode(4999).Known() || CloseCode(4999).String() != "4999" {
		t.Error("unknown code has a name")
	}
	if CloseCode(4999).GRPCCode() != codes.Unknown {
		t.Error("unknown code does not map to codes.Unknown")
	}
}

func TestGRPCMapping(t *testing.T) {
	want := map[CloseCode]codes.Code{
		ClosePolicyViolation: codes.Unauthenticated,
		CloseTryAgainLater:   codes.Unavailable,
		CloseGoingAway:       codes.Unavailable,
		CloseTooBig:          codes.ResourceExhausted,
		CloseRateLimited:     codes.ResourceExhausted,
		CloseSlowConsumer:    codes.ResourceExhausted,
		CloseForbidden:       codes.PermissionDenied,
		CloseProtocolError:   codes.InvalidArgument,
		CloseInternal:        codes.Internal,
	}
	for cc, gc := range want {
		if got := cc.GRPCCode(); got != gc {
			t.Errorf("%v.GRPCCode() = %v, want %v", cc, got, gc)
		}
	}
	// Where the mapping is one to one, CloseCodeFromGRPC inverts it.
	for _, cc := range []CloseCode{ClosePolicyViolation, CloseForbidden, CloseInternal, CloseHandshakeTimeout, CloseResumeImpossible, CloseSessionReplaced, CloseTryAgainLater, CloseProtocolError, CloseRateLimited} {
		if back := CloseCodeFromGRPC(cc.GRPCCode()); back != cc {
			t.Errorf("CloseCodeFromGRPC(%v) = %v, want %v", cc.GRPCCode(), back, cc)
		}
	}
	if CloseCodeFromGRPC(codes.DataLoss) != CloseInternal {
		t.Error("unmapped gRPC code is not CloseInternal")
	}
}

func TestReasonRoundTrip(t *testing.T) {
	cases := []struct {
		name          string
		retry, within time.Duration
		text          string
		want          string
		wantW         time.Duration // the window read back
	}{
		{name: "hint and text", retry: 1234 * time.Millisecond, text: "draining", want: "retry_after_ms=1234 draining"},
		{name: "hint only", retry: 2 * time.Second, want: "retry_after_ms=2000"},
		{name: "text only", text: "bye", want: "bye"},
		{name: "sub-millisecond hint rounds up", retry: 1500 * time.Microsecond, want: "retry_after_ms=2"},
		{name: "text that looks like a hint", text: "retry_after_ms=x", want: "retry_after_ms=x"},
		{name: "hint, window and text", retry: 1234 * time.Millisecond, within: 120 * time.Millisecond, text: "full", want: "retry_after_ms=1234 retry_within_ms=120 full", wantW: 120 * time.Millisecond},
		{name: "hint and window", retry: time.Second, within: 1500 * time.Microsecond, want: "retry_after_ms=1000 retry_within_ms=2", wantW: 2 * time.Millisecond},
		{name: "window without a hint is dropped", within: time.Second, text: "bye", want: "bye"},
		{name: "text that looks like a window", retry: time.Second, text: "retry_within_ms=x", want: "retry_after_ms=1000 retry_within_ms=x"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := FormatReason(tc.retry, tc.within, tc.text)
			if got != tc.want {
				t.Fatalf("FormatReason = %q, want %q", got, tc.want)
			}
			r, w, text := ParseReason(got)
			wantRetry := tc.retry.Round(0)
			if tc.retry%time.Millisecond != 0 {
				wantRetry = (tc.retry/time.Millisecond + 1) * time.Millisecond
			}
			if r != wantRetry || w != tc.wantW || text != tc.text {
				t.Errorf("ParseReason(%q) = %v, %v, %q; want %v, %v, %q", got, r, w, text, wantRetry, tc.wantW, tc.text)
			}
		})
	}
}

func TestParseReasonForeign(t *testing.T) {
	for _, s := range []string{"", "going away", "retry_after_ms=", "retry_after_ms=12x", "retry_after_ms=99999999999999999 big", "Retry_after_ms=5", "retry_within_ms=5 text"} {
		r, w, text := ParseReason(s)
		if r != 0 || w != 0 || text != s {
			t.Errorf("ParseReason(%q) = %v, %v, %q; want no hint and the text whole", s, r, w, text)
		}
	}
	// After a hint, anything but a well-formed window is text.
	for _, s := range []string{"retry_within_ms=", "retry_within_ms=0 x", "retry_within_ms=7x", "retry_within_ms=9999999999999 x"} {
		r, w, text := ParseReason("retry_after_ms=5 " + s)
		if r != 5*time.Millisecond || w != 0 || text != s {
			t.Errorf("ParseReason(hint + %q) = %v, %v, %q; want the hint, no window and the rest as text", s, r, w, text)
		}
	}
}

func TestReasonLength(t *testing.T) {
	long := strings.Repeat("é", 100) // 200 bytes
	got := FormatReason(time.Second, 100*time.Millisecond, long)
	if len(got) > MaxReasonBytes {
		t.Fatalf("reason of %d bytes, limit %d", len(got), MaxReasonBytes)
	}
	if !utf8.ValidString(got) {
		t.Fatalf("reason cut inside a rune: %q", got)
	}
	if r, w, _ := ParseReason(got); r != time.Second || w != 100*time.Millisecond {
		t.Errorf("hint or window lost after the cut: %v, %v", r, w)
	}
}

func TestStatusRoundTrip(t *testing.T) {
	for _, c := range []Close{
		{Code: CloseTryAgainLater, RetryAfter: 1500 * time.Millisecond, Text: "admission"},
		{Code: CloseTryAgainLater, RetryAfter: 1500 * time.Millisecond, RetryWithin: 90 * time.Millisecond, Text: "admission"},
		{Code: CloseGoingAway, RetryAfter: 3 * time.Second, Text: "drain"},
		{Code: ClosePolicyViolation, Text: "token expired"},
		{Code: CloseSlowConsumer},
		{Code: CloseSubscriptionLimit, Text: "100 channels"},
	} {
		err := c.Status().Err()
		st, _ := status.FromError(err)
		if st.Code() != c.Code.GRPCCode() {
			t.Errorf("%v: status code %v", c.Code, st.Code())
		}
		back := CloseFromStatus(fmt.Errorf("wrapped: %w", err))
		if back != c {
			t.Errorf("CloseFromStatus(Status(%+v)) = %+v", c, back)
		}
	}
	if err := (Close{Code: CloseNormal}).Status().Err(); err != nil {
		t.Errorf("normal close gives error %v", err)
	}
	if CloseFromStatus(nil).Code != CloseNormal {
		t.Error("nil error is not a normal close")
	}
	// A status from another server: the code is mapped, the hint is absent.
	if got := CloseFromStatus(status.Error(codes.Unauthenticated, "no")); got.Code != ClosePolicyViolation || got.Text != "no" {
		t.Errorf("foreign status: %+v", got)
	}
	if got := CloseFromStatus(errors.New("eof")); got.Code != CloseInternal {
		t.Errorf("plain error: %+v", got)
	}
}

func TestCloseOf(t *testing.T) {
	c := Close{Code: CloseRateLimited, RetryAfter: time.Second}
	if got := CloseOf(fmt.Errorf("session: %w", c)); got != c {
		t.Errorf("CloseOf(wrapped Close) = %+v", got)
	}
	if got := CloseOf(errors.New("boom")); got.Code != CloseInternal {
		t.Errorf("CloseOf(plain) = %+v", got)
	}
	if !strings.HasPrefix(c.Error(), "wire: close 4002 rate limited") {
		t.Errorf("Close.Error() = %q", c.Error())
	}
	if c.Reason() != "retry_after_ms=1000" {
		t.Errorf("Reason() = %q", c.Reason())
	}
	if CloseTooBig.Retryable() || !CloseGoingAway.Retryable() || !CloseTryAgainLater.Retryable() {
		t.Error("Retryable")
	}
}

// TestCloseFromStatusSizeLimit: grpc-go refuses an oversize message itself
// with a bare ResourceExhausted; it reads as 1009, and any other bare
// ResourceExhausted as 4002.
func TestCloseFromStatusSizeLimit(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want CloseCode
	}{
		{"received above the limit", status.Error(codes.ResourceExhausted, "grpc: received message larger than max (70000 vs. 65536)"), CloseTooBig},
		{"sent above the limit", status.Error(codes.ResourceExhausted, "trying to send message larger than max (70000 vs. 65536)"), CloseTooBig},
		{"other bare ResourceExhausted", status.Error(codes.ResourceExhausted, "quota"), CloseRateLimited},
		{"corral's own 4002", Close{Code: CloseRateLimited, Text: "grpc: received message larger than max"}.Status().Err(), CloseRateLimited},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := CloseFromStatus(tc.err).Code; got != tc.want {
				t.Fatalf("CloseFromStatus = %v, want %v", got, tc.want)
			}
		})
	}
}
