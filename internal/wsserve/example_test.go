package wsserve_test

import (
	"context"
	"fmt"
	"net"
	"sync/atomic"
	"time"

	"github.com/corralhq/corral/internal/testkit"
	"github.com/corralhq/corral/internal/wsserve"
)

// echoHandler admits every upgrade; its sessions answer each message with
// "echo: " and the message.
type echoHandler struct{}

func (echoHandler) Admit() (wsserve.Refusal, bool) { return wsserve.Refusal{}, true }

func (echoHandler) Open(conn wsserve.Conn) wsserve.Session { return &echoSession{conn: conn} }

// echoSession keeps its Conn by value: the connection holds nothing else.
type echoSession struct {
	conn    wsserve.Conn
	closing atomic.Bool
}

func (s *echoSession) Conn() *wsserve.Conn { return &s.conn }

func (s *echoSession) Message(binary bool, data []byte) {
	_ = s.conn.Write(binary, append([]byte("echo: "), data...))
}

func (s *echoSession) ProtocolError(reason string) {
	s.closing.Store(true)
	go s.conn.Close(1002, reason, wsserve.DefaultCloseTimeout)
}

func (s *echoSession) Pong()         {}
func (s *echoSession) Closing() bool { return s.closing.Load() }
func (s *echoSession) Closed(int)    {}

// Example serves WebSocket upgrades of /v1/ws with an echo session and
// talks to it with a bare client.
func Example() {
	srv, err := wsserve.New(wsserve.Config{
		Path:          "/v1/ws",
		Subprotocols:  []string{"echo.v1"},
		MaxFrameBytes: 4096,
	}, echoHandler{}, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	if err := srv.Start(); err != nil {
		fmt.Println(err)
		return
	}
	defer srv.Stop()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Println(err)
		return
	}
	go func() { _ = srv.Serve(ln) }()
	defer func() {
		_ = ln.Close()
		_ = srv.Shutdown(context.Background())
	}()

	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		fmt.Println(err)
		return
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	r, err := testkit.UpgradeWS(c, "/v1/ws", "echo.v1")
	if err != nil {
		fmt.Println(err)
		return
	}
	_, _ = c.Write(testkit.WSClientFrame(1, true, true, []byte("hi")))
	op, p, err := testkit.ReadWSFrame(r)
	fmt.Println(op, string(p), err)
	_, _ = c.Write(testkit.WSClientFrame(1, true, false, []byte("unmasked")))
	op, p, err = testkit.ReadWSFrame(r)
	if err != nil || len(p) < 2 {
		fmt.Println(op, p, err)
		return
	}
	fmt.Println(op, int(p[0])<<8|int(p[1]), string(p[2:]))
	// Output:
	// 1 echo: hi <nil>
	// 8 1002 unmasked client frame
}
