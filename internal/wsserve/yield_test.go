package wsserve

import (
	"net"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/corralhq/corral/internal/testkit"
)

// countingHandler is a testHandler whose sessions count the messages
// they handle in handled.
type countingHandler struct {
	testHandler
	handled atomic.Int64
}

func (h *countingHandler) Open(conn Conn) Session {
	return &countingSession{testSession: testSession{h: &h.testHandler, conn: conn}, handled: &h.handled}
}

type countingSession struct {
	testSession
	handled *atomic.Int64
}

func (s *countingSession) Conn() *Conn { return &s.conn }

func (s *countingSession) Message(binary bool, data []byte) {
	s.handled.Add(1)
	s.testSession.Message(binary, data)
}

// TestPollerYieldsToHandlers checks, with GOMAXPROCS=1, that the message
// handler nbio's poller dispatched to the Workers has run when the
// poller's data handler returns, that is before the poller can go back to
// epoll_wait. epoll_wait is a plain system call that keeps the only P:
// without the yield the handler waited for sysmon to take the P back
// (20 us to 10 ms), and the core sat idle under a dial storm (issue 10,
// item 13). The client sends one message at a time and waits for its
// echo, so each message is one read. A few misses are allowed (the
// scheduler takes from its global queue first every 61st time); without
// the yield none is handled in time.
func TestPollerYieldsToHandlers(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	const messages = 200
	h := new(countingHandler)
	var reads, inTime atomic.Int64
	hook := func() {
		if n := reads.Add(1); h.handled.Load() == n {
			inTime.Add(1)
		}
	}
	addr := startServer(t, Config{}, h, func(s *Server) { s.testHookData = hook })
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(time.Minute))
	r, err := testkit.UpgradeWS(c, "/v1/ws", "corral.v1.proto")
	if err != nil {
		t.Fatal(err)
	}
	for i := range messages {
		if _, err := c.Write(clientFrame(2, true, true, []byte("m"))); err != nil {
			t.Fatal(err)
		}
		if _, _, err := testkit.ReadWSFrame(r); err != nil {
			t.Fatalf("message %d: %v", i, err)
		}
	}
	testkit.WaitFor(t, 10*time.Second, "the poller's last data handler", func() bool { return reads.Load() >= messages })
	t.Logf("%d of %d messages handled before the poller read on", inTime.Load(), reads.Load())
	if got := inTime.Load(); got < messages*3/4 {
		t.Fatalf("%d of %d messages handled before the poller read on, want at least %d", got, messages, messages*3/4)
	}
}
