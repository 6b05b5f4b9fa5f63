package dnslib

import (
	"context"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	v2 "codeberg.org/miekg/dns"
	v2rdata "codeberg.org/miekg/dns/rdata"
	v1 "github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/corralhq/corral/authdns"
)

func libQuery(tb testing.TB) []byte {
	m := new(v1.Msg)
	m.SetQuestion("static.corral.test.", v1.TypeA)
	m.SetEdns0(1232, false)
	b, err := m.Pack()
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

var (
	libA1 = netip.MustParseAddr("192.0.2.1")
	libA2 = netip.MustParseAddr("192.0.2.2")
)

// v1Answer unpacks a query and packs a response with 2 A records, as a
// miekg/dns v1 server handler would.
func v1Answer(q []byte, buf []byte) ([]byte, error) {
	var req v1.Msg
	if err := req.Unpack(q); err != nil {
		return nil, err
	}
	var resp v1.Msg
	resp.SetReply(&req)
	name := req.Question[0].Name
	hdr := v1.RR_Header{Name: name, Rrtype: v1.TypeA, Class: v1.ClassINET, Ttl: 60}
	resp.Answer = []v1.RR{&v1.A{Hdr: hdr, A: libA1.AsSlice()}, &v1.A{Hdr: hdr, A: libA2.AsSlice()}}
	resp.SetEdns0(1232, false)
	return resp.PackBuffer(buf)
}

// v2Answer is v1Answer with codeberg.org/miekg/dns.
func v2Answer(req *v2.Msg) error {
	if err := req.Unpack(); err != nil {
		return err
	}
	name := req.Question[0].Header().Name
	hdr := v2.Header{Name: name, Class: v2.ClassINET, TTL: 60}
	req.Response = true
	req.Answer = []v2.RR{&v2.A{Hdr: hdr, A: v2rdata.A{Addr: libA1}}, &v2.A{Hdr: hdr, A: v2rdata.A{Addr: libA2}}}
	req.Ns, req.Extra, req.Pseudo = nil, nil, nil
	req.UDPSize = 1232
	return req.Pack()
}

func BenchmarkLibV1UnpackPack(b *testing.B) {
	q := libQuery(b)
	buf := make([]byte, 1232)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := v1Answer(q, buf); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkLibV2UnpackPack(b *testing.B) {
	q := libQuery(b)
	b.ReportAllocs()
	for b.Loop() {
		m := &v2.Msg{Data: append([]byte(nil), q...)}
		if err := v2Answer(m); err != nil {
			b.Fatal(err)
		}
	}
}

// cpuNow returns the process CPU time (user + system).
func cpuNow() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// served sends n queries one at a time to addr and returns the process CPU
// per query (client and server together; the client part is the same for
// every server measured).
func served(t *testing.T, addr string, n int) time.Duration {
	c, err := net.Dial("udp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	q := libQuery(t)
	buf := make([]byte, 2048)
	for range 1000 { // warm up
		_, _ = c.Write(q)
		_, _ = c.Read(buf)
	}
	start := cpuNow()
	for range n {
		if _, err := c.Write(q); err != nil {
			t.Fatal(err)
		}
		_ = c.SetReadDeadline(time.Now().Add(2 * time.Second))
		if _, err := c.Read(buf); err != nil {
			t.Fatal(err)
		}
	}
	return (cpuNow() - start) / time.Duration(n)
}

func TestLibServed(t *testing.T) {
	const n = 50000
	// The client alone: an echo of the query by a bare UDP loop.
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		buf := make([]byte, 2048)
		for {
			k, a, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			_, _ = pc.WriteTo(buf[:k], a)
		}
	}()
	t.Logf("bare UDP echo: %v CPU per query", served(t, pc.LocalAddr().String(), n))
	pc.Close()

	// miekg/dns v1.
	pc1, _ := net.ListenPacket("udp", "127.0.0.1:0")
	s1 := &v1.Server{PacketConn: pc1, Handler: v1.HandlerFunc(func(w v1.ResponseWriter, r *v1.Msg) {
		m := new(v1.Msg)
		m.SetReply(r)
		hdr := v1.RR_Header{Name: r.Question[0].Name, Rrtype: v1.TypeA, Class: v1.ClassINET, Ttl: 60}
		m.Answer = []v1.RR{&v1.A{Hdr: hdr, A: libA1.AsSlice()}, &v1.A{Hdr: hdr, A: libA2.AsSlice()}}
		m.SetEdns0(1232, false)
		_ = w.WriteMsg(m)
	})}
	go func() { _ = s1.ActivateAndServe() }()
	t.Logf("miekg/dns v1.1.73 server: %v CPU per query", served(t, pc1.LocalAddr().String(), n))
	_ = s1.Shutdown()

	// codeberg.org/miekg/dns v0.6.0.
	pc2, _ := net.ListenPacket("udp", "127.0.0.1:0")
	s2 := &v2.Server{PacketConn: pc2, Net: "udp", Handler: v2.HandlerFunc(func(_ context.Context, w v2.ResponseWriter, r *v2.Msg) {
		if err := v2Answer(r); err != nil {
			return
		}
		_, _ = r.WriteTo(w)
	})}
	go func() { _ = s2.ListenAndServe() }()
	t.Logf("codeberg.org/miekg/dns v0.6.0 server: %v CPU per query", served(t, pc2.LocalAddr().String(), n))
	s2.Shutdown(context.Background())

	// corral's own wire path, one socket.
	addr := startAuthDNS(t)
	t.Logf("authdns (hand-written wire path, recvmmsg): %v CPU per query", served(t, addr, n))
}

// startAuthDNS runs corral's server for a zone with static.corral.test (the
// two A records the library handlers answer) on one socket and returns its
// address.
func startAuthDNS(t *testing.T) string {
	path := filepath.Join(t.TempDir(), "dns.yaml")
	zone := `
listen: 127.0.0.1:0
sockets: 1
rrl: {enabled: false}
zones:
  - origin: corral.test
    ns: [ns1.corral.test]
    records:
      - {name: static, type: A, values: [192.0.2.1, 192.0.2.2]}
`
	if err := os.WriteFile(path, []byte(zone), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := authdns.LoadConfig(path)
	if err != nil {
		t.Fatal(err)
	}
	s, err := authdns.New(cfg, authdns.Options{Registerer: prometheus.NewRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- s.Run(ctx) }()
	<-s.Started()
	if err := s.Ready(); err != nil {
		cancel()
		t.Fatalf("authdns did not start: %v (%v)", err, <-errc)
	}
	t.Cleanup(func() {
		cancel()
		sctx, stop := context.WithTimeout(context.Background(), 5*time.Second)
		defer stop()
		_ = s.Shutdown(sctx)
		<-errc
	})
	return s.Addr().String()
}
