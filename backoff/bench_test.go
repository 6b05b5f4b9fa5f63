package backoff

import (
	"math/rand/v2"
	"testing"
	"time"
)

// sink keeps results alive so the compiler cannot drop the calls.
var sink time.Duration

// BenchmarkDelay measures Policy.Delay through the interface, cycling the
// attempt over 0..31 so both the table and the capped path are exercised.
func BenchmarkDelay(b *testing.B) {
	for _, n := range Names() {
		p, err := Parse(n)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(n, func(b *testing.B) {
			b.ReportAllocs()
			var d time.Duration
			u := 0.0
			for i := 0; b.Loop(); i++ {
				u += 0.618033988749895
				if u >= 1 {
					u--
				}
				d = p.Delay(i&31, d, u)
			}
			sink = d
		})
	}
}

// BenchmarkNext measures Backoff.Next with a seeded PCG source, resetting
// every 32 calls.
func BenchmarkNext(b *testing.B) {
	for _, n := range Names() {
		bo, err := NewBackoff(Config{Policy: n}, rand.New(rand.NewPCG(1, 2)))
		if err != nil {
			b.Fatal(err)
		}
		b.Run(n, func(b *testing.B) {
			b.ReportAllocs()
			var d time.Duration
			for i := 0; b.Loop(); i++ {
				if i&31 == 0 {
					bo.Reset()
				}
				d = bo.Next()
			}
			sink = d
		})
	}
}

// BenchmarkHintDelay measures Policy.HintDelay.
func BenchmarkHintDelay(b *testing.B) {
	p, err := Parse(PolicyFull)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	var d time.Duration
	for b.Loop() {
		d = p.HintDelay(30*time.Second, 0.25)
	}
	sink = d
}
