package e2e

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/corralhq/corral/backoff"
	"github.com/corralhq/corral/wire"
	"github.com/corralhq/corral/wire/corralv1"
)

var (
	numberRows = regexp.MustCompile(`\[[-0-9.e+,\s]*\]`)
	spaces     = regexp.MustCompile(`\s+`)
)

var update = flag.Bool("update", false, "rewrite the reference tables in sdk/js/test/reference")

// backoffCase is one policy configuration of the table, in milliseconds as
// the SDK takes it (BackoffOptions).
type backoffCase struct {
	Options map[string]any `json:"options"`
	// Delays: [attempt, prevMs, u, delay in nanoseconds].
	Delays [][4]float64 `json:"delays"`
	// Hints: [hintMs, u, delay in nanoseconds].
	Hints [][3]float64 `json:"hints"`
	// Sequence: a Backoff fed the draws in order, with hints and resets:
	// each step is {"op": "next"|"hint"|"reset", "ms": hint, "within":
	// the hint's retry window (HintWithin), "ns": result}.
	Sequence []seqStep `json:"sequence"`
}

type seqStep struct {
	Op     string  `json:"op"`
	Ms     float64 `json:"ms,omitempty"`
	Within float64 `json:"within,omitempty"`
	U      float64 `json:"u,omitempty"`
	Ns     int64   `json:"ns,omitempty"`
}

// seqRand returns the draws of a sequence in order.
type seqRand struct{ u []float64 }

func (r *seqRand) Float64() float64 {
	u := r.u[0]
	r.u = r.u[1:]
	return u
}

func ms(v float64) time.Duration { return time.Duration(v * float64(time.Millisecond)) }

func backoffTable(t *testing.T) []backoffCase {
	configs := []backoffCase{
		{Options: map[string]any{}},
		{Options: map[string]any{"policy": "full", "baseMs": 50, "capMs": 5000}},
		{Options: map[string]any{"policy": "equal"}},
		{Options: map[string]any{"policy": "decorrelated", "baseMs": 100, "capMs": 20000}},
		{Options: map[string]any{"policy": "grpc"}},
		{Options: map[string]any{"policy": "grpc", "jitter": 0.5, "multiplier": 2.5}},
		{Options: map[string]any{"policy": "exponential", "baseMs": 10, "capMs": 1000, "multiplier": 1.5}},
		{Options: map[string]any{"policy": "none", "baseMs": 250}},
		{Options: map[string]any{"policy": "full", "maxHintMs": 60000}},
	}
	us := []float64{0, 1e-9, 0.1, 0.25, 0.5, 0.7071, 0.999999, 1}
	attempts := []int{0, 1, 2, 3, 5, 8, 13, 40, 200}
	prevs := []float64{0, 50, 333.3, 5000, 1e6}
	hints := []float64{1, 250, 1000, 1500, 7200000}
	for i := range configs {
		c := &configs[i]
		cfg := backoff.Config{Policy: str(c.Options["policy"]), Base: ms(num(c.Options["baseMs"])), Cap: ms(num(c.Options["capMs"])),
			Multiplier: num(c.Options["multiplier"]), Jitter: num(c.Options["jitter"]), MaxHint: ms(num(c.Options["maxHintMs"]))}
		p, err := backoff.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range attempts {
			for _, prev := range prevs {
				for _, u := range us {
					c.Delays = append(c.Delays, [4]float64{float64(a), prev, u, float64(p.Delay(a, ms(prev), u))})
				}
			}
		}
		for _, h := range hints {
			for _, u := range us {
				c.Hints = append(c.Hints, [3]float64{h, u, float64(p.HintDelay(ms(h), u))})
			}
		}
		// A reconnect loop: failures, a server hint (the floor of one delay),
		// two hints before one delay (the larger wins), a success (reset);
		// then retry windows: a hint with its window, a larger hint's window
		// beating a smaller hint's, a larger hint without a window beating
		// one with, a negative window (none), an hour's hint and window
		// (clamped to max_hint), a window dropped by reset.
		script := []seqStep{{Op: "next", U: 0.3}, {Op: "next", U: 0.9}, {Op: "hint", Ms: 1200}, {Op: "next", U: 0.5},
			{Op: "next", U: 0.05}, {Op: "hint", Ms: 300}, {Op: "hint", Ms: 2000}, {Op: "next", U: 0.75}, {Op: "next", U: 1},
			{Op: "reset"}, {Op: "hint", Ms: 500}, {Op: "reset"}, {Op: "next", U: 0.6}, {Op: "next", U: 0.2},
			{Op: "hint", Ms: 700, Within: 150}, {Op: "next", U: 0.4}, {Op: "next", U: 0.7},
			{Op: "hint", Ms: 900, Within: 50}, {Op: "hint", Ms: 400, Within: 5000}, {Op: "next", U: 1},
			{Op: "hint", Ms: 300, Within: 100}, {Op: "hint", Ms: 600}, {Op: "next", U: 0.5},
			{Op: "hint", Ms: 800, Within: -20}, {Op: "next", U: 0.9},
			{Op: "hint", Ms: 7200000, Within: 7200000}, {Op: "next", U: 0.5},
			{Op: "hint", Ms: 1000, Within: 10}, {Op: "reset"}, {Op: "next", U: 0.8}}
		r := &seqRand{}
		for _, s := range script {
			if s.Op == "next" {
				r.u = append(r.u, s.U)
			}
		}
		b, err := backoff.NewBackoff(cfg, r)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range script {
			switch s.Op {
			case "next":
				s.Ns = int64(b.Next())
			case "hint":
				if s.Within != 0 {
					b.HintWithin(ms(s.Ms), ms(s.Within))
				} else {
					b.Hint(ms(s.Ms))
				}
			case "reset":
				b.Reset()
			}
			c.Sequence = append(c.Sequence, s)
		}
	}
	return configs
}

func str(v any) string {
	s, _ := v.(string)
	return s
}

func num(v any) float64 {
	switch n := v.(type) {
	case int:
		return float64(n)
	case float64:
		return n
	}
	return 0
}

// frameCase is a frame encoded by package wire, in both formats. The SDK's
// tests build the same frame by name and compare: client frames byte for
// byte (proto) and field for field (JSON); server frames are decoded.
type frameCase struct {
	Name  string `json:"name"`
	Proto string `json:"proto"` // hex
	JSON  string `json:"json"`
}

func clientFrames() map[string]*corralv1.ClientFrame {
	return map[string]*corralv1.ClientFrame{
		"hello": {Id: 1, Frame: &corralv1.ClientFrame_Hello{Hello: &corralv1.Hello{
			Token: "eyJhbGciOiJIUzI1NiJ9.e30.sig", Priority: corralv1.Priority_PRIORITY_P1,
			Subscribe: []*corralv1.Subscribe{
				{Channel: "news", From: &corralv1.Position{Epoch: "ep-1", Offset: 41}},
				{Channel: "chat.room-7"},
				{Channel: "zero", From: &corralv1.Position{}},
			},
			PreviousSessionId: "s-123", Client: "corral-js/0.1.0",
		}}},
		"hello-p2-bare": {Id: 1, Frame: &corralv1.ClientFrame_Hello{Hello: &corralv1.Hello{Token: "t", Priority: corralv1.Priority_PRIORITY_P2}}},
		"subscribe":     {Id: 7, Frame: &corralv1.ClientFrame_Subscribe{Subscribe: &corralv1.Subscribe{Channel: "news.eu", From: &corralv1.Position{Epoch: "e", Offset: 1 << 40}}}},
		"unsubscribe":   {Id: 300, Frame: &corralv1.ClientFrame_Unsubscribe{Unsubscribe: &corralv1.Unsubscribe{Channel: "news"}}},
		"publish": {Id: 9, Frame: &corralv1.ClientFrame_Publish{Publish: &corralv1.Publish{
			Channel: "news", Priority: corralv1.Priority_PRIORITY_P0, Data: []byte("héllo\x00\xff"), ClientMessageId: "m-1"}}},
		"ack":  {Frame: &corralv1.ClientFrame_Ack{Ack: &corralv1.Ack{Channel: "news", Epoch: "ep-1", Offset: 9007199254740991}}},
		"pong": {Id: 5, Frame: &corralv1.ClientFrame_Pong{Pong: &corralv1.Pong{Payload: []byte{1, 2, 3}}}},
		"ping": {Id: 6, Frame: &corralv1.ClientFrame_Ping{Ping: &corralv1.Ping{}}},
	}
}

func serverFrames() map[string]*corralv1.ServerFrame {
	return map[string]*corralv1.ServerFrame{
		"welcome": {Id: 1, Frame: &corralv1.ServerFrame_Welcome{Welcome: &corralv1.Welcome{
			SessionId: "s-1", NodeId: "hub-1", NodeEpoch: "n-2", ServerTimeUnixMs: 1764582000123,
			Hints: &corralv1.ServerHints{PingIntervalMs: 25000, MaxFrameBytes: 65536, MaxSubscriptions: 128, ReconnectBaseMs: 50,
				ReconnectCapMs: 5000, HistoryWindowMs: 30000, PublishRatePerSecond: 50},
			Priority: corralv1.Priority_PRIORITY_P0,
		}}},
		"subscribed": {Id: 1, Frame: &corralv1.ServerFrame_Subscribed{Subscribed: &corralv1.Subscribed{
			Channel: "news", Position: &corralv1.Position{Epoch: "ep-1", Offset: 45}, Resumed: true}}},
		"unsubscribed": {Frame: &corralv1.ServerFrame_Unsubscribed{Unsubscribed: &corralv1.Unsubscribed{Channel: "news", Reason: "bye"}}},
		"published":    {Id: 9, Frame: &corralv1.ServerFrame_Published{Published: &corralv1.Published{Channel: "news", Epoch: "ep-1", Offset: 46, Duplicate: true}}},
		"message": {Frame: &corralv1.ServerFrame_Message{Message: &corralv1.Message{
			Channel: "news", Epoch: "ep-1", Offset: 1<<53 - 1, Priority: corralv1.Priority_PRIORITY_P0, Data: []byte("héllo\x00\xff"), TimeUnixMs: -5}}},
		"message-unspecified": {Frame: &corralv1.ServerFrame_Message{Message: &corralv1.Message{Channel: "a", Epoch: "e", Offset: 1}}},
		"gap":                 {Frame: &corralv1.ServerFrame_Gap{Gap: &corralv1.Gap{Channel: "news", Epoch: "ep-1", FromOffset: 10, ToOffset: 12, Reason: "slow consumer"}}},
		"goaway":              {Frame: &corralv1.ServerFrame_GoAway{GoAway: &corralv1.GoAway{Code: 1001, Reason: "draining", RetryAfterMs: 1500, Drain: true}}},
		"goaway-window":       wire.Close{Code: wire.CloseGoingAway, RetryAfter: 1500 * time.Millisecond, RetryWithin: 250 * time.Millisecond, Text: "draining"}.GoAwayFrame(true),
		"ping":                {Frame: &corralv1.ServerFrame_Ping{Ping: &corralv1.Ping{}}},
		"pong":                {Id: 4, Frame: &corralv1.ServerFrame_Pong{Pong: &corralv1.Pong{Payload: []byte("x")}}},
		"error":               {Id: 1, Frame: &corralv1.ServerFrame_Error{Error: &corralv1.Error{Code: 4005, Text: "channel secret not allowed by the token", Channel: "secret"}}},
		"error-close":         {Frame: &corralv1.ServerFrame_Error{Error: &corralv1.Error{Code: 1013, Text: "overloaded", RetryAfterMs: 2000}}},
		"error-window":        wire.Close{Code: wire.CloseTryAgainLater, RetryAfter: 2 * time.Second, RetryWithin: 120 * time.Millisecond, Text: "overloaded"}.ErrorFrame(0),
	}
}

// reasonCase is a WebSocket close reason as wire.ParseReason reads it:
// the SDK's parseReason must read it the same.
type reasonCase struct {
	Reason   string `json:"reason"`
	AfterMs  int64  `json:"retryAfterMs"`
	WithinMs int64  `json:"retryWithinMs"`
	Text     string `json:"text"`
}

// reasons returns the close reasons of wire's TestReasonRoundTrip (as
// FormatReason writes them) and TestParseReasonForeign, and a few more,
// as ParseReason reads them.
func reasons() []reasonCase {
	in := []string{
		wire.FormatReason(1234*time.Millisecond, 0, "draining"),
		wire.FormatReason(2*time.Second, 0, ""),
		wire.FormatReason(1500*time.Microsecond, 0, ""),
		wire.FormatReason(1234*time.Millisecond, 120*time.Millisecond, "full"),
		wire.FormatReason(time.Second, 1500*time.Microsecond, ""),
		wire.FormatReason(0, time.Second, "bye"),
		wire.FormatReason(time.Second, 0, "retry_within_ms=x"),
		wire.FormatReason(time.Second, 100*time.Millisecond, strings.Repeat("é", 100)),
		"", "bye", "going away", "retry_after_ms=", "retry_after_ms=x", "retry_after_ms=12x", "retry_after_ms=0 x",
		"retry_after_ms=99999999999999999 big", "retry_after_ms=999999999999 twelve digits", "Retry_after_ms=5", "retry_within_ms=5 text",
		"retry_after_ms=5 retry_within_ms=", "retry_after_ms=5 retry_within_ms=0 x", "retry_after_ms=5 retry_within_ms=7x",
		"retry_after_ms=5 retry_within_ms=9999999999999 x", "retry_after_ms=5 retry_within_ms=999999999999",
		"retry_after_ms=5  retry_within_ms=7 two spaces", "retry_after_ms=5 retry_within_ms=7 retry_within_ms=8",
		"retry_after_ms=5 x retry_within_ms=7",
	}
	out := make([]reasonCase, 0, len(in))
	for _, s := range in {
		r, w, text := wire.ParseReason(s)
		out = append(out, reasonCase{Reason: s, AfterMs: r.Milliseconds(), WithinMs: w.Milliseconds(), Text: text})
	}
	return out
}

// reference is the file the SDK's unit tests read.
type reference struct {
	Note    string        `json:"note"`
	Backoff []backoffCase `json:"backoff"`
	Client  []frameCase   `json:"client"`
	Server  []frameCase   `json:"server"`
	Reasons []reasonCase  `json:"reasons"`
}

func encodeAll[F any](t *testing.T, frames map[string]F, enc func(*wire.Codec, []byte, F) ([]byte, error)) []frameCase {
	pc, err := wire.NewCodec(wire.FormatProto, wire.Config{})
	if err != nil {
		t.Fatal(err)
	}
	jc, err := wire.NewCodec(wire.FormatJSON, wire.Config{})
	if err != nil {
		t.Fatal(err)
	}
	var out []frameCase
	for name, f := range frames {
		b, err := enc(pc, nil, f)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		j, err := enc(jc, nil, f)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		// protojson adds random spaces so that nobody depends on its
		// layout; compact it so the file is stable.
		var cj bytes.Buffer
		if err := json.Compact(&cj, j); err != nil {
			t.Fatal(err)
		}
		out = append(out, frameCase{Name: name, Proto: hex.EncodeToString(b), JSON: cj.String()})
	}
	sortCases(out)
	return out
}

func sortCases(c []frameCase) {
	for i := 1; i < len(c); i++ {
		for j := i; j > 0 && c[j].Name < c[j-1].Name; j-- {
			c[j], c[j-1] = c[j-1], c[j]
		}
	}
}

// TestReference checks that test/reference/go.json is what package backoff
// and package wire produce today (run with -update to rewrite it), so the
// SDK's unit tests compare with the real Go values.
func TestReference(t *testing.T) {
	ref := reference{
		Note:    "Written by `go test ./sdk/js/e2e -run TestReference -update` from packages backoff and wire; read by test/reference.test.ts. Do not edit.",
		Backoff: backoffTable(t),
		Client: encodeAll(t, clientFrames(), func(c *wire.Codec, dst []byte, f *corralv1.ClientFrame) ([]byte, error) {
			return c.AppendClientFrame(dst, f)
		}),
		Server: encodeAll(t, serverFrames(), func(c *wire.Codec, dst []byte, f *corralv1.ServerFrame) ([]byte, error) {
			return c.AppendServerFrame(dst, f)
		}),
		Reasons: reasons(),
	}
	got, err := json.MarshalIndent(ref, "", " ")
	if err != nil {
		t.Fatal(err)
	}
	// One row of numbers per line keeps the file small and its diffs readable.
	got = numberRows.ReplaceAllFunc(got, func(b []byte) []byte { return spaces.ReplaceAll(b, nil) })
	got = append(got, '\n')
	path := filepath.Join("..", "test", "reference", "go.json")
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (write it with -update)", err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s is not what packages backoff and wire produce now: rerun with -update and run the SDK's unit tests (npm test in sdk/js)", path)
	}
}
