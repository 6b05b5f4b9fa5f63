package authdns

import (
	"fmt"
	"math/rand/v2"
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
		if d := l.allow(a, rrlAnswer, q.qtype, q.name, now); d != rrlAllow {
			t.Fatalf("response %d limited under the rate", i)
		}
	}
	var drops, slips int
	for range 10 {
		switch l.allow(neighbour, rrlAnswer, q.qtype, q.name, now) {
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
	if l.allow(other, rrlAnswer, q.qtype, q.name, now) != rrlAllow {
		t.Error("another prefix was limited")
	}
	if l.allow(a, rrlNXDomain, q.qtype, []byte("\x04test\x00"), now) != rrlAllow {
		t.Error("NXDOMAIN answers share the budget of positive answers")
	}
	if l.allow(a, rrlAnswer, q.qtype, q.name, now.Add(time.Second)) != rrlAllow {
		t.Error("the budget did not renew in the next second")
	}
	v6 := newLimiter(RRLConfig{Enabled: true, Rate: 1, Slip: 0, IPv4Prefix: 24, IPv6Prefix: 64}, start)
	v6.allow(netip.MustParseAddr("2001:db8::1"), rrlAnswer, q.qtype, q.name, now)
	if v6.allow(netip.MustParseAddr("2001:db8::ffff"), rrlAnswer, q.qtype, q.name, now) != rrlDrop {
		t.Error("the same /64 was not limited (slip 0 drops all)")
	}
	if v6.allow(netip.MustParseAddr("2001:db8:0:1::1"), rrlAnswer, q.qtype, q.name, now) != rrlAllow {
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

// TestRRLRandomNameFloods floods from one /24, in one second, with random
// names that all miss (NXDOMAIN), all hit a wildcard (answers and NODATA)
// or all lie outside the zones (REFUSED): each flood is one bucket, so only
// the rate is answered and the rest is slipped or dropped. Keyed by query
// name, as before, every one was answered.
func TestRRLRandomNameFloods(t *testing.T) {
	tests := []struct {
		name   string
		suffix string
		qtype  uint16
		rcode  int
	}{
		{"NXDOMAIN", "nope.corral.test", dns.TypeA, dns.RcodeNameError},
		{"wildcard answers", "tenants.corral.test", dns.TypeA, dns.RcodeSuccess},
		{"wildcard NODATA", "tenants.corral.test", dns.TypeAAAA, dns.RcodeSuccess},
		{"REFUSED outside the zones", "example.org", dns.TypeA, dns.RcodeRefused},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := decodeConfig(t, testZone)
			cfg.RRL = RRLConfig{Enabled: true, Rate: 200, Slip: 2, IPv4Prefix: 24, IPv6Prefix: 64}
			now := time.Unix(5000, 0)
			s, err := New(cfg, Options{Now: func() time.Time { return now }})
			if err != nil {
				t.Fatal(err)
			}
			w := newWorker(s, &stats{}, 1)
			r := rand.New(rand.NewPCG(1, 2))
			var answered, truncated, dropped int
			for i := range 1000 {
				name := fmt.Sprintf("r%x.%s", r.Uint64(), tc.suffix)
				client := netip.AddrFrom4([4]byte{192, 0, 2, byte(i)})
				resp, o := w.handle(mkQuery(name, tc.qtype, nil), client, false, make([]byte, 0, 4096))
				if o == outDrop {
					dropped++
					continue
				}
				m := new(dns.Msg)
				if err := m.Unpack(resp); err != nil {
					t.Fatal(err)
				}
				if m.Rcode != tc.rcode {
					t.Fatalf("%s: rcode %s, want %s", name, dns.RcodeToString[m.Rcode], dns.RcodeToString[tc.rcode])
				}
				if m.Truncated {
					truncated++
				} else {
					answered++
				}
			}
			if answered != 200 || truncated != 400 || dropped != 400 {
				t.Errorf("answered %d, slipped %d, dropped %d; want 200, 400, 400", answered, truncated, dropped)
			}
		})
	}
}

// TestRRLBuckets pins which responses share a bucket.
func TestRRLBuckets(t *testing.T) {
	l := newLimiter(RRLConfig{Enabled: true, Rate: 1, IPv4Prefix: 24, IPv6Prefix: 64}, time.Unix(0, 0))
	a := netip.MustParseAddr("192.0.2.1")
	n1, n2 := []byte("\x01a\x04test\x00"), []byte("\x01b\x04test\x00")
	tests := []struct {
		name string
		same bool
		k1   uint64
		k2   uint64
	}{
		{"answers for two names", false, l.key(a, rrlAnswer, dns.TypeA, n1), l.key(a, rrlAnswer, dns.TypeA, n2)},
		{"answers for two types", false, l.key(a, rrlAnswer, dns.TypeA, n1), l.key(a, rrlAnswer, dns.TypeAAAA, n1)},
		{"an answer and an NXDOMAIN", false, l.key(a, rrlAnswer, dns.TypeA, n1), l.key(a, rrlNXDomain, dns.TypeA, n1)},
		{"NXDOMAIN for two types", true, l.key(a, rrlNXDomain, dns.TypeA, n1), l.key(a, rrlNXDomain, dns.TypeMX, n1)},
		{"NODATA for two types", true, l.key(a, rrlNoData, dns.TypeA, n1), l.key(a, rrlNoData, dns.TypeMX, n1)},
		{"errors whatever the name and type", true, l.key(a, rrlError, dns.TypeA, n1), l.key(a, rrlError, dns.TypeMX, n2)},
		{"errors from two addresses of a /24", true, l.key(a, rrlError, 1, nil), l.key(netip.MustParseAddr("192.0.2.200"), rrlError, 1, nil)},
		{"errors from two /24s", false, l.key(a, rrlError, 1, nil), l.key(netip.MustParseAddr("192.0.3.1"), rrlError, 1, nil)},
	}
	for _, tc := range tests {
		if (tc.k1 == tc.k2) != tc.same {
			t.Errorf("%s: same bucket %v, want %v", tc.name, tc.k1 == tc.k2, tc.same)
		}
	}
}
