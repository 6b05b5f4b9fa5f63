package tlsconf_test

import (
	"context"
	"crypto"
	"crypto/ecdh"
	"crypto/mlkem"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"net"
	"runtime/pprof"
	"testing"

	"github.com/corralhq/corral/internal/tlsconf"
)

// The TLS figure (full TLS 1.3 handshakes per second on one core
// of the shipped server against the bound of the same key exchange and
// signature; resumed against full) is bench/edge/tls.sh's: `corral edge`
// alone on one CPU, real TCP, the process's own CPU accounting, and
// BenchmarkBound below run in the same script on the same CPU.
//
// BenchmarkHandshake is not that figure. It runs client and server in
// one process over net.Pipe, without the kernel: at -cpu 1 its ns/op is
// the CPU of both sides of one handshake, and its allocations are both
// sides' too. It is for comparing changes to the Server's configuration
// (the client's half stays the same), and a CPU profile of it splits the
// sides by the pprof label "side" (`go tool pprof -tags`, `-tagfocus
// side=server`):
//
//	go test -run '^$' -bench Handshake -benchtime 2000x -cpu 1 -cpuprofile cpu.out ./internal/tlsconf
//
// Its earlier form locked the server's goroutine to an OS thread and
// read that thread's CPU time: every hand-off over the synchronous pipe
// then woke a locked thread (runtime.futex was most of the profile), so
// its server-ns/op was mostly the method's, not the server's.
//
// BenchmarkBound is the server's share of the cryptography of one full
// handshake: the key exchange Go 1.26 negotiates by default,
// X25519MLKEM768 (the server parses the client's ML-KEM-768
// encapsulation key and encapsulates to it, makes an X25519 key and
// computes the X25519 secret), and one ECDSA P-256 signature over a
// SHA-256 digest (the CertificateVerify). BenchmarkHandshake fails if
// another group was negotiated, and so does bench/edge/tlsload.

// benchServer is a loaded Server and its certificate.
func benchServer(b *testing.B, minVersion string) (*tlsconf.Server, pair) {
	p := newPair(b, "bench")
	dir := b.TempDir()
	cfg := tlsconf.Config{MinVersion: minVersion}
	cfg.CertFile, cfg.KeyFile = writePair(b, dir, p)
	s, err := tlsconf.New(cfg, tlsconf.Options{})
	if err != nil {
		b.Fatal(err)
	}
	if err := s.Load(); err != nil {
		b.Fatal(err)
	}
	return s, p
}

// handshakeBench runs b.N handshakes of clients made by client against
// srv over net.Pipe, the server's side in a goroutine labelled
// side=server and the client's labelled side=client.
func handshakeBench(b *testing.B, srv *tls.Config, client func() *tls.Config, wantResumed bool, wantCurve tls.CurveID) {
	conns := make(chan net.Conn)
	done := make(chan error, 1)
	go pprof.Do(context.Background(), pprof.Labels("side", "server"), func(context.Context) {
		var err error
		for c := range conns {
			sc := tls.Server(c, srv)
			if e := sc.Handshake(); e != nil && err == nil {
				err = e
			}
			// Read the client's close_notify, as the edge's listener
			// reads the request head.
			_, _ = sc.Read(make([]byte, 1))
			_ = sc.Close()
		}
		done <- err
	})
	b.ReportAllocs()
	b.ResetTimer()
	pprof.Do(context.Background(), pprof.Labels("side", "client"), func(context.Context) {
		for b.Loop() {
			cEnd, sEnd := net.Pipe()
			conns <- sEnd
			cc := tls.Client(cEnd, client())
			if err := cc.Handshake(); err != nil {
				b.Fatal(err)
			}
			cs := cc.ConnectionState()
			if cs.DidResume != wantResumed {
				b.Fatalf("DidResume = %v", cs.DidResume)
			}
			if cs.CurveID != wantCurve {
				b.Fatalf("negotiated %v, the bound measures %v", cs.CurveID, wantCurve)
			}
			_ = cc.Close() // close_notify; the pipe's other end reads it
			_ = cEnd.Close()
		}
	})
	b.StopTimer()
	close(conns)
	if err := <-done; err != nil {
		b.Fatal(err)
	}
}

// BenchmarkHandshake: a full TLS 1.3 handshake (ECDSA P-256 certificate,
// the default key exchange) and a resumed one (a session ticket; TLS 1.3
// resumption in crypto/tls always runs the key exchange again, psk_dhe_ke,
// for forward secrecy: only the certificate and its signature are saved).
// The tls12 pair is the same with TLS 1.2 (min_version 1.2, the client's
// maximum 1.2): X25519 (crypto/tls has no hybrid group in TLS 1.2), and a
// resumption without any key exchange.
func BenchmarkHandshake(b *testing.B) {
	for _, v := range []struct {
		name      string
		min       string
		max       uint16
		curve     tls.CurveID
		resumeKEX tls.CurveID // the group a resumed handshake reports (TLS 1.2: the first's, none is run)
	}{
		{"", "", 0, tls.X25519MLKEM768, tls.X25519MLKEM768},
		{"tls12-", "1.2", tls.VersionTLS12, tls.X25519, tls.X25519},
	} {
		s, p := benchServer(b, v.min)
		srv := s.ServerConfig("http/1.1")
		base := clientConfig(p)
		base.NextProtos = []string{"http/1.1"}
		base.MaxVersion = v.max
		b.Run(v.name+"full", func(b *testing.B) {
			handshakeBench(b, srv, func() *tls.Config {
				c := base.Clone()
				c.ClientSessionCache = nil
				return c
			}, false, v.curve)
		})
		b.Run(v.name+"resumed", func(b *testing.B) {
			// Prime the cache with one full handshake, then every
			// handshake resumes (and leaves a fresh ticket in the cache).
			c := base.Clone()
			c.ClientSessionCache = tls.NewLRUClientSessionCache(1)
			cn := dial(b, serve(b, srv), c)
			_ = cn.Close()
			handshakeBench(b, srv, func() *tls.Config { return c }, true, v.resumeKEX)
		})
	}
}

// BenchmarkBound: the server's cryptography of one full handshake, as
// above: for x25519mlkem768 (TLS 1.3's default) parse the client's
// ML-KEM-768 key and encapsulate to it, then X25519 key generation and
// exchange, and one ECDSA P-256 signature; for x25519 (TLS 1.2) the
// X25519 part and the signature.
func BenchmarkBound(b *testing.B) {
	p := newPair(b, "bench")
	dk, err := mlkem.GenerateKey768()
	if err != nil {
		b.Fatal(err)
	}
	ek := dk.EncapsulationKey().Bytes()
	peer, err := ecdh.X25519().GenerateKey(rand.Reader)
	if err != nil {
		b.Fatal(err)
	}
	peerPub := peer.PublicKey().Bytes()
	var signer crypto.Signer = p.key
	msg := make([]byte, 130) // the signed content: 64 spaces, a context string, a transcript hash
	for _, v := range []struct {
		name string
		kem  bool
	}{{"x25519mlkem768", true}, {"x25519", false}} {
		b.Run(v.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if v.kem {
					k, err := mlkem.NewEncapsulationKey768(ek)
					if err != nil {
						b.Fatal(err)
					}
					_, _ = k.Encapsulate()
				}
				pub, err := ecdh.X25519().NewPublicKey(peerPub)
				if err != nil {
					b.Fatal(err)
				}
				priv, err := ecdh.X25519().GenerateKey(rand.Reader)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := priv.ECDH(pub); err != nil {
					b.Fatal(err)
				}
				d := sha256.Sum256(msg)
				if _, err := signer.Sign(rand.Reader, d[:], crypto.SHA256); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "bound-hs/s")
		})
	}
}
