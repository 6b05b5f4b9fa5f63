package client

import (
	"net/netip"
	"testing"

	"github.com/corralhq/corral/wire/corralv1"
)

func TestParseAddr(t *testing.T) {
	tests := []struct {
		addr, transport string
		want            string // the endpoint of 10.0.0.1 as String shows it, with the name URL
		bad             bool
	}{
		{addr: "ws://h:1/v1/ws", want: "ws://10.0.0.1:1/v1/ws ws://h:1/v1/ws"},
		{addr: "ws://h:1", want: "ws://10.0.0.1:1/v1/ws ws://h:1/v1/ws"},
		{addr: "wss://h/x?a=b", want: "wss://10.0.0.1:443/x?a=b wss://h:443/x?a=b"},
		{addr: "grpc://h:2", want: "grpc://10.0.0.1:2 ws://h:2"},
		{addr: "grpcs://h:2", want: "grpcs://10.0.0.1:2 wss://h:2"},
		{addr: "h:3", transport: "grpc", want: "grpc://10.0.0.1:3 ws://h:3"},
		{addr: "h:4", want: "ws://10.0.0.1:4/v1/ws ws://h:4/v1/ws"},
		{addr: "http://h:5", bad: true},
		{addr: "grpc://h", bad: true},
		{addr: "ws://:5", bad: true},
	}
	for _, tc := range tests {
		t.Run(tc.addr, func(t *testing.T) {
			tg, err := parseAddr(tc.addr, tc.transport)
			if (err != nil) != tc.bad {
				t.Fatalf("parseAddr(%q, %q): error %v, want bad %v", tc.addr, tc.transport, err, tc.bad)
			}
			if err != nil {
				return
			}
			ep := endpoint{target: tg, ip: netip.MustParseAddr("10.0.0.1")}
			if got := ep.String() + " " + ep.url(); got != tc.want {
				t.Fatalf("parseAddr(%q, %q) = %s, want %s", tc.addr, tc.transport, got, tc.want)
			}
		})
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
