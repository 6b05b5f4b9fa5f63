package limit

import (
	"testing"
	"time"
)

// benchLimiter returns a Limiter over its own fresh mustGradient.
func benchLimiter(b *testing.B, timeEvery bool) *Limiter {
	b.Helper()
	l, err := NewLimiter(LimiterConfig{Limit: mustGradient(b), TimeEvery: timeEvery})
	if err != nil {
		b.Fatal(err)
	}
	return l
}

// BenchmarkAcquireRelease is one TryAcquire + Success pair on the system
// clock, with the default sampling of latencies.
func BenchmarkAcquireRelease(b *testing.B) {
	for _, tc := range []struct {
		name      string
		timeEvery bool
	}{
		{name: "gradient/sampled"},
		{name: "gradient/time-every", timeEvery: true},
	} {
		b.Run(tc.name, func(b *testing.B) {
			l := benchLimiter(b, tc.timeEvery)
			b.ReportAllocs()
			for b.Loop() {
				tok, ok := l.TryAcquire()
				if !ok {
					b.Fatal("rejected below the limit")
				}
				tok.Success()
			}
		})
		b.Run(tc.name+"/parallel", func(b *testing.B) {
			l := benchLimiter(b, tc.timeEvery)
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					tok, ok := l.TryAcquire()
					if !ok {
						b.Error("rejected below the limit")
						return
					}
					tok.Success()
				}
			})
		})
	}
}

// BenchmarkAcquirePriority is one TryAcquirePriority(P1) + Success pair.
func BenchmarkAcquirePriority(b *testing.B) {
	l := benchLimiter(b, false)
	b.ReportAllocs()
	for b.Loop() {
		tok, ok := l.TryAcquirePriority(P1)
		if !ok {
			b.Fatal("rejected below the limit")
		}
		tok.Success()
	}
}

// BenchmarkAcquireRejected is a refused TryAcquire (limit full).
func BenchmarkAcquireRejected(b *testing.B) {
	f, err := NewFixed(1)
	if err != nil {
		b.Fatal(err)
	}
	l, err := NewLimiter(LimiterConfig{Limit: f})
	if err != nil {
		b.Fatal(err)
	}
	tok, _ := l.TryAcquire()
	defer tok.Ignore()
	b.ReportAllocs()
	for b.Loop() {
		if _, ok := l.TryAcquire(); ok {
			b.Fatal("admitted above the limit")
		}
	}
}

// BenchmarkGradientUpdate feeds one sample straight to a Gradient.
func BenchmarkGradientUpdate(b *testing.B) {
	g := mustGradient(b)
	s := Sample{Start: simEpoch, RTT: 5 * time.Millisecond, InFlight: 10}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		i++
		s.Start = simEpoch.Add(time.Duration(i) * time.Microsecond)
		if _, err := g.Update(s); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkShedderAdmit is one Shedder.Admit on the system clock.
func BenchmarkShedderAdmit(b *testing.B) {
	s, err := NewShedder(ShedderConfig{})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if !s.Admit(P1).Admit {
			b.Fatal("rejected at stage normal")
		}
	}
}

// mustGradient returns a Gradient whose windows, percentiles and probes all
// run but whose limit is clamped far above what the benchmark holds, so
// that machine noise read as latency cannot make it refuse work.
func mustGradient(b *testing.B) *Gradient {
	b.Helper()
	g, err := NewGradient(GradientConfig{Common: Common{InitialLimit: 1 << 20, MinLimit: 1 << 20, MaxLimit: 1 << 30}})
	if err != nil {
		b.Fatal(err)
	}
	return g
}
