package client_test

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"io"
	"net"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/corralhq/corral/client"
	"github.com/corralhq/corral/internal/testkit"
)

// ticketServer terminates TLS on one address with session ticket keys of
// its own, forwards the plaintext to a hub, counts its full and resumed
// handshakes, and cuts its connections on demand.
type ticketServer struct {
	full, resumed atomic.Int64
	mu            sync.Mutex
	conns         []net.Conn
}

func (s *ticketServer) serve(t *testing.T, ln net.Listener, crt tls.Certificate, to string) {
	var key [32]byte
	if _, err := rand.Read(key[:]); err != nil {
		t.Fatal(err)
	}
	cfg := &tls.Config{
		Certificates: []tls.Certificate{crt},
		NextProtos:   []string{"h2", "http/1.1"},
		MinVersion:   tls.VersionTLS13,
		VerifyConnection: func(cs tls.ConnectionState) error {
			if cs.DidResume {
				s.resumed.Add(1)
			} else {
				s.full.Add(1)
			}
			return nil
		},
	}
	cfg.SetSessionTicketKeys([][32]byte{key}) // a process of its own: tickets only it opens
	tl := tls.NewListener(ln, cfg)
	t.Cleanup(func() { tl.Close(); s.cut() })
	go func() {
		for {
			c, err := tl.Accept()
			if err != nil {
				return
			}
			s.mu.Lock()
			s.conns = append(s.conns, c)
			s.mu.Unlock()
			go func() {
				defer c.Close()
				up, err := net.Dial("tcp", to)
				if err != nil {
					return
				}
				defer up.Close()
				go func() { _, _ = io.Copy(up, c); up.Close() }()
				_, _ = io.Copy(c, up)
			}()
		}
	}()
}

func (s *ticketServer) cut() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range s.conns {
		c.Close()
	}
	s.conns = nil
}

// listenBoth listens on 127.0.0.1 and 127.0.0.2 on one port.
func listenBoth(t *testing.T) (port string, lns [2]net.Listener) {
	t.Helper()
	for try := 0; try < 20; try++ {
		a, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		_, port, _ = net.SplitHostPort(a.Addr().String())
		b, err := net.Listen("tcp", "127.0.0.2:"+port)
		if err == nil {
			return port, [2]net.Listener{a, b}
		}
		a.Close()
	}
	t.Fatal("no port free on both 127.0.0.1 and 127.0.0.2")
	return "", lns
}

// TestReconnectsResumePerAddress: two TLS servers behind one name
// (127.0.0.1 and 127.0.0.2, one port), each sealing tickets with keys of
// its own; the client alternates between them across reconnects, and
// every reconnect to an address it saw before resumes its TLS session
// (one full handshake per server), over wss and grpcs. A cache keyed by
// the server name alone would offer each server the other's ticket: every
// handshake full.
func TestReconnectsResumePerAddress(t *testing.T) {
	h := startHub(t, "127.0.0.1:0", nil)
	crt, pool := testkit.SelfSignedCert(t, "hubs.corral.test")
	token := newToken(t, []string{">"}, time.Now().Add(time.Hour))
	ips := []netip.Addr{netip.MustParseAddr("127.0.0.1"), netip.MustParseAddr("127.0.0.2")}
	resolve := func(context.Context, string) ([]netip.Addr, error) { return ips, nil }
	for _, tc := range []struct {
		scheme, to string
	}{
		{"wss", h.Addr().String()},
		{"grpcs", h.GRPCAddr().String()},
	} {
		t.Run(tc.scheme, func(t *testing.T) {
			port, lns := listenBoth(t)
			var srv [2]ticketServer
			for i := range srv {
				srv[i].serve(t, lns[i], crt, tc.to)
			}
			c, err := client.Dial(context.Background(), client.Config{
				Addrs: []string{tc.scheme + "://hubs.corral.test:" + port}, Token: token, Resolve: resolve, InOrder: true,
				TLS: &tls.Config{RootCAs: pool}, ReconnectMin: time.Millisecond, ReconnectMax: 5 * time.Millisecond,
			})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			addrs := []string{next(t, c, client.EventConnected, nil).Addr} // Dial's
			const connections = 6
			for len(addrs) < connections {
				srv[0].cut()
				srv[1].cut()
				addrs = append(addrs, next(t, c, client.EventConnected, nil).Addr)
			}
			for i := range srv {
				full, resumed := srv[i].full.Load(), srv[i].resumed.Load()
				if full+resumed < 2 {
					t.Fatalf("server %s: %d connections of %v; the client did not alternate", ips[i], full+resumed, addrs)
				}
				if full != 1 {
					t.Errorf("server %s: %d full handshakes and %d resumed, want 1 full and the rest resumed (connections: %s)",
						ips[i], full, resumed, strings.Join(addrs, " "))
				}
			}
		})
	}
}
