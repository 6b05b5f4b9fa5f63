package wsserve

import (
	"errors"
	"math"
	"net"
	"time"
	"unsafe"

	nbws "github.com/lesismal/nbio/nbhttp/websocket"
)

// nbio's writes never block: what the socket does not take, nbio buffers.
// To keep the caller's own bounded queue in charge, Conn.Write hands a
// message to nbio only while the kernel's send queue of the socket holds
// less than sendQueueLimit bytes, and otherwise waits (polling, only for
// that slow connection) up to the write timeout.

// sendQueueLimit is the unsent bytes in the kernel above which Write waits
// before handing nbio another message.
const sendQueueLimit = 256 << 10

// checkEvery is how many bytes are written between two kernel queue checks.
const checkEvery = 32 << 10

// ErrStalled is the error of Conn.Write when the peer has read nothing for
// the write timeout: a slow consumer.
var ErrStalled = errors.New("wsserve: write timeout: the peer does not read")

// Conn is the state of one upgraded connection: the nbio connection, the
// write pacing and the frame tracker. It is on every idle session, so it
// holds 24 bytes and no pointer but the connection; the caller keeps it by
// value in its own per-connection struct (see Handler.Open) and returns its
// address from Session.Conn. Its zero value is not usable.
//
// Write, Close and Abort are called by one goroutine at a time (the
// session's writer); the frame tracker is wsserve's.
type Conn struct {
	ws        *nbws.Conn
	since     int32 // bytes written since the last queue check
	timeoutMS int32 // write timeout in milliseconds
	frames    frameTrack
}

const _ = -uint(unsafe.Sizeof(Conn{}) / 25) // fails to compile above 24 bytes

// newConn returns the Conn of ws with a write timeout of d.
func newConn(ws *nbws.Conn, d time.Duration) Conn {
	return Conn{ws: ws, timeoutMS: int32(min(max(d.Milliseconds(), 1), math.MaxInt32))}
}

// WS returns the nbio connection, for what Conn does not offer (its
// remote address, its subprotocol).
func (c *Conn) WS() *nbws.Conn { return c.ws }

// Subprotocol returns the negotiated subprotocol, one of
// Config.Subprotocols.
func (c *Conn) Subprotocol() string { return c.ws.Subprotocol() }

// RemoteAddr returns the peer's address.
func (c *Conn) RemoteAddr() net.Addr { return c.ws.RemoteAddr() }

// full reports whether the kernel holds enough unsent bytes that the next
// write would end in nbio's own (unbounded) buffer: above sendQueueLimit,
// or above half the socket's send buffer when that is smaller (a send
// buffer of 208 KiB, Linux's default, never holds 256 KiB: without this
// bound a peer that reads nothing would make nbio buffer without end).
func (c *Conn) full() bool {
	n, size := c.sendQueue()
	limit := sendQueueLimit
	if size > 0 {
		limit = min(limit, size/2)
	}
	return n > limit
}

// room waits until the kernel takes more, or the write timeout passes.
func (c *Conn) room(size int) error {
	c.since += int32(size)
	if c.since < checkEvery {
		return nil
	}
	c.since = 0
	deadline := time.Now().Add(time.Duration(c.timeoutMS) * time.Millisecond)
	for d := time.Millisecond; c.full(); d = min(2*d, 20*time.Millisecond) {
		if time.Now().After(deadline) {
			return ErrStalled
		}
		time.Sleep(d)
	}
	return nil
}

// Write sends b as one message, binary or text. It waits while the kernel
// holds more than 256 KiB (or half the socket's send buffer) unsent, and
// returns ErrStalled when the peer has taken nothing for the write timeout.
func (c *Conn) Write(binary bool, b []byte) error {
	if err := c.room(len(b)); err != nil {
		return err
	}
	mt := nbws.TextMessage
	if binary {
		mt = nbws.BinaryMessage
	}
	return c.ws.WriteMessage(mt, b)
}

// Close sends the close frame with code and reason and completes the
// closing handshake (RFC 6455 section 7.1.1: the server closes TCP after
// the close frames crossed), so that a peer still sending gets the close
// frame and not a reset: it waits until the peer's close frame ended the
// connection (nbio closes it on receipt), or, once the kernel has
// delivered every byte, for linger; while bytes are still on their way it
// waits as long as the peer reads, and gives up after the write timeout
// without progress. A linger of 0 closes at once after the frame.
func (c *Conn) Close(code int, reason string, linger time.Duration) {
	_ = c.ws.WriteClose(code, reason)
	if linger > 0 {
		c.linger(linger)
	}
	_ = c.ws.Close()
}

func (c *Conn) linger(linger time.Duration) {
	closed, ok := c.ws.Conn.(interface{ IsClosed() (bool, error) })
	if !ok {
		return
	}
	stall := time.Duration(c.timeoutMS) * time.Millisecond
	progress, delivered := time.Now(), time.Time{}
	last := -1
	for d := 200 * time.Microsecond; ; d = min(2*d, 20*time.Millisecond) {
		if done, _ := closed.IsClosed(); done {
			return
		}
		now := time.Now()
		switch n := c.unsent(); {
		case n == 0:
			if delivered.IsZero() {
				delivered = now
			}
			if now.Sub(delivered) >= linger {
				return
			}
		default:
			delivered = time.Time{}
			if last < 0 || n < last {
				progress = now
			}
			if now.Sub(progress) >= stall {
				return
			}
			last = n
		}
		time.Sleep(d)
	}
}

// Abort cuts the TCP connection without a close frame.
func (c *Conn) Abort() { _ = c.ws.Conn.Close() }
