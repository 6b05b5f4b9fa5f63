package wsserve

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	nbws "github.com/lesismal/nbio/nbhttp/websocket"

	"github.com/corralhq/corral/internal/testkit"
)

// testHandler is a Handler whose sessions echo every message, prefixed
// with its number on the connection ("1:hello"), and close with 1002 on a
// protocol error. refusal, when set, refuses every upgrade.
type testHandler struct {
	refusal atomic.Pointer[Refusal]
	opened  atomic.Int64
	mu      sync.Mutex
	closed  []int // codes of Closed, in order
}

func (h *testHandler) Admit() (Refusal, bool) {
	if r := h.refusal.Load(); r != nil {
		return *r, false
	}
	return Refusal{}, true
}

func (h *testHandler) Open(conn Conn) Session {
	h.opened.Add(1)
	return &testSession{h: h, conn: conn}
}

func (h *testHandler) closedCodes() []int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]int(nil), h.closed...)
}

// testSession is the session of testHandler.
type testSession struct {
	h       *testHandler
	conn    Conn
	n       int // messages so far; Message runs one at a time
	closing atomic.Bool
}

func (s *testSession) Conn() *Conn { return &s.conn }

func (s *testSession) Message(binary bool, data []byte) {
	s.n++
	if s.closing.Load() {
		return
	}
	_ = s.conn.Write(binary, fmt.Appendf(nil, "%d:%s", s.n, data))
}

func (s *testSession) ProtocolError(reason string) {
	if s.closing.CompareAndSwap(false, true) {
		go s.conn.Close(closeProtocolError, reason, time.Second) // off the read path, as a session's writer does
	}
}

func (s *testSession) Pong()         {}
func (s *testSession) Closing() bool { return s.closing.Load() }

func (s *testSession) Closed(code int) {
	if s.h == nil {
		return
	}
	s.h.mu.Lock()
	s.h.closed = append(s.h.closed, code)
	s.h.mu.Unlock()
}

var testSubprotocols = []string{"corral.v1.proto", "corral.v1.json"}

// startServer serves h on a loopback port with cfg (Path, Subprotocols and
// MaxFrameBytes filled when empty), other paths answered "other"; set runs
// on the server before it starts (test hooks). It returns the address.
func startServer(t testing.TB, cfg Config, h Handler, set func(*Server)) string {
	t.Helper()
	if cfg.Path == "" {
		cfg.Path = "/v1/ws"
	}
	if cfg.Subprotocols == nil {
		cfg.Subprotocols = testSubprotocols
	}
	if cfg.MaxFrameBytes == 0 {
		cfg.MaxFrameBytes = 64 << 10
	}
	other := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "other") })
	s, err := New(cfg, h, other)
	if err != nil {
		t.Fatal(err)
	}
	if set != nil {
		set(s)
	}
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- s.Serve(ln) }()
	t.Cleanup(func() {
		_ = ln.Close()
		if err := <-served; err != nil {
			t.Errorf("Serve: %v", err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = s.Shutdown(ctx)
		s.Stop()
	})
	return ln.Addr().String()
}

// closeCode reads frames until a close frame and returns its code and
// reason.
func closeCode(t *testing.T, r *bufio.Reader) (int, string) {
	t.Helper()
	for {
		op, p, err := testkit.ReadWSFrame(r)
		if err != nil {
			t.Fatalf("reading a frame: %v", err)
		}
		if op != 8 {
			continue
		}
		if len(p) < 2 {
			t.Fatalf("close frame without a code: %x", p)
		}
		return int(binary.BigEndian.Uint16(p)), string(p[2:])
	}
}

var wsHead = testkit.WSUpgradeRequest("/v1/ws", "corral.v1.proto")

func TestWSRequestFastPath(t *testing.T) {
	for _, tc := range []struct {
		name  string
		head  string
		fast  bool
		proto string // the subprotocol chosen on the fast path
	}{
		{name: "a plain upgrade", head: wsHead, fast: true, proto: "corral.v1.proto"},
		{name: "header names in any case, token lists, a query", fast: true, proto: "corral.v1.json",
			head: "GET /v1/ws?x=1 HTTP/1.1\r\nupgrade: WebSocket\r\nconnection: keep-alive, Upgrade\r\nsec-websocket-key: a2V5\r\nSEC-WEBSOCKET-VERSION: 13\r\nSec-WebSocket-Protocol: other, corral.v1.json\r\n\r\n"},
		{name: "two protocol headers: the server's preference", fast: true, proto: "corral.v1.proto",
			head: strings.Replace(wsHead, "Sec-WebSocket-Protocol: corral.v1.proto", "Sec-WebSocket-Protocol: corral.v1.json\r\nSec-WebSocket-Protocol: CORRAL.V1.PROTO", 1)},
		{name: "another path", head: strings.Replace(wsHead, "/v1/ws", "/v1/wsx", 1)},
		{name: "another method", head: strings.Replace(wsHead, "GET", "POST", 1)},
		{name: "HTTP/1.0", head: strings.Replace(wsHead, "HTTP/1.1", "HTTP/1.0", 1)},
		{name: "no Upgrade", head: strings.Replace(wsHead, "Upgrade: websocket\r\n", "", 1)},
		{name: "no Connection upgrade", head: strings.Replace(wsHead, "Connection: Upgrade", "Connection: keep-alive", 1)},
		{name: "version 12", head: strings.Replace(wsHead, "Version: 13", "Version: 12", 1)},
		{name: "two versions", head: strings.Replace(wsHead, "Version: 13\r\n", "Version: 13\r\nSec-WebSocket-Version: 13\r\n", 1)},
		{name: "no key", head: strings.Replace(wsHead, "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n", "", 1)},
		{name: "no subprotocol of the server", head: strings.Replace(wsHead, "corral.v1.proto", "mqtt", 1)},
		{name: "a folded header line", head: strings.Replace(wsHead, "Host: corral\r\n", "Host: corral\r\n  folded\r\n", 1)},
		{name: "a space before the colon", head: strings.Replace(wsHead, "Host: corral", "Host : corral", 1)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, ok := upgradeRequest([]byte(tc.head), "/v1/ws", testSubprotocols, newUpgrade())
			if ok != tc.fast {
				t.Fatalf("fast path %v, want %v", ok, tc.fast)
			}
			if !ok {
				return
			}
			if r.Method != http.MethodGet || r.Header.Get("Sec-Websocket-Key") == "" {
				t.Fatalf("request for the upgrader: %+v", r)
			}
			// nbio keeps the chosen subprotocol for the connection's life:
			// it must be the server's own string, not a piece of the head.
			got := r.Header["Sec-Websocket-Protocol"]
			i := slices.Index(testSubprotocols, tc.proto)
			if len(got) != 1 || got[0] != tc.proto || unsafe.StringData(got[0]) != unsafe.StringData(testSubprotocols[i]) {
				t.Fatalf("Sec-WebSocket-Protocol %q, want the server's own %q", got, tc.proto)
			}
		})
	}
}

// TestWSRequestAllocations bounds what parsing a fast-path upgrade head
// allocates: the key, nothing else (the request and its header are the
// reused upgrade's; the head is not copied: it was, whole, and nbio kept
// it alive through the subprotocol with every idle session). A reused
// upgrade carries nothing of the head before.
func TestWSRequestAllocations(t *testing.T) {
	head := []byte(wsHead)
	u := newUpgrade()
	n := testing.AllocsPerRun(1000, func() {
		if _, ok := upgradeRequest(head, "/v1/ws", testSubprotocols, u); !ok {
			t.Fatal("not on the fast path")
		}
	})
	if n > 1 {
		t.Fatalf("%v allocations per upgrade head, want at most 1", n)
	}
	u.release()
	other := strings.NewReplacer("/v1/ws", "/v1/ws?x=1", "dGhlIHNhbXBsZSBub25jZQ==", "a2V5", "corral.v1.proto", "corral.v1.json").Replace(wsHead)
	u = upgrades.Get().(*upgrade)
	r, ok := upgradeRequest([]byte(other), "/v1/ws", testSubprotocols, u)
	if !ok {
		t.Fatal("not on the fast path")
	}
	if r.RequestURI != "/v1/ws?x=1" || r.Header.Get("Sec-Websocket-Key") != "a2V5" || r.Header.Get("Sec-Websocket-Protocol") != "corral.v1.json" || len(r.Header) != 5 {
		t.Fatalf("a reused upgrade's request: %q %v", r.RequestURI, r.Header)
	}
	u.release()
	if u.req.Header != nil || u.vals != [2]string{} || u.hdr["Sec-Websocket-Key"] != nil {
		t.Fatal("a released upgrade still refers to the last connection's values")
	}
}

// TestServerPaths drives a Server with the test handler: an upgrade on
// the listener's path and one through net/http, a refusal by Admit on
// each (503 with Retry-After), an upgrade without a subprotocol of the
// server (1002), the framing checks (1002 with the reason), the closing
// handshake started by the peer (echoed, Closed with its code), and the
// requests that are not upgrades.
func TestServerPaths(t *testing.T) {
	h := new(testHandler)
	addr := startServer(t, Config{}, h, nil)
	dial := func(t *testing.T) net.Conn {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		_ = c.SetDeadline(time.Now().Add(20 * time.Second))
		return c
	}
	echo := func(t *testing.T, c net.Conn, r *bufio.Reader) {
		t.Helper()
		if _, err := c.Write(cat(clientFrame(2, true, true, []byte("hello")), clientFrame(1, true, true, []byte("again")))); err != nil {
			t.Fatal(err)
		}
		for _, want := range []struct {
			op byte
			p  string
		}{{2, "1:hello"}, {1, "2:again"}} {
			op, p, err := testkit.ReadWSFrame(r)
			if err != nil || op != want.op || string(p) != want.p {
				t.Fatalf("answer %d %q %v, want %d %q", op, p, err, want.op, want.p)
			}
		}
	}
	// slowHead is an upgrade the listener leaves to net/http: a head over
	// 4 KiB.
	slowHead := strings.Replace(wsHead, "Host: corral\r\n", "Host: corral\r\nX-Pad: "+strings.Repeat("x", headMax)+"\r\n", 1)
	t.Run("an upgrade on the listener's path echoes", func(t *testing.T) {
		c, r := testkit.DialWS(t, addr, "/v1/ws", "corral.v1.proto")
		echo(t, c, r)
	})
	t.Run("an upgrade through net/http echoes, with the frame checks", func(t *testing.T) {
		c := dial(t)
		if _, err := io.WriteString(c, slowHead); err != nil {
			t.Fatal(err)
		}
		r := bufio.NewReader(c)
		if resp, err := http.ReadResponse(r, nil); err != nil || resp.StatusCode != http.StatusSwitchingProtocols {
			t.Fatalf("upgrade: %v %+v", err, resp)
		}
		echo(t, c, r)
		if _, err := c.Write(clientFrame(2, true, false, []byte("x"))); err != nil {
			t.Fatal(err)
		}
		if code, reason := closeCode(t, r); code != 1002 || reason != "unmasked client frame" {
			t.Fatalf("closed with %d %q, want 1002 unmasked client frame", code, reason)
		}
	})
	for _, tc := range []struct {
		name, head string
	}{
		{"refused on the listener's path", wsHead},
		{"refused on net/http's path", slowHead},
	} {
		t.Run(tc.name+": 503 with Retry-After", func(t *testing.T) {
			h.refusal.Store(&Refusal{Reason: "full", RetryAfter: 1500 * time.Millisecond})
			defer h.refusal.Store(nil)
			opened := h.opened.Load()
			c := dial(t)
			if _, err := io.WriteString(c, tc.head); err != nil {
				t.Fatal(err)
			}
			resp, err := http.ReadResponse(bufio.NewReader(c), nil)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") != "2" || string(body) != "full\n" {
				t.Fatalf("answer %s, Retry-After %q, body %q; want 503, 2, full", resp.Status, resp.Header.Get("Retry-After"), body)
			}
			if h.opened.Load() != opened {
				t.Fatal("a refused upgrade was opened")
			}
		})
	}
	t.Run("no subprotocol of the server: 1002 naming them", func(t *testing.T) {
		opened := h.opened.Load()
		_, r := testkit.DialWS(t, addr, "/v1/ws", "mqtt")
		code, reason := closeCode(t, r)
		if code != 1002 || reason != "subprotocol corral.v1.proto or corral.v1.json required" {
			t.Fatalf("closed with %d %q", code, reason)
		}
		if h.opened.Load() != opened {
			t.Fatal("the handler opened a connection without a subprotocol of the server")
		}
	})
	for _, tc := range []struct {
		name, reason string
		send         []byte
	}{
		{"unmasked", "unmasked client frame", clientFrame(2, true, false, []byte("x"))},
		{"empty message", "empty data message", clientFrame(2, true, true, nil)},
		{"RSV bit", "RSV bit set without an extension", append([]byte{0xc2}, clientFrame(2, true, true, []byte("x"))[1:]...)},
		{"reserved opcode", "reserved opcode", clientFrame(3, true, true, []byte("x"))},
		{"fragmented ping", "control frame over 125 bytes or fragmented", clientFrame(9, false, true, nil)},
		{"continuation first", "fragments out of sequence", clientFrame(0, true, true, []byte("x"))},
	} {
		t.Run("framing: "+tc.name, func(t *testing.T) {
			c, r := testkit.DialWS(t, addr, "/v1/ws", "corral.v1.proto")
			if _, err := c.Write(tc.send); err != nil {
				t.Fatal(err)
			}
			if code, reason := closeCode(t, r); code != 1002 || reason != tc.reason {
				t.Fatalf("closed with %d %q, want 1002 %q", code, reason, tc.reason)
			}
		})
	}
	t.Run("the peer closes first: echoed, Closed with its code", func(t *testing.T) {
		c, r := testkit.DialWS(t, addr, "/v1/ws", "corral.v1.proto")
		if _, err := c.Write(clientFrame(8, true, true, append([]byte{0x0f, 0xa1}, "bye"...))); err != nil { // 4001
			t.Fatal(err)
		}
		if code, reason := closeCode(t, r); code != 4001 || reason != "bye" {
			t.Fatalf("echo %d %q, want 4001 bye", code, reason)
		}
		testkit.WaitFor(t, 10*time.Second, "Closed(4001)", func() bool { return slices.Contains(h.closedCodes(), 4001) })
	})
	t.Run("other paths go to the other handler, other methods of the path get 405", func(t *testing.T) {
		resp, err := http.Get("http://" + addr + "/v1/other")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if string(body) != "other" {
			t.Fatalf("other path: %s %q", resp.Status, body)
		}
		resp, err = http.Post("http://"+addr+"/v1/ws", "text/plain", strings.NewReader("x"))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusMethodNotAllowed || resp.Header.Get("Allow") != "GET, HEAD" {
			t.Fatalf("POST of the path: %s, Allow %q", resp.Status, resp.Header.Get("Allow"))
		}
	})
}

func TestConfigValidate(t *testing.T) {
	ok := Config{Path: "/v1/ws", Subprotocols: testSubprotocols, MaxFrameBytes: 1}
	for _, tc := range []struct {
		name string
		mod  func(*Config)
		want string // in the error; "" valid
	}{
		{"valid", func(*Config) {}, ""},
		{"no path", func(c *Config) { c.Path = "" }, "not an absolute path"},
		{"a query in the path", func(c *Config) { c.Path = "/v1/ws?x" }, "not an absolute path"},
		{"no subprotocol", func(c *Config) { c.Subprotocols = nil }, "no subprotocol"},
		{"a subprotocol list in one", func(c *Config) { c.Subprotocols = []string{"a, b"} }, "not a token"},
		{"no frame bound", func(c *Config) { c.MaxFrameBytes = 0 }, "max frame bytes"},
		{"a negative timeout", func(c *Config) { c.HTTPIdleTimeout = -time.Second }, "HTTP idle timeout must not be negative"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := ok
			tc.mod(&c)
			err := c.Validate()
			if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), "wsserve: ")) {
				t.Fatalf("Validate = %v, want %q", err, tc.want)
			}
		})
	}
}

// TestHelloBeforeOpenIsAnswered drives 2,000 concurrent upgrades, each
// sending two messages in one write as soon as it has read the 101, and
// counts both answers of every session. nbio writes the 101 before it runs
// OnOpen, so those frames can be read and parsed before the handler has a
// session; for every other connection a hook holds OnOpen until a message
// has been read (or 1 s), which makes that window certain instead of rare.
// A lost message leaves its client waiting for an answer until its read
// deadline.
func TestHelloBeforeOpenIsAnswered(t *testing.T) {
	const (
		sessions = 2000
		parallel = 200
	)
	var opens atomic.Int64
	hook := func(e *early, c *nbws.Conn) {
		if opens.Add(1)%2 == 0 {
			return
		}
		deadline := time.Now().Add(time.Second)
		for time.Now().Before(deadline) {
			e.mu.Lock()
			ec := e.m[c]
			n := 0
			if ec != nil {
				n = len(ec.held)
			}
			e.mu.Unlock()
			if n > 0 {
				return
			}
			time.Sleep(time.Millisecond)
		}
	}
	addr := startServer(t, Config{}, new(testHandler), func(s *Server) { s.testHookOpen = hook })
	first := cat(clientFrame(2, true, true, []byte("hello")), clientFrame(2, true, true, []byte("subscribe")))
	var (
		welcomed, subscribed atomic.Int64
		mu                   sync.Mutex
		failures             []string
		wg                   sync.WaitGroup
	)
	sem := make(chan struct{}, parallel)
	for i := range sessions {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			w, s, err := helloAtOnce(addr, first)
			welcomed.Add(int64(w))
			subscribed.Add(int64(s))
			if err != nil {
				mu.Lock()
				failures = append(failures, fmt.Sprintf("session %d: %v", i, err))
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if welcomed.Load() != sessions || subscribed.Load() != sessions {
		n := min(len(failures), 5)
		t.Fatalf("%d of %d sessions welcomed, %d subscribed; first failures: %v", welcomed.Load(), sessions, subscribed.Load(), failures[:n])
	}
}

// helloAtOnce upgrades a connection, writes first right after the 101 and
// reads until both answers (1 each when they came, in order).
func helloAtOnce(addr string, first []byte) (welcomed, subscribed int, err error) {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		return 0, 0, err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(60 * time.Second))
	r, err := testkit.UpgradeWS(c, "/v1/ws", "corral.v1.proto")
	if err != nil {
		return 0, 0, err
	}
	if _, err := c.Write(first); err != nil {
		return 0, 0, err
	}
	for subscribed == 0 {
		op, p, err := testkit.ReadWSFrame(r)
		if err != nil {
			return welcomed, subscribed, err
		}
		switch {
		case op == 8:
			return welcomed, subscribed, fmt.Errorf("closed: %q", p)
		case string(p) == "1:hello":
			welcomed++
		case string(p) == "2:subscribe":
			if welcomed == 0 {
				return welcomed, 1, errors.New("subscribed before welcome")
			}
			subscribed++
		default:
			return welcomed, subscribed, fmt.Errorf("answer %q", p)
		}
	}
	return welcomed, subscribed, nil
}

// wrappedListener yields its connections wrapped, as a crypto/tls listener
// does: not *net.TCPConn.
type wrappedListener struct{ net.Listener }

func (l wrappedListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return struct{ net.Conn }{c}, nil
}

// TestServeRefusesConnectionsThatAreNotTCP: nbio would serve a wrapped
// connection in its blocking mode (a goroutine each, no frame checks), so
// the listener answers 500 instead of upgrading it.
func TestServeRefusesConnectionsThatAreNotTCP(t *testing.T) {
	h := new(testHandler)
	s, err := New(Config{Path: "/v1/ws", Subprotocols: testSubprotocols, MaxFrameBytes: 1 << 10}, h, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	defer s.Stop()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- s.Serve(wrappedListener{ln}) }()
	defer func() {
		_ = ln.Close()
		if err := <-served; err != nil {
			t.Errorf("Serve: %v", err)
		}
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(20 * time.Second))
	_, err = testkit.UpgradeWS(c, "/v1/ws", "corral.v1.proto")
	if err == nil || !strings.Contains(err.Error(), "500") {
		t.Fatalf("upgrade on a wrapped connection: %v, want a 500 answer", err)
	}
	if h.opened.Load() != 0 {
		t.Fatal("a wrapped connection was opened")
	}
}
