package wire

import (
	"errors"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/corralhq/corral/wire/corralv1"
)

// fuzzSeeds adds valid frames of both kinds in the format of c, plus a few
// malformed inputs, to the corpus.
func fuzzSeeds(f *testing.F, c *Codec) {
	for _, fr := range sampleClientFrames() {
		b, err := c.AppendClientFrame(nil, fr)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	for _, fr := range sampleServerFrames() {
		b, err := c.AppendServerFrame(nil, fr)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	for _, s := range []string{"", "{}", "{", "\xff", "\x08\xff", "\x0f", `{"hello":{"subscribe":[{}]}}`, `{"id":"-1"}`} {
		f.Add([]byte(s))
	}
}

// checkDecode asserts the contract of a decode: no panic (the fuzzer
// reports one), an error is a *DecodeError of the right class for the
// format, and a frame that decodes encodes again and decodes to itself.
func checkDecode(t *testing.T, c *Codec, data []byte) {
	var cf corralv1.ClientFrame
	err := c.DecodeClientFrame(data, &cf)
	if err != nil {
		var de *DecodeError
		if !errors.As(err, &de) {
			t.Fatalf("error is not a *DecodeError: %v", err)
		}
		switch {
		case len(data) > c.Config().MaxFrameBytes:
			if de.Code != CloseTooBig {
				t.Fatalf("oversized input closed with %v", de.Code)
			}
		case errors.Is(err, ErrEmptyFrame):
			if de.Code != CloseProtocolError {
				t.Fatalf("empty frame closed with %v", de.Code)
			}
		case c.Format() == FormatProto:
			if de.Code != CloseProtocolError {
				t.Fatalf("malformed binary closed with %v: %v", de.Code, err)
			}
		default:
			if de.Code != CloseInvalidPayload {
				t.Fatalf("malformed text closed with %v: %v", de.Code, err)
			}
			if !utf8.Valid(data) && !errors.Is(err, ErrInvalidUTF8) {
				t.Fatalf("invalid UTF-8 not reported as such: %v", err)
			}
		}
	} else {
		// Content checks never panic either and return a Close.
		if cerr := c.CheckClientFrame(&cf); cerr != nil {
			var cl Close
			if !errors.As(cerr, &cl) || cl.Code == CloseNormal {
				t.Fatalf("CheckClientFrame returned %v", cerr)
			}
		}
		out, aerr := c.AppendClientFrame(nil, &cf)
		if aerr == nil {
			var again corralv1.ClientFrame
			if derr := c.DecodeClientFrame(out, &again); derr != nil {
				t.Fatalf("re-encoded frame %q does not decode: %v", out, derr)
			}
		} else if !errors.Is(aerr, ErrTooBig) {
			t.Fatalf("decoded frame does not encode: %v", aerr)
		}
	}
	var sf corralv1.ServerFrame
	if err := c.DecodeServerFrame(data, &sf); err != nil {
		var de *DecodeError
		if !errors.As(err, &de) {
			t.Fatalf("server frame error is not a *DecodeError: %v", err)
		}
	}
}

func FuzzDecodeProto(f *testing.F) {
	c, err := NewCodec(FormatProto, Config{MaxFrameBytes: 4096})
	if err != nil {
		f.Fatal(err)
	}
	fuzzSeeds(f, c)
	f.Fuzz(func(t *testing.T, data []byte) { checkDecode(t, c, data) })
}

func FuzzDecodeJSON(f *testing.F) {
	c, err := NewCodec(FormatJSON, Config{MaxFrameBytes: 4096})
	if err != nil {
		f.Fatal(err)
	}
	fuzzSeeds(f, c)
	f.Fuzz(func(t *testing.T, data []byte) { checkDecode(t, c, data) })
}

func FuzzParseReason(f *testing.F) {
	for _, s := range []string{"", "retry_after_ms=1", "retry_after_ms=12 x", "retry_after_ms=", "abc", "retry_after_ms=3 retry_within_ms=4 y", "retry_after_ms=3 retry_within_ms="} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		r, w, text := ParseReason(s)
		if r < 0 || w < 0 || (r == 0 && w != 0) {
			t.Fatalf("hint %v, window %v from %q", r, w, s)
		}
		if r > 0 {
			again := FormatReason(r, w, text)
			r2, w2, t2 := ParseReason(again)
			uncut := len(reasonRetryKey) + len(strconv.FormatInt(r.Milliseconds(), 10)) + 1 + len(text)
			if w > 0 {
				uncut += len(reasonWithinKey) + len(strconv.FormatInt(w.Milliseconds(), 10)) + 1
			}
			if r2 != r || (w2 != w && len(again) < MaxReasonBytes) || !strings.HasPrefix(text, t2) || (uncut <= MaxReasonBytes && t2 != text) {
				t.Fatalf("%q -> (%v, %v, %q) -> %q -> (%v, %v, %q)", s, r, w, text, again, r2, w2, t2)
			}
		} else if text != s {
			t.Fatalf("no hint but text changed: %q -> %q", s, text)
		}
	})
}
