package edge

import (
	"fmt"
	"net"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/corralhq/corral/internal/testkit"
)

// TestPickP2CSpreadsSessions: 3,000 sessions that stay land within 15 % of
// even over 3 origins (deterministic seed).
func TestPickP2CSpreadsSessions(t *testing.T) {
	s := newTestOrigins(t, OriginsConfig{Static: staticOrigins(3)}, OriginsOptions{})
	checkEven(t, counts(t, s, "", 3000, OriginSuccess), staticOrigins(3), 3000)
	for _, o := range s.List() {
		if o.Handshakes() != 0 || o.Sessions() < 900 {
			t.Errorf("%s: %d handshakes, %d sessions after 3000 sessions", o.Addr(), o.Handshakes(), o.Sessions())
		}
	}
}

// TestPickTiesAtRandom: with equal loads (every handshake ends at once, so
// all loads stay 0) each origin is picked about equally often. Breaking
// ties by the lower index would give the first origin 2/3 of the picks and
// the last none.
func TestPickTiesAtRandom(t *testing.T) {
	for _, n := range []int{2, 3, 5} {
		t.Run(fmt.Sprintf("%d origins", n), func(t *testing.T) {
			s := newTestOrigins(t, OriginsConfig{Static: staticOrigins(n)}, OriginsOptions{})
			checkEven(t, counts(t, s, "", 3000, OriginNeutral), staticOrigins(n), 3000)
		})
	}
}

// TestPickP2CAvoidsTheMostLoaded: of two drawn origins the less loaded
// wins, so the most loaded of three is never picked, and handshakes in
// flight count as load as sessions do.
func TestPickP2CAvoidsTheMostLoaded(t *testing.T) {
	for _, tc := range []struct {
		name string
		load func(o *Origin)
	}{
		{name: "sessions", load: func(o *Origin) { o.sessions.Add(10) }},
		{name: "handshakes in flight", load: func(o *Origin) { o.handshakes.Add(10) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newTestOrigins(t, OriginsConfig{Static: staticOrigins(3)}, OriginsOptions{})
			busy := s.List()[1]
			tc.load(busy)
			got := counts(t, s, "", 300, OriginNeutral)
			if got[busy.Addr()] != 0 {
				t.Errorf("the most loaded origin got %d of 300 picks; want 0 (%v)", got[busy.Addr()], got)
			}
		})
	}
}

// TestPickCountsHandshakes: Pick counts a handshake in flight at once, so
// concurrent picks see each other; HandshakeDone turns it into a session
// or ends it; SessionDone ends the session.
func TestPickCountsHandshakes(t *testing.T) {
	s := newTestOrigins(t, OriginsConfig{Static: staticOrigins(2)}, OriginsOptions{})
	a, _ := s.Pick("")
	b, _ := s.Pick("")
	if a == b {
		t.Fatalf("two picks in flight went to one origin of two (%s): the first was not counted", a.Addr())
	}
	if a.Handshakes() != 1 || a.Sessions() != 0 {
		t.Fatalf("after Pick: %d handshakes, %d sessions; want 1, 0", a.Handshakes(), a.Sessions())
	}
	a.HandshakeDone(OriginSuccess)
	b.HandshakeDone(OriginFailure)
	if a.Handshakes() != 0 || a.Sessions() != 1 || b.Load() != 0 {
		t.Fatalf("after HandshakeDone: a %d/%d, b load %d; want 0/1 and 0", a.Handshakes(), a.Sessions(), b.Load())
	}
	a.SessionDone(OriginNeutral)
	if a.Load() != 0 {
		t.Fatalf("after SessionDone: load %d", a.Load())
	}
}

// TestPickShardHands: with shard, a tenant's sessions stay on its hand,
// spread by p2c inside it; hands differ between tenants; a re-resolve that
// removes an origin outside a hand leaves the hand as it was.
// TestPickShardHands: 20 tenants' picks stay on their hands of 2 of 8
// origins, evenly inside a hand, and the hands differ. When an address
// leaves the answer, no hand moves: the hands that held it send every pick
// to their other member (a hand whose origins fail does not spread onto
// the rest of the fleet), the others are untouched; once shard.remember has
// passed since it left, those hands take one new member each.
func TestPickShardHands(t *testing.T) {
	clock := time.Unix(1_000_000, 0)
	cfg := OriginsConfig{Static: staticOrigins(8), Shard: OriginShardConfig{HandSize: 2, Secret: "000102030405060708090a0b0c0d0e0f", Remember: time.Minute}}
	s := newTestOrigins(t, cfg, OriginsOptions{Now: func() time.Time { return clock }})
	hands := map[string][]string{}
	for i := range 20 {
		tenant := fmt.Sprintf("tenant-%d", i)
		got := counts(t, s, tenant, 400, OriginNeutral)
		if len(got) != 2 {
			t.Fatalf("%s's 400 picks went to %v; want its hand of 2", tenant, got)
		}
		for a, c := range got {
			hands[tenant] = append(hands[tenant], a)
			if c < 170 || c > 230 {
				t.Errorf("%s: %s got %d of 400; want 200 +-15 %%", tenant, a, c)
			}
		}
		slices.Sort(hands[tenant])
	}
	distinct := map[string]bool{}
	for _, h := range hands {
		distinct[fmt.Sprint(h)] = true
	}
	if len(distinct) < 5 {
		t.Errorf("20 tenants share %d hands; want them spread", len(distinct))
	}

	// Drop an address of tenant-0's hand.
	gone := hands["tenant-0"][0]
	var keep []string
	for _, a := range staticOrigins(8) {
		if a != gone {
			keep = append(keep, a)
		}
	}
	if err := s.apply(mustAddrPorts(t, keep)); err != nil {
		t.Fatal(err)
	}
	held := 0
	for tenant, h := range hands {
		now := mapKeys(counts(t, s, tenant, 50, OriginNeutral))
		switch {
		case !slices.Contains(h, gone) && !slices.Equal(now, h):
			t.Errorf("%s's hand moved from %v to %v though %s was not in it", tenant, h, now, gone)
		case slices.Contains(h, gone):
			held++
			if !slices.Equal(now, []string{otherOf(h, gone)}) {
				t.Errorf("%s's hand %v lost %s and its picks went to %v; want all on %s", tenant, h, gone, now, otherOf(h, gone))
			}
		}
	}
	t.Logf("%d of %d hands held the removed address", held, len(hands))

	// Within shard.remember a re-resolve keeps the hands; past it they
	// re-form over the answer.
	clock = clock.Add(59 * time.Second)
	if err := s.apply(mustAddrPorts(t, keep)); err != nil {
		t.Fatal(err)
	}
	if now := mapKeys(counts(t, s, "tenant-0", 50, OriginNeutral)); !slices.Equal(now, []string{otherOf(hands["tenant-0"], gone)}) {
		t.Errorf("59 s after %s left, tenant-0's picks went to %v; want its hand kept", gone, now)
	}
	clock = clock.Add(2 * time.Second)
	if err := s.apply(mustAddrPorts(t, keep)); err != nil {
		t.Fatal(err)
	}
	for tenant, h := range hands {
		now := mapKeys(counts(t, s, tenant, 50, OriginNeutral))
		switch {
		case !slices.Contains(h, gone) && !slices.Equal(now, h):
			t.Errorf("%s's hand moved from %v to %v when %s was forgotten", tenant, h, now, gone)
		case slices.Contains(h, gone) && (len(now) != 2 || !slices.Contains(now, otherOf(h, gone)) || slices.Contains(now, gone)):
			t.Errorf("%s's hand %v became %v once %s was forgotten; want one member replaced", tenant, h, now, gone)
		}
	}
}

func otherOf(h []string, x string) string {
	for _, a := range h {
		if a != x {
			return a
		}
	}
	return ""
}

func mapKeys(m map[string]int) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// TestPickHealthCheck: an origin whose active health check fails gets no
// new sessions until it passes again.
func TestPickHealthCheck(t *testing.T) {
	var lns []net.Listener
	var addrs []string
	for range 3 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ln.Close() })
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				c.Close()
			}
		}()
		lns = append(lns, ln)
		addrs = append(addrs, ln.Addr().String())
	}
	reg := prometheus.NewRegistry()
	s := newTestOrigins(t, OriginsConfig{Static: addrs, HealthCheck: OriginHealthConfig{Kind: "tcp", Interval: 20 * time.Millisecond, FailureThreshold: 1}},
		OriginsOptions{Registerer: reg})
	runOrigins(t, s)
	lns[0].Close()
	dead := addrs[0]
	testkit.WaitFor(t, 10*time.Second, "the dead origin to fail its check", func() bool {
		return !s.List()[0].usable(time.Now().UnixNano())
	})
	got := counts(t, s, "", 300, OriginNeutral)
	if got[dead] != 0 {
		t.Errorf("the origin failing its health check got %d of 300 picks", got[dead])
	}
}

// TestPickFailsOpen: when no origin is usable the pick chooses among all
// of them rather than refusing, and counts it.
func TestPickFailsOpen(t *testing.T) {
	reg := prometheus.NewRegistry()
	clock := testkit.NewClock(time.Unix(1000, 0))
	s := newTestOrigins(t, OriginsConfig{Static: staticOrigins(2), Outlier: OutlierConfig{MaxEjectionPercent: 100, ConsecutiveFailures: 1}},
		OriginsOptions{Registerer: reg, Now: clock.Now})
	for _, o := range s.List() {
		o.Report(OriginFailure)
	}
	for _, o := range s.List() {
		if !o.Ejected() {
			t.Fatalf("%s not ejected at max_ejection_percent 100", o.Addr())
		}
	}
	got := counts(t, s, "", 100, OriginNeutral)
	if len(got) != 2 {
		t.Errorf("fail-open picks went to %v; want both", got)
	}
	if v := counterValue(t, reg, "corral_edge_origin_fail_open_total"); v != 100 {
		t.Errorf("fail-open count %v; want 100", v)
	}
}

// TestPickDoesNotAllocate: Pick and the accounting allocate nothing, in
// every mode.
func TestPickDoesNotAllocate(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  OriginsConfig
	}{
		{name: "p2c", cfg: OriginsConfig{Static: staticOrigins(3)}},
		{name: "first-address", cfg: OriginsConfig{Static: staticOrigins(3), Pick: PickFirstAddress}},
		{name: "shard", cfg: OriginsConfig{Static: staticOrigins(20), Shard: OriginShardConfig{HandSize: 4, Secret: "000102030405060708090a0b0c0d0e0f"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := NewOrigins(tc.cfg, OriginsOptions{})
			if err != nil {
				t.Fatal(err)
			}
			// One ejected origin makes p2c walk the usable ones.
			s.List()[0].ejectedUntil.Store(time.Now().Add(time.Hour).UnixNano())
			allocs := testing.AllocsPerRun(1000, func() {
				o, err := s.Pick("tenant-7")
				if err != nil {
					panic(err)
				}
				o.HandshakeDone(OriginSuccess)
				o.SessionDone(OriginFailure)
			})
			if allocs != 0 {
				t.Errorf("%v allocations per pick; want 0", allocs)
			}
		})
	}
}

func BenchmarkPick(b *testing.B) {
	for _, tc := range []struct {
		name string
		cfg  OriginsConfig
	}{
		{name: "p2c/3", cfg: OriginsConfig{Static: staticOrigins(3)}},
		{name: "p2c/50", cfg: OriginsConfig{Static: staticOrigins(50)}},
		{name: "first-address/3", cfg: OriginsConfig{Static: staticOrigins(3), Pick: PickFirstAddress}},
		{name: "shard/50/hand4", cfg: OriginsConfig{Static: staticOrigins(50), Shard: OriginShardConfig{HandSize: 4, Secret: "000102030405060708090a0b0c0d0e0f"}}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			s, err := NewOrigins(tc.cfg, OriginsOptions{})
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					o, _ := s.Pick("tenant-7")
					o.HandshakeDone(OriginNeutral)
				}
			})
		})
	}
}

func mustAddrPorts(t testing.TB, addrs []string) []netip.AddrPort {
	t.Helper()
	out := make([]netip.AddrPort, len(addrs))
	for i, a := range addrs {
		ap, err := netip.ParseAddrPort(a)
		if err != nil {
			t.Fatal(err)
		}
		out[i] = ap
	}
	return out
}
