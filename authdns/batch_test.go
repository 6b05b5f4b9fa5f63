package authdns

import (
	"io"
	"net/netip"
	"testing"

	"github.com/miekg/dns"
)

// TestBatchRecoversAndGoesOn answers a batch of datagrams in which two
// panic: each of those gets SERVFAIL, the others their answers (a short
// one none), as if each had been answered alone, and the batch does not
// stop at a panic.
func TestBatchRecoversAndGoesOn(t *testing.T) {
	s, err := New(decodeConfig(t, testZone), Options{Logger: testLogger(io.Discard)})
	if err != nil {
		t.Fatal(err)
	}
	s.queryHook = panicOn("boom")
	w := newWorker(s, &stats{}, 1)
	static := mkQuery("static.corral.test", dns.TypeA, nil)
	boom := mkQuery("boom.corral.test", dns.TypeA, nil)
	reqs := [][]byte{static, boom, static[:5], boom, static}
	want := []int{dns.RcodeSuccess, dns.RcodeServerFailure, -1, dns.RcodeServerFailure, dns.RcodeSuccess}
	clients := make([]netip.Addr, len(reqs))
	for i := range clients {
		clients[i] = loopback
	}
	const slot = 1024
	out := make([]byte, len(reqs)*slot)
	resps := make([][]byte, len(reqs))
	w.answerBatch(reqs, clients, out, slot, resps)
	for i, resp := range resps {
		if want[i] < 0 {
			if resp != nil {
				t.Errorf("datagram %d (short): got a response, want none", i)
			}
			continue
		}
		if resp == nil {
			t.Errorf("datagram %d: no response, want %s", i, dns.RcodeToString[want[i]])
			continue
		}
		var m dns.Msg
		if err := m.Unpack(resp); err != nil {
			t.Fatalf("datagram %d: %v (response %x)", i, err, resp)
		}
		if m.Rcode != want[i] || m.Rcode == dns.RcodeSuccess && len(m.Answer) != 2 {
			t.Errorf("datagram %d: got %s with %d answers, want %s", i, dns.RcodeToString[m.Rcode], len(m.Answer), dns.RcodeToString[want[i]])
		}
	}
	if got := w.st.panics.Load(); got != 2 {
		t.Errorf("%d panics counted, want 2", got)
	}
}

// TestBatchAllocs pins the allocations of a batch of queries answered
// through answerBatch, as the UDP loop does: none.
func TestBatchAllocs(t *testing.T) {
	s, err := New(decodeConfig(t, allocsZone()), Options{})
	if err != nil {
		t.Fatal(err)
	}
	w := newWorker(s, &stats{}, 1)
	edns := func(m *dns.Msg) { m.SetEdns0(1232, false) }
	reqs := [][]byte{
		mkQuery("static.corral.test", dns.TypeA, edns),
		mkQuery("checked.other.test", dns.TypeA, edns),
		mkQuery("hop8-1.corral.test", dns.TypeA, nil),
		mkQuery("nope.corral.test", dns.TypeA, nil),
	}
	clients := make([]netip.Addr, len(reqs))
	for i := range clients {
		clients[i] = loopback
	}
	const slot = 4096 + 512
	out := make([]byte, len(reqs)*slot)
	resps := make([][]byte, len(reqs))
	if got := testing.AllocsPerRun(200, func() { w.answerBatch(reqs, clients, out, slot, resps) }); got != 0 {
		t.Errorf("%v allocations per batch, want 0", got)
	}
	for i, resp := range resps {
		if resp == nil {
			t.Errorf("datagram %d: no response", i)
		}
	}
}
