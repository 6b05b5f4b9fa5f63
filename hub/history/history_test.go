package history

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/corralhq/corral/internal/natsutil"
	"github.com/corralhq/corral/internal/testkit"
)

func counter(prefix string) func() string {
	var mu sync.Mutex
	n := 0
	return func() string {
		mu.Lock()
		defer mu.Unlock()
		n++
		return fmt.Sprintf("%s%d", prefix, n)
	}
}

func natsConn(t *testing.T, cfg natsutil.Config) *natsutil.Conn {
	t.Helper()
	c, err := natsutil.Connect(context.Background(), cfg, t.Name(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

func openJS(t *testing.T, c *natsutil.Conn, cfg Config) *JetStream {
	t.Helper()
	j := NewJetStream(cfg, JetStreamOptions{JS: c.JS, FileStorage: c.Persistent()})
	if err := j.Open(context.Background()); err != nil {
		t.Fatal(err)
	}
	return j
}

// stores runs f against both stores, each fresh.
func stores(t *testing.T, cfg Config, f func(t *testing.T, s Store)) {
	t.Run("memory", func(t *testing.T) {
		f(t, NewMemory(cfg, MemoryOptions{Now: testkit.NewClock(time.Unix(1000, 0)).Now}))
	})
	t.Run("jetstream", func(t *testing.T) {
		f(t, openJS(t, natsConn(t, natsutil.Config{}), cfg))
	})
}

func appendN(t *testing.T, s Store, ch string, n int) []Message {
	t.Helper()
	var out []Message
	for i := range n {
		m, err := s.Append(context.Background(), ch, Message{Priority: uint8(i % 3), Data: fmt.Appendf(nil, "m%d", i)})
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, m)
	}
	return out
}

func TestOffsetsCountUpInOneEpoch(t *testing.T) {
	stores(t, Config{}, func(t *testing.T, s Store) {
		ms := appendN(t, s, "t1.room", 5)
		for i, m := range ms {
			if m.Offset != uint64(i+1) || m.Epoch != ms[0].Epoch || m.Epoch == "" {
				t.Fatalf("message %d: offset %d epoch %q, want offset %d in epoch %q", i, m.Offset, m.Epoch, i+1, ms[0].Epoch)
			}
		}
		other := appendN(t, s, "t1.other", 1)
		if other[0].Offset != 1 {
			t.Errorf("a second channel starts at %d, want 1", other[0].Offset)
		}
		cur, err := s.Current(context.Background(), "t1.room")
		if err != nil || cur != (Position{Epoch: ms[0].Epoch, Offset: 5}) {
			t.Errorf("Current = %+v, %v", cur, err)
		}
	})
}

func TestSinceAnswers(t *testing.T) {
	stores(t, Config{MaxMessages: 20}, func(t *testing.T, s Store) {
		ms := appendN(t, s, "c", 30)
		ep := ms[0].Epoch
		cur := Position{Epoch: ep, Offset: 30}
		tests := []struct {
			name      string
			from      Position
			recovered bool
			first     uint64 // offset of the first message returned, 0 for none
			n         int
		}{
			{"no position starts live", Position{}, true, 0, 0},
			{"up to date", cur, true, 0, 0},
			{"missed five", Position{Epoch: ep, Offset: 25}, true, 26, 5},
			{"missed exactly the cap", Position{Epoch: ep, Offset: 10}, true, 11, 20},
			{"missed more than the cap", Position{Epoch: ep, Offset: 9}, false, 0, 0},
			{"another epoch", Position{Epoch: "nope", Offset: 25}, false, 0, 0},
			{"offset from the future", Position{Epoch: ep, Offset: 31}, false, 0, 0},
		}
		for _, tc := range tests {
			t.Run(tc.name, func(t *testing.T) {
				r, err := s.Since(context.Background(), "c", tc.from)
				if err != nil {
					t.Fatal(err)
				}
				if r.Recovered != tc.recovered || len(r.Messages) != tc.n || r.Current != cur {
					t.Fatalf("recovered %v, %d messages, current %+v; want %v, %d, %+v", r.Recovered, len(r.Messages), r.Current, tc.recovered, tc.n, cur)
				}
				for i, m := range r.Messages {
					want := ms[tc.first-1+uint64(i)]
					if m.Offset != want.Offset || string(m.Data) != string(want.Data) || m.Priority != want.Priority || m.Epoch != ep {
						t.Fatalf("message %d = %+v, want %+v", i, m, want)
					}
				}
			})
		}
		r, err := s.Since(context.Background(), "never.used", Position{Epoch: ep, Offset: 3})
		if err != nil || r.Recovered || r.Current != (Position{}) {
			t.Errorf("resume on a channel without history: %+v, %v; want a gap", r, err)
		}
	})
}

func TestMemoryWindowWithInjectedClock(t *testing.T) {
	clk := testkit.NewClock(time.Unix(1000, 0))
	s := NewMemory(Config{Window: 30 * time.Second, MetaTTL: 10 * time.Minute}, MemoryOptions{Now: clk.Now, NewEpoch: counter("e")})
	ctx := context.Background()
	appendN(t, s, "c", 3) // at t=0
	clk.Advance(20 * time.Second)
	appendN(t, s, "c", 2) // offsets 4, 5 at t=20s
	clk.Advance(15 * time.Second)
	// t=35s: offsets 1..3 aged out, 4 and 5 remain.
	r, _ := s.Since(ctx, "c", Position{Epoch: "e1", Offset: 3})
	if !r.Recovered || len(r.Messages) != 2 || r.Messages[0].Offset != 4 {
		t.Fatalf("resume inside the window: %+v", r)
	}
	r, _ = s.Since(ctx, "c", Position{Epoch: "e1", Offset: 2})
	if r.Recovered {
		t.Fatalf("resume from before the window recovered: %+v", r)
	}
	clk.Advance(15 * time.Second)
	// t=50s: every message aged out, but the channel keeps its epoch and
	// last offset: a client that saw offset 5 missed nothing.
	if n := s.Sweep(clk.Now()); n != 0 || s.Channels() != 1 {
		t.Fatalf("Sweep inside MetaTTL dropped %d, %d channels left", n, s.Channels())
	}
	r, _ = s.Since(ctx, "c", Position{Epoch: "e1", Offset: 5})
	if !r.Recovered || len(r.Messages) != 0 || r.Current != (Position{Epoch: "e1", Offset: 5}) {
		t.Fatalf("resume of an idle channel at its last offset: %+v, want recovered, no message, at e1/5", r)
	}
	r, _ = s.Since(ctx, "c", Position{Epoch: "e1", Offset: 4})
	if r.Recovered {
		t.Fatalf("resume from before an aged-out message recovered: %+v", r)
	}
	m := appendN(t, s, "c", 1)[0]
	if m.Epoch != "e1" || m.Offset != 6 {
		t.Fatalf("append to an idle channel: epoch %q offset %d, want e1 at 6", m.Epoch, m.Offset)
	}
	r, _ = s.Since(ctx, "c", Position{Epoch: "e1", Offset: 5})
	if !r.Recovered || len(r.Messages) != 1 || r.Messages[0].Offset != 6 {
		t.Fatalf("resume across the idle time: %+v, want offset 6", r)
	}
	// Silent for MetaTTL: the channel is forgotten and starts over.
	clk.Advance(10 * time.Minute)
	if n := s.Sweep(clk.Now()); n != 1 || s.Channels() != 0 {
		t.Fatalf("Sweep after MetaTTL dropped %d, %d channels left", n, s.Channels())
	}
	m = appendN(t, s, "c", 1)[0]
	if m.Epoch != "e2" || m.Offset != 1 {
		t.Fatalf("after losing the metadata: epoch %q offset %d, want e2 at 1", m.Epoch, m.Offset)
	}
	r, _ = s.Since(ctx, "c", Position{Epoch: "e1", Offset: 6})
	if r.Recovered || r.Current != (Position{Epoch: "e2", Offset: 1}) {
		t.Fatalf("resume from the lost epoch: %+v, want a gap at e2/1", r)
	}
}

func TestMemoryByteCap(t *testing.T) {
	s := NewMemory(Config{MaxBytes: 10}, MemoryOptions{})
	ctx := context.Background()
	for range 5 {
		if _, err := s.Append(ctx, "c", Message{Data: []byte("abcd")}); err != nil {
			t.Fatal(err)
		}
	}
	cur, _ := s.Current(ctx, "c")
	r, _ := s.Since(ctx, "c", Position{Epoch: cur.Epoch, Offset: 3})
	if !r.Recovered || len(r.Messages) != 2 {
		t.Fatalf("two 4-byte messages fit in 10 bytes: %+v", r)
	}
	r, _ = s.Since(ctx, "c", Position{Epoch: cur.Epoch, Offset: 2})
	if r.Recovered {
		t.Fatal("resume beyond the byte cap recovered")
	}
}

func TestInvalidChannel(t *testing.T) {
	stores(t, Config{}, func(t *testing.T, s Store) {
		for _, ch := range []string{"", "a..b", ".a", "a b", "a*", "a>", string(make([]byte, 600))} {
			if _, err := s.Append(context.Background(), ch, Message{}); err == nil {
				t.Errorf("Append(%q) accepted", ch)
			}
		}
	})
}

func TestJetStreamHubsShareOffsets(t *testing.T) {
	c := natsConn(t, natsutil.Config{})
	a := openJS(t, c, Config{})
	b := openJS(t, c, Config{})
	const per = 40
	var wg sync.WaitGroup
	errs := make(chan error, 2)
	for _, s := range []*JetStream{a, b} {
		wg.Go(func() {
			for i := range per {
				if _, err := s.Append(context.Background(), "shared", Message{Data: fmt.Appendf(nil, "%d", i)}); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	cur, err := a.Current(context.Background(), "shared")
	if err != nil || cur.Offset != 2*per {
		t.Fatalf("Current = %+v, %v; want offset %d", cur, err, 2*per)
	}
	r, err := b.Since(context.Background(), "shared", Position{Epoch: cur.Epoch, Offset: 0})
	if err != nil {
		t.Fatal(err)
	}
	// Offset 0 in the current epoch asks for everything.
	if !r.Recovered || len(r.Messages) != 2*per {
		t.Fatalf("got %d messages (recovered %v), want %d", len(r.Messages), r.Recovered, 2*per)
	}
	for i, m := range r.Messages {
		if m.Offset != uint64(i+1) {
			t.Fatalf("message %d has offset %d: offsets must be contiguous", i, m.Offset)
		}
	}
}

func TestJetStreamHistorySurvivesRestart(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	c1, err := natsutil.Connect(ctx, natsutil.Config{StoreDir: dir}, "one", nil)
	if err != nil {
		t.Fatal(err)
	}
	s1 := NewJetStream(Config{}, JetStreamOptions{JS: c1.JS, FileStorage: c1.Persistent()})
	if err := s1.Open(ctx); err != nil {
		t.Fatal(err)
	}
	ms := appendN(t, s1, "c", 10)
	c1.Close()

	c2 := natsConn(t, natsutil.Config{StoreDir: dir})
	s2 := openJS(t, c2, Config{})
	r, err := s2.Since(ctx, "c", Position{Epoch: ms[0].Epoch, Offset: 7})
	if err != nil || !r.Recovered || len(r.Messages) != 3 || string(r.Messages[2].Data) != "m9" {
		t.Fatalf("after restart: %+v, %v", r, err)
	}
	m := appendN(t, s2, "c", 1)[0]
	if m.Offset != 11 || m.Epoch != ms[0].Epoch {
		t.Fatalf("append after restart: offset %d epoch %q", m.Offset, m.Epoch)
	}
}

func TestJetStreamIdleChannelKeepsEpochUntilMetaTTL(t *testing.T) {
	c := natsConn(t, natsutil.Config{})
	s := openJS(t, c, Config{Window: time.Second, MetaTTL: 4 * time.Second})
	ctx := context.Background()
	first := appendN(t, s, "c", 2)
	ep := first[0].Epoch
	// Wait until JetStream's MaxAge has removed the messages themselves.
	testkit.WaitFor(t, 30*time.Second, "the messages to age out", func() bool {
		_, err := s.stream.GetLastMsgForSubject(ctx, s.subject("c"))
		return errors.Is(err, jetstream.ErrMsgNotFound)
	})
	r, err := s.Since(ctx, "c", Position{Epoch: ep, Offset: 2})
	if err != nil || !r.Recovered || len(r.Messages) != 0 || r.Current != (Position{Epoch: ep, Offset: 2}) {
		t.Fatalf("resume of an idle channel at its last offset: %+v, %v; want recovered at %s/2", r, err, ep)
	}
	if r, _ := s.Since(ctx, "c", Position{Epoch: ep, Offset: 1}); r.Recovered {
		t.Fatal("resume from before an aged-out message recovered")
	}
	// A second store (another hub) continues the offsets of the epoch.
	other := openJS(t, c, Config{Window: time.Second, MetaTTL: 4 * time.Second})
	m := appendN(t, other, "c", 1)[0]
	if m.Offset != 3 || m.Epoch != ep {
		t.Fatalf("append to an idle channel: offset %d epoch %q, want 3 in %q", m.Offset, m.Epoch, ep)
	}
	// Silent for MetaTTL: the channel starts over in a new epoch.
	testkit.WaitFor(t, 30*time.Second, "the metadata to age out", func() bool {
		cur, err := s.Current(ctx, "c")
		return err == nil && cur == (Position{})
	})
	m = appendN(t, s, "c", 1)[0]
	if m.Offset != 1 || m.Epoch == ep {
		t.Fatalf("after MetaTTL: offset %d epoch %q (old %q)", m.Offset, m.Epoch, ep)
	}
	r, _ = s.Since(ctx, "c", Position{Epoch: ep, Offset: 3})
	if r.Recovered {
		t.Fatal("resume from the forgotten epoch recovered")
	}
}

func TestJetStreamDedupeByClientID(t *testing.T) {
	c := natsConn(t, natsutil.Config{})
	a, b := openJS(t, c, Config{}), openJS(t, c, Config{})
	ctx := context.Background()
	first, err := a.Append(ctx, "c", Message{Data: []byte("x"), ClientID: "id-1"})
	if err != nil || first.Duplicate {
		t.Fatalf("first append: %+v, %v", first, err)
	}
	again, err := b.Append(ctx, "c", Message{Data: []byte("x"), ClientID: "id-1"})
	if err != nil || !again.Duplicate || again.Offset != first.Offset || again.Epoch != first.Epoch {
		t.Fatalf("the same id from another store: %+v, %v; want a duplicate of offset %d", again, err, first.Offset)
	}
	// The duplicate's metadata reservation was taken back: the metadata
	// is not ahead of the history (else an idle channel would resume as a
	// gap).
	meta, _, err := a.fetchMeta(ctx, "c")
	if err != nil || meta != (Position{Epoch: first.Epoch, Offset: first.Offset}) {
		t.Fatalf("metadata after the duplicate: %+v, %v; want %s/%d", meta, err, first.Epoch, first.Offset)
	}
	next, err := b.Append(ctx, "c", Message{Data: []byte("y"), ClientID: "id-2"})
	if err != nil || next.Duplicate || next.Offset != first.Offset+1 {
		t.Fatalf("a new id: %+v, %v; want offset %d", next, err, first.Offset+1)
	}
}

// TestJetStreamIdleChannelConcurrentAppends: two stores (two hubs) append
// at once to a channel whose messages aged out: every offset is handed out
// once, in the channel's epoch, after its last offset. (An offset may be
// skipped when one hub reads the other's metadata reservation before its
// message lands; a resume across it is a gap, never a wrong recovery.)
func TestJetStreamIdleChannelConcurrentAppends(t *testing.T) {
	c := natsConn(t, natsutil.Config{})
	cfg := Config{Window: time.Second, MetaTTL: time.Hour}
	a, b := openJS(t, c, cfg), openJS(t, c, cfg)
	ctx := context.Background()
	ep := appendN(t, a, "c", 2)[0].Epoch
	testkit.WaitFor(t, 30*time.Second, "the messages to age out", func() bool {
		_, err := a.stream.GetLastMsgForSubject(ctx, a.subject("c"))
		return errors.Is(err, jetstream.ErrMsgNotFound)
	})
	const per = 20
	var mu sync.Mutex
	seen := map[uint64]bool{}
	var wg sync.WaitGroup
	for _, s := range []*JetStream{a, b} {
		wg.Go(func() {
			for range per {
				m, err := s.Append(ctx, "c", Message{Data: []byte("x")})
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				if seen[m.Offset] || m.Epoch != ep || m.Offset <= 2 {
					t.Errorf("offset %d in epoch %q: duplicate, another epoch, or not after 2", m.Offset, m.Epoch)
				}
				seen[m.Offset] = true
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	skipped := 0
	for off := uint64(3); len(seen) > 0 && off < 3+2*per; off++ {
		if !seen[off] {
			skipped++
		}
	}
	t.Logf("%d offsets handed out, %d skipped", len(seen), skipped)
}
