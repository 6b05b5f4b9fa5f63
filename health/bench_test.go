package health

import (
	"fmt"
	"testing"
)

// benchChecker builds a Checker with n tcp checks, half of them unhealthy.
func benchChecker(b *testing.B, n int) (*Checker, []string) {
	cfg := Config{}
	names := make([]string, n)
	for i := range n {
		names[i] = fmt.Sprintf("origin-%04d.corral.test", i)
		cfg.Checks = append(cfg.Checks, CheckConfig{Name: names[i], Kind: KindTCP, Address: "127.0.0.1:1", FailureThreshold: 1})
	}
	c, err := New(cfg, Options{})
	if err != nil {
		b.Fatal(err)
	}
	for i := 0; i < n; i += 2 {
		_, _ = c.Observe(names[i], errDown)
	}
	return c, names
}

// BenchmarkHealthy is the cost of one View lookup in the DNS answer path.
func BenchmarkHealthy(b *testing.B) {
	for _, n := range []int{8, 1000} {
		b.Run(fmt.Sprintf("checks=%d", n), func(b *testing.B) {
			c, names := benchChecker(b, n)
			b.ReportAllocs()
			up := 0
			i := 0
			for b.Loop() {
				if c.Healthy(names[i]) {
					up++
				}
				i++
				if i == len(names) {
					i = 0
				}
			}
			if up == 0 {
				b.Fatal("no healthy check seen")
			}
		})
	}
}

// BenchmarkHealthyParallel reads the view from every core at once.
func BenchmarkHealthyParallel(b *testing.B) {
	c, names := benchChecker(b, 1000)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			_ = c.Healthy(names[i])
			i++
			if i == len(names) {
				i = 0
			}
		}
	})
}

// BenchmarkStatic is the Static view, for comparison.
func BenchmarkStatic(b *testing.B) {
	s := Static{}
	names := make([]string, 1000)
	for i := range names {
		names[i] = fmt.Sprintf("origin-%04d.corral.test", i)
		s[names[i]] = i%2 == 1
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		_ = s.Healthy(names[i])
		i++
		if i == len(names) {
			i = 0
		}
	}
}

// BenchmarkObserve is the cost of applying one probe outcome (no
// transition): the write side under the transition lock.
func BenchmarkObserve(b *testing.B) {
	c, names := benchChecker(b, 1000)
	b.ReportAllocs()
	for b.Loop() {
		_, _ = c.Observe(names[1], nil)
	}
}

// BenchmarkRef is the cost of Healthy on a Ref resolved beforehand.
func BenchmarkRef(b *testing.B) {
	c, names := benchChecker(b, 1000)
	refs := make([]Ref, len(names))
	for i, n := range names {
		refs[i], _ = c.Ref(n)
	}
	b.ReportAllocs()
	up, i := 0, 0
	for b.Loop() {
		if refs[i].Healthy() {
			up++
		}
		i++
		if i == len(refs) {
			i = 0
		}
	}
	if up == 0 {
		b.Fatal("no healthy check seen")
	}
}
