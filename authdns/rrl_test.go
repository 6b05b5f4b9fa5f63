package authdns

import (
	"net/netip"
	"testing"
	"time"

	"github.com/miekg/dns"
)

func TestRRLLimitsPerPrefixWithSlip(t *testing.T) {
	start := time.Unix(1000, 0)
	l := newLimiter(RRLConfig{Enabled: true, Rate: 5, Slip: 2, IPv4Prefix: 24, IPv6Prefix: 64}, start)
	q := &query{name: []byte("\x01a\x00"), qtype: dns.TypeA}
	a := netip.MustParseAddr("192.0.2.1")
	neighbour := netip.MustParseAddr("192.0.2.200") // same /24
	other := netip.MustParseAddr("198.51.100.1")
	now := start.Add(100 * time.Millisecond)
	for i := range 5 {
		if d := l.allow(a, q, rcodeNoError, now); d != rrlAllow {
			t.Fatalf("response %d limited under the rate", i)
		}
	}
	var drops, slips int
	for range 10 {
		switch l.allow(neighbour, q, rcodeNoError, now) {
		case rrlDrop:
			drops++
		case rrlSlip:
			slips++
		default:
			t.Fatal("the /24 went over its budget")
		}
	}
	if drops != 5 || slips != 5 {
		t.Errorf("drops %d slips %d, want every 2nd limited response slipped", drops, slips)
	}
	if l.allow(other, q, rcodeNoError, now) != rrlAllow {
		t.Error("another prefix was limited")
	}
	if l.allow(a, q, rcodeNXDomain, now) != rrlAllow {
		t.Error("NXDOMAIN answers share the budget of positive answers")
	}
	if l.allow(a, q, rcodeNoError, now.Add(time.Second)) != rrlAllow {
		t.Error("the budget did not renew in the next second")
	}
	v6 := newLimiter(RRLConfig{Enabled: true, Rate: 1, Slip: 0, IPv4Prefix: 24, IPv6Prefix: 64}, start)
	v6.allow(netip.MustParseAddr("2001:db8::1"), q, 0, now)
	if v6.allow(netip.MustParseAddr("2001:db8::ffff"), q, 0, now) != rrlDrop {
		t.Error("the same /64 was not limited (slip 0 drops all)")
	}
	if v6.allow(netip.MustParseAddr("2001:db8:0:1::1"), q, 0, now) != rrlAllow {
		t.Error("another /64 was limited")
	}
}

// TestRRLInHandle drives the limiter through the query path with an
// injected clock: limited responses are dropped or sent empty with TC.
func TestRRLInHandle(t *testing.T) {
	cfg := decodeConfig(t, testZone)
	cfg.RRL = RRLConfig{Enabled: true, Rate: 3, Slip: 2, IPv4Prefix: 24, IPv6Prefix: 64}
	now := time.Unix(5000, 0)
	s, err := New(cfg, Options{Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	w := newWorker(s, &stats{}, 1)
	req := mkQuery("static.corral.test", dns.TypeA, nil)
	var answered, truncated, dropped int
	for range 9 {
		resp, o := w.handle(req, loopback, false, make([]byte, 0, 4096))
		if o == outDrop {
			dropped++
			continue
		}
		r := new(dns.Msg)
		if err := r.Unpack(resp); err != nil {
			t.Fatal(err)
		}
		if r.Truncated && len(r.Answer) == 0 {
			truncated++
		} else {
			answered++
		}
	}
	if answered != 3 || truncated != 3 || dropped != 3 {
		t.Errorf("answered %d truncated %d dropped %d, want 3 each", answered, truncated, dropped)
	}
	// TCP is never limited.
	if _, o := w.handle(req, loopback, true, make([]byte, 0, 4096)); o != outAnswer {
		t.Error("TCP response limited")
	}
}
