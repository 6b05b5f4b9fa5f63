package limitcmp

import (
	"testing"

	"github.com/corralhq/corral/limit"
	"github.com/failsafe-go/failsafe-go/adaptivelimiter"
)

// Both limiters run their full algorithm (windows, quantiles, limit
// updates) but their limits are clamped to [10,000, 100,000], far above
// what one or two goroutines hold, so every acquisition succeeds whatever
// latency machine noise shows them: the benchmark measures the admission
// and recording path, not rejections.

func newFailsafe() adaptivelimiter.AdaptiveLimiter[any] {
	return adaptivelimiter.NewBuilder[any]().WithLimits(10_000, 100_000, 10_000).Build()
}

func newCorral(b *testing.B, timeEvery bool) *limit.Limiter {
	g, err := limit.NewGradient(limit.GradientConfig{Common: limit.Common{InitialLimit: 10_000, MinLimit: 10_000, MaxLimit: 100_000}})
	if err != nil {
		b.Fatal(err)
	}
	l, err := limit.NewLimiter(limit.LimiterConfig{Limit: g, TimeEvery: timeEvery})
	if err != nil {
		b.Fatal(err)
	}
	return l
}

// BenchmarkFailsafe is failsafe-go's TryAcquirePermit + Record.
func BenchmarkFailsafe(b *testing.B) {
	l := newFailsafe()
	b.ReportAllocs()
	for b.Loop() {
		p, ok := l.TryAcquirePermit()
		if !ok {
			b.Fatal("failsafe rejected below its limit")
		}
		p.Record()
	}
}

// BenchmarkFailsafeParallel is the same on every core.
func BenchmarkFailsafeParallel(b *testing.B) {
	l := newFailsafe()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			p, ok := l.TryAcquirePermit()
			if !ok {
				b.Error("failsafe rejected below its limit")
				return
			}
			p.Record()
		}
	})
}

// BenchmarkCorral is corral's TryAcquire + Success with the default
// latency sampling (at high rates about 64 timed tokens per 20 ms flush).
func BenchmarkCorral(b *testing.B) { benchCorral(b, false) }

// BenchmarkCorralParallel is the same on every core.
func BenchmarkCorralParallel(b *testing.B) { benchCorralParallel(b, false) }

// BenchmarkCorralTimeEvery times every token, as failsafe-go does.
func BenchmarkCorralTimeEvery(b *testing.B) { benchCorral(b, true) }

// BenchmarkCorralTimeEveryParallel is the same on every core.
func BenchmarkCorralTimeEveryParallel(b *testing.B) { benchCorralParallel(b, true) }

func benchCorral(b *testing.B, timeEvery bool) {
	l := newCorral(b, timeEvery)
	b.ReportAllocs()
	for b.Loop() {
		tok, ok := l.TryAcquire()
		if !ok {
			b.Fatal("corral rejected below its limit")
		}
		tok.Success()
	}
}

func benchCorralParallel(b *testing.B, timeEvery bool) {
	l := newCorral(b, timeEvery)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			tok, ok := l.TryAcquire()
			if !ok {
				b.Error("corral rejected below its limit")
				return
			}
			tok.Success()
		}
	})
}
