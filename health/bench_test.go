package health

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"

	"google.golang.org/grpc"
	grpchealth "google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
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

// BenchmarkProbe is the cost of one probe of each kind against a loopback
// server, connection set-up included (every probe opens a fresh one).
func BenchmarkProbe(b *testing.B) {
	o := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte("ok")) }))
	defer o.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	srv := grpc.NewServer()
	healthpb.RegisterHealthServer(srv, grpchealth.NewServer())
	go func() { _ = srv.Serve(ln) }()
	defer srv.Stop()
	c, err := New(Config{Checks: []CheckConfig{
		{Name: "http", Kind: KindHTTP, URL: o.URL, Match: "ok"},
		{Name: "tcp", Kind: KindTCP, Address: ln.Addr().String()},
		{Name: "grpc", Kind: KindGRPC, Address: ln.Addr().String()},
	}}, Options{})
	if err != nil {
		b.Fatal(err)
	}
	for _, name := range []string{"http", "tcp", "grpc"} {
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				r, err := c.Probe(context.Background(), name)
				if err != nil || r.Err != nil {
					b.Fatal(err, r.Err)
				}
			}
		})
	}
}
