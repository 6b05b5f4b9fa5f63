package wsserve

import (
	"testing"

	nbws "github.com/lesismal/nbio/nbhttp/websocket"
)

// TestWSEarlyMessagesHeld checks early's hand-over of messages read
// before OnOpen: open returns them in order, a message that arrives while
// they are handled is returned by the next open, and the session is set
// only once nothing is held.
func TestWSEarlyMessagesHeld(t *testing.T) {
	e := &early{m: make(map[*nbws.Conn]*earlyConn)}
	c := new(nbws.Conn)
	buf := []byte("hello")
	if s := e.hold(c, true, buf); s != nil {
		t.Fatal("hold returned a session before open")
	}
	copy(buf, "xxxxx") // nbio reuses the buffer after OnMessage returns
	_ = e.hold(c, false, []byte("second"))
	s := new(testSession)
	held, v := e.open(c, s)
	if len(held) != 2 || string(held[0].data) != "hello" || !held[0].binary || string(held[1].data) != "second" || v != frameOK {
		t.Fatalf("first open: %+v %v, want hello then second", held, v)
	}
	if _, ok := e.session(c); ok {
		t.Fatal("session set while messages were held")
	}
	_ = e.hold(c, true, []byte("third")) // read while the first two are handled
	if held, _ = e.open(c, s); len(held) != 1 || string(held[0].data) != "third" {
		t.Fatalf("second open: %+v, want third", held)
	}
	if held, v = e.open(c, s); len(held) != 0 || v != frameOK {
		t.Fatalf("last open: %+v %v, want nothing held", held, v)
	}
	if got, _ := e.session(c); got != Session(s) {
		t.Fatal("session not set by the last open")
	}
	if len(e.m) != 0 {
		t.Fatal("early entry kept after open")
	}
	if got := e.hold(c, true, []byte("live")); got != Session(s) {
		t.Fatal("hold after open did not return the session")
	}
	if got, ok := e.end(c); !ok || got != Session(s) {
		t.Fatal("end did not return the session")
	}
	if _, ok := e.session(c); ok {
		t.Fatal("session kept after end: every closed connection's entry would leak")
	}
}

// TestWSEarlyBytes checks the bytes nbio reads before OnOpen: they are
// tracked, and the tracker moves to the session, split header and all.
func TestWSEarlyBytes(t *testing.T) {
	e := &early{m: make(map[*nbws.Conn]*earlyConn)}
	stream := cat(clientFrame(2, true, true, make([]byte, 300)), clientFrame(2, true, true, nil))
	c := new(nbws.Conn)
	if s, v := e.feed(c, stream[:3]); s != nil || v != frameOK {
		t.Fatalf("early feed: %v %v", s, v)
	}
	s := new(testSession)
	if held, v := e.open(c, s); len(held) != 0 || v != frameOK {
		t.Fatalf("open: %d held, %v", len(held), v)
	}
	if len(e.m) != 0 {
		t.Fatal("early tracker kept after open")
	}
	got, v := e.feed(c, stream[3:])
	if got != Session(s) || v != frameEmpty {
		t.Fatalf("after open: %p %v, want the session and frameEmpty", got, v)
	}

	bad := new(nbws.Conn)
	if _, v := e.feed(bad, clientFrame(1, true, false, []byte("x"))); v != frameDead {
		t.Fatalf("early violation: %v, want frameDead (reported by open)", v)
	}
	if _, v := e.open(bad, new(testSession)); v != frameUnmasked {
		t.Fatalf("open after an early violation: %v, want frameUnmasked", v)
	}

	gone := new(nbws.Conn)
	_, _ = e.feed(gone, stream[:1])
	e.forget(gone)
	if len(e.m) != 0 {
		t.Fatal("forget kept the tracker")
	}
}
