package wire

import (
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

func TestPushback(t *testing.T) {
	for _, tc := range []struct {
		name string
		md   metadata.MD
		want time.Duration
	}{
		{"absent", nil, 0},
		{"millis", metadata.Pairs(PushbackKey, "1500"), 1500 * time.Millisecond},
		{"spaces", metadata.Pairs(PushbackKey, " 20 "), 20 * time.Millisecond},
		{"zero", metadata.Pairs(PushbackKey, "0"), 0},
		{"negative", metadata.Pairs(PushbackKey, "-5"), 0},
		{"malformed", metadata.Pairs(PushbackKey, "5s"), 0},
		{"over 32 bits", metadata.Pairs(PushbackKey, "4294967296"), 0},
	} {
		if got := Pushback(tc.md); got != tc.want {
			t.Errorf("%s: Pushback(%v) = %v, want %v", tc.name, tc.md, got, tc.want)
		}
	}
}

func TestPushbackTrailerRoundTrip(t *testing.T) {
	if md := PushbackTrailer(Close{Code: CloseTryAgainLater}); md != nil {
		t.Errorf("no hint: trailer %v, want none", md)
	}
	c := Close{Code: CloseTryAgainLater, RetryAfter: 2500 * time.Millisecond, Text: "busy"}
	md := PushbackTrailer(c)
	if got := Pushback(md); got != c.RetryAfter {
		t.Errorf("trailer %v reads as %v, want %v", md, got, c.RetryAfter)
	}
	// A bare status (no RetryInfo) takes the trailer's hint.
	bare := status.Error(codes.Unavailable, "busy")
	if got := CloseFromStream(bare, md); got.RetryAfter != c.RetryAfter {
		t.Errorf("bare status with trailer: hint %v, want %v", got.RetryAfter, c.RetryAfter)
	}
	// corral's own status carries RetryInfo: it wins over the trailer.
	own := Close{Code: CloseTryAgainLater, RetryAfter: time.Second, RetryWithin: 100 * time.Millisecond}.Status().Err()
	got := CloseFromStream(own, md)
	if got.RetryAfter != time.Second || got.RetryWithin != 100*time.Millisecond {
		t.Errorf("status with RetryInfo and a trailer: %v / %v, want 1s / 100ms", got.RetryAfter, got.RetryWithin)
	}
	if got := CloseFromStream(bare, nil); got.RetryAfter != 0 {
		t.Errorf("bare status, no trailer: hint %v, want none", got.RetryAfter)
	}
}
