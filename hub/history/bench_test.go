package history

import (
	"context"
	"testing"

	"github.com/corralhq/corral/internal/natsutil"
)

func benchStore(b *testing.B, name string) Store {
	if name == "memory" {
		return NewMemory(Config{}, MemoryOptions{})
	}
	c, err := natsutil.Connect(context.Background(), natsutil.Config{}, "bench", nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(c.Close)
	j := NewJetStream(Config{}, JetStreamOptions{JS: c.JS})
	if err := j.Open(context.Background()); err != nil {
		b.Fatal(err)
	}
	return j
}

func BenchmarkAppend(b *testing.B) {
	for _, name := range []string{"memory", "jetstream"} {
		b.Run(name, func(b *testing.B) {
			s := benchStore(b, name)
			data := make([]byte, 256)
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				if _, err := s.Append(ctx, "bench.ch", Message{Data: data}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkSince100 is a resume that missed 100 messages of a channel
// holding 1000.
func BenchmarkSince100(b *testing.B) {
	for _, name := range []string{"memory", "jetstream"} {
		b.Run(name, func(b *testing.B) {
			s := benchStore(b, name)
			ctx := context.Background()
			var last Message
			for range 1000 {
				last, _ = s.Append(ctx, "bench.ch", Message{Data: make([]byte, 256)})
			}
			from := Position{Epoch: last.Epoch, Offset: last.Offset - 100}
			b.ReportAllocs()
			for b.Loop() {
				r, err := s.Since(ctx, "bench.ch", from)
				if err != nil || !r.Recovered || len(r.Messages) != 100 {
					b.Fatalf("%v %v %d", err, r.Recovered, len(r.Messages))
				}
			}
		})
	}
}

// BenchmarkSinceUpToDate is the common resume of a storm: nothing missed.
func BenchmarkSinceUpToDate(b *testing.B) {
	for _, name := range []string{"memory", "jetstream"} {
		b.Run(name, func(b *testing.B) {
			s := benchStore(b, name)
			ctx := context.Background()
			last, _ := s.Append(ctx, "bench.ch", Message{Data: make([]byte, 256)})
			from := Position{Epoch: last.Epoch, Offset: last.Offset}
			b.ReportAllocs()
			for b.Loop() {
				if r, err := s.Since(ctx, "bench.ch", from); err != nil || !r.Recovered {
					b.Fatal(err)
				}
			}
		})
	}
}
