package nbclose

import (
	"net"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lesismal/nbio"
)

// TestStaleEventSparesTheNextConnection builds the race the package exists
// for, in order: the poller is held while a connection b becomes readable
// and then connection a's peer closes, so that one epoll_wait returns b's
// event before a's; while the poller handles b's event, a is closed from
// another goroutine and a new connection c is added, on the descriptor
// number a freed if a's close freed it. When the poller then reaches a's
// event, nbio's Close (the bug) has let it fall on c, which nbio closes
// with EOF; Close must leave c alone. (Checked: with a.Close() in place of
// Close(a), c is cut.) a's peer either closes (a FIN) or resets it (an
// RST: then a cannot be shut down, and Close must not fall back to closing
// it here, which cut c just the same).
func TestStaleEventSparesTheNextConnection(t *testing.T) {
	for _, reset := range []bool{false, true} {
		name := "fin"
		if reset {
			name = "reset"
		}
		t.Run(name, func(t *testing.T) { staleEvent(t, reset) })
	}
}

func staleEvent(t *testing.T, reset bool) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	eng := nbio.NewEngine(nbio.Config{NPoller: 1})
	closedC := make(chan error, 1)
	var a, c atomic.Pointer[nbio.Conn] // set on the test's goroutine and the poller's
	var goC net.Conn
	hold := make(chan struct{})
	staged := make(chan struct{})
	eng.OnData(func(nc *nbio.Conn, data []byte) {
		switch string(data) {
		case "hold": // d: keep the poller here until b and a are ready
			<-hold
		case "b": // b's event, handled before a's in the same batch
			_ = Close(a.Load())
			nc, err := eng.AddConn(goC)
			if err != nil {
				t.Error(err)
			}
			c.Store(nc)
			t.Logf("a on descriptor %d, c on %d", a.Load().Hash(), nc.Hash())
			close(staged)
		}
	})
	eng.OnClose(func(nc *nbio.Conn, err error) {
		if nc == c.Load() {
			closedC <- err
		}
	})
	if err := eng.Start(); err != nil {
		t.Fatal(err)
	}
	defer eng.Stop()

	// add dials a client and puts the accepted end on the engine.
	add := func() (net.Conn, *nbio.Conn) {
		cl, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		sc, err := ln.Accept()
		if err != nil {
			t.Fatal(err)
		}
		nc, err := eng.AddConn(sc)
		if err != nil {
			t.Fatal(err)
		}
		return cl, nc
	}
	dCl, _ := add()
	bCl, _ := add()
	aCl, an := add()
	a.Store(an)
	defer dCl.Close()
	defer bCl.Close()
	// c's server end, accepted now so that its own descriptor is taken
	// before a's is freed: nbio's dup then gets the lowest free number.
	cCl, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer cCl.Close()
	if goC, err = ln.Accept(); err != nil {
		t.Fatal(err)
	}

	if _, err := dCl.Write([]byte("hold")); err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond) // the poller is in d's handler
	if _, err := bCl.Write([]byte("b")); err != nil {
		t.Fatal(err)
	}
	time.Sleep(20 * time.Millisecond)
	if reset {
		_ = aCl.(*net.TCPConn).SetLinger(0) // an RST: EPOLLHUP and EPOLLERR
	}
	_ = aCl.Close() // a's FIN (EPOLLRDHUP) or RST, after b's data
	time.Sleep(50 * time.Millisecond)
	// Fill the lower free numbers (a's client end, just closed, and
	// the accepted ends nbio dup'ed and closed), so that the number a frees is the lowest free one.
	for {
		f, err := os.Open(os.DevNull)
		if err != nil {
			t.Fatal(err)
		}
		if int(f.Fd()) > an.Hash() {
			f.Close()
			break
		}
		defer f.Close()
	}

	close(hold)
	select {
	case <-staged:
	case <-time.After(5 * time.Second):
		t.Fatal("b's event was not handled")
	}
	select {
	case err := <-closedC:
		t.Fatalf("the new connection was closed (%v): a's stale event fell on it", err)
	case <-time.After(200 * time.Millisecond):
	}
	if closed, _ := c.Load().IsClosed(); closed {
		t.Fatal("the new connection is closed")
	}
	if closed, _ := an.IsClosed(); !closed {
		t.Error("a was not closed by its poller")
	}
}
