package client

import (
	"testing"

	"github.com/corralhq/corral/wire/corralv1"
)

func TestParseAddr(t *testing.T) {
	tests := []struct {
		addr, transport, wantT, wantTarget string
		bad                                bool
	}{
		{"ws://h:1/v1/ws", "", "ws", "ws://h:1/v1/ws", false},
		{"ws://h:1", "", "ws", "ws://h:1/v1/ws", false},
		{"grpc://h:2", "", "grpc", "h:2", false},
		{"h:3", "grpc", "grpc", "h:3", false},
		{"h:4", "", "ws", "ws://h:4/v1/ws", false},
		{"http://h:5", "", "", "", true},
	}
	for _, tc := range tests {
		tr, target, err := parseAddr(tc.addr, tc.transport)
		if (err != nil) != tc.bad || tr != tc.wantT || target != tc.wantTarget {
			t.Errorf("parseAddr(%q, %q) = %q, %q, %v", tc.addr, tc.transport, tr, target, err)
		}
	}
}

func TestValidate(t *testing.T) {
	bad := []Config{
		{},
		{Addrs: []string{"ftp://x"}},
		{Addrs: []string{"x:1"}, Transport: "quic"},
		{Addrs: []string{"x:1"}, Priority: 7},
	}
	for i, c := range bad {
		if c.Validate() == nil {
			t.Errorf("config %d accepted", i)
		}
	}
}

func TestResumePositionAndDedupe(t *testing.T) {
	c := &Client{cfg: Config{ManualAck: true}.withDefaults(), subs: map[string]*chanState{"ch": {}}, events: make(chan Event, 16)}
	c.ctx = t.Context()
	msg := func(off uint64, p corralv1.Priority) *corralv1.Message {
		return &corralv1.Message{Channel: "ch", Epoch: "e", Offset: off, Priority: p}
	}
	cn := nopConn{}
	c.onMessage(cn, msg(1, corralv1.Priority_PRIORITY_P2))
	c.onMessage(cn, msg(2, corralv1.Priority_PRIORITY_P0))
	c.onMessage(cn, msg(3, corralv1.Priority_PRIORITY_P0))
	c.onMessage(cn, msg(4, corralv1.Priority_PRIORITY_P2))
	if p := c.subs["ch"].resumeFrom(); p.GetOffset() != 1 || p.GetEpoch() != "e" {
		t.Fatalf("resume from %v, want before the oldest unacknowledged P0 (1)", p)
	}
	// A resume now brings 2..4 again: the application already has them.
	n := len(c.events)
	for off := uint64(2); off <= 4; off++ {
		c.onMessage(cn, msg(off, corralv1.Priority_PRIORITY_P0))
	}
	if len(c.events) != n || c.Duplicates() != 3 {
		t.Fatalf("unacknowledged P0 sent again: %d events more, %d duplicates; want none and 3", len(c.events)-n, c.Duplicates())
	}
	if p := c.subs["ch"].resumeFrom(); p.GetOffset() != 1 {
		t.Fatalf("resume from %v after the resend, want still 1 (nothing acknowledged)", p)
	}
	_ = c.Ack("ch", "e", 2)
	if p := c.subs["ch"].resumeFrom(); p.GetOffset() != 2 {
		t.Fatalf("resume from %v after acking 2, want 2", p)
	}
	_ = c.Ack("ch", "e", 3)
	if p := c.subs["ch"].resumeFrom(); p.GetOffset() != 4 {
		t.Fatalf("resume from %v with nothing unacknowledged, want 4", p)
	}
	// After a resume the hub sends 3 and 4 again: both are duplicates now.
	n = len(c.events)
	c.onMessage(cn, msg(3, corralv1.Priority_PRIORITY_P0))
	c.onMessage(cn, msg(4, corralv1.Priority_PRIORITY_P2))
	if len(c.events) != n {
		t.Fatal("a duplicate offset reached the application")
	}
	c.onMessage(cn, msg(5, corralv1.Priority_PRIORITY_P2))
	if len(c.events) != n+1 {
		t.Fatal("a new offset was dropped")
	}
}

type nopConn struct{}

func (nopConn) send(*corralv1.ClientFrame) error     { return nil }
func (nopConn) recv() (*corralv1.ServerFrame, error) { return nil, nil }
func (nopConn) close()                               {}
