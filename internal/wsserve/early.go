package wsserve

import (
	"sync"

	nbws "github.com/lesismal/nbio/nbhttp/websocket"
)

// early holds what arrives on a connection before its session is set.
// nbio's upgrader adds the connection to the poller and writes the 101
// answer before it calls OnOpen, so a client that sends its Hello as
// soon as it reads the 101 can have it read, parsed and handed to
// OnMessage while OnOpen has not run yet (about 1 in 10,000 set-ups under a
// dial storm). An entry lives from the first bytes read to the end of
// OnOpen: it follows the frames (frameTrack) and holds the messages, which
// OnOpen handles, in order, before it sets the session. Its methods are
// safe for concurrent use.
//
// The sessions themselves are published in live, not read back from nbio:
// nbio's SessionWithLock reads the session outside the connection's lock
// (the lock guards only the blocking mode's channel), so a read on the
// poller racing with SetSession on a worker is a data race. Such a read
// once saw half of the interface, the new type with a nil pointer (an edge
// under a herd crashed calling Conn() on it), and -race caught it again in
// the hub's tests (an unsafe check of the interface's data word narrowed
// the crash but not the race).
type early struct {
	mu   sync.Mutex
	m    map[*nbws.Conn]*earlyConn
	live sync.Map // *nbws.Conn -> Session: set by open, dropped by end
}

// earlyConn is what early holds for one connection.
type earlyConn struct {
	frames frameTrack
	held   []heldMessage
}

// heldMessage is a message read before OnOpen (its payload copied: nbio
// reuses the buffer after OnMessage returns).
type heldMessage struct {
	binary bool
	data   []byte
}

// entry returns c's entry, made on first use; e.mu is held.
func (e *early) entry(c *nbws.Conn) *earlyConn {
	ec := e.m[c]
	if ec == nil {
		ec = new(earlyConn)
		e.m[c] = ec
	}
	return ec
}

// session returns c's session, false before open has set it.
func (e *early) session(c *nbws.Conn) (Session, bool) {
	if v, ok := e.live.Load(c); ok {
		return v.(Session), true
	}
	return nil, false
}

// feed follows data read from c, from the session's tracker when the
// session is set and from an early one otherwise.
func (e *early) feed(c *nbws.Conn, data []byte) (Session, frameVerdict) {
	if s, ok := e.session(c); ok {
		return s, s.Conn().frames.feed(data)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if s, ok := e.session(c); ok { // set meanwhile
		return s, s.Conn().frames.feed(data)
	}
	if v := e.entry(c).frames.feed(data); v != frameOK {
		return nil, frameDead // reported by open
	}
	return nil, frameOK
}

// hold keeps a message of c read before its session was set, for open to
// hand over. It returns the session instead when it was set meanwhile.
func (e *early) hold(c *nbws.Conn, binary bool, data []byte) Session {
	e.mu.Lock()
	defer e.mu.Unlock()
	if s, ok := e.session(c); ok {
		return s
	}
	ec := e.entry(c)
	ec.held = append(ec.held, heldMessage{binary: binary, data: append([]byte(nil), data...)})
	return nil
}

// open hands c over to its session s. While messages are held it returns
// them, and the caller handles them and calls open again; when none are
// left it moves c's early tracker to s.Conn(), sets c's session
// and returns the violation the early bytes held, if any. A message that
// arrives meanwhile is held (the session is not set yet), so the session
// sees every message, in order, and one at a time.
func (e *early) open(c *nbws.Conn, s Session) ([]heldMessage, frameVerdict) {
	e.mu.Lock()
	defer e.mu.Unlock()
	ec := e.m[c]
	if ec == nil {
		e.set(c, s)
		return nil, frameOK
	}
	if held := ec.held; len(held) > 0 {
		ec.held = nil
		return held, frameOK
	}
	conn := s.Conn()
	conn.frames = ec.frames
	// The verdict is read before the session is set: from then on the
	// poller feeds conn.frames without e.mu (a read after it raced with
	// the poller's write of a violation, caught by -race in CI).
	v := conn.frames.failed()
	delete(e.m, c)
	e.set(c, s)
	return nil, v
}

// set publishes c's session; e.mu is held.
func (e *early) set(c *nbws.Conn, s Session) {
	e.live.Store(c, s)
	c.SetSession(s)
}

// forget drops c's early entry.
func (e *early) forget(c *nbws.Conn) {
	e.mu.Lock()
	delete(e.m, c)
	e.mu.Unlock()
}

// end drops everything held for c, which has closed, and returns its
// session if it had one.
func (e *early) end(c *nbws.Conn) (Session, bool) {
	e.forget(c)
	v, ok := e.live.LoadAndDelete(c)
	if !ok {
		return nil, false
	}
	return v.(Session), true
}
