package edge

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/corralhq/corral/hub"
	"github.com/corralhq/corral/internal/testkit"
)

// welcomedOn opens a session through te and returns the node id of the
// hub that welcomed it (the Welcome's "edge/hub"); the session stays open
// until the test ends. Anything but a Welcome fails the test.
func welcomedOn(t *testing.T, te *testEdge) string {
	t.Helper()
	r := dialRawGRPC(t, te)
	r.send(t, helloFrame(token(t, tokenOpts{})))
	f, err := r.stream.Recv()
	if err != nil || f.GetWelcome() == nil {
		t.Fatalf("no Welcome: %v %v", f, err)
	}
	_, node, _ := strings.Cut(f.GetWelcome().GetNodeId(), "/")
	return node
}

// TestDeadOriginsNotPicked: two of six hubs die behind an edge with the
// default outlier settings (5 failures, max_ejection_percent 10: one
// ejection of six). Their transports are down, so every new session
// lands on a live hub at its first attempt: no handshake is tried on a
// dead one (their failure counts stand still), none is refused. Before,
// the second dead hub stayed usable beyond the ejection cap and p2c,
// seeing it without load, sent it a share of the sessions. A dead hub
// started again on its address is found by the re-dial and gets new
// sessions.
func TestDeadOriginsNotPicked(t *testing.T) {
	hubs := make([]*testHub, 6)
	for i := range hubs {
		hubs[i] = startHub(t, func(c *hub.Config) { c.NodeID = fmt.Sprintf("hub-%d", i+1) })
	}
	te := startEdge(t, nil, hubs...)
	for range 24 { // connections to the hubs, READY
		welcomedOn(t, te)
	}
	dead := []int{1, 4}
	var deadNodes []string
	var deadOrigins []*Origin
	for _, i := range dead {
		deadNodes = append(deadNodes, fmt.Sprintf("hub-%d", i+1))
		deadOrigins = append(deadOrigins, te.Origins().Lookup(hubs[i].GRPCAddr().String()))
		hubs[i].Kill()
	}
	testkit.WaitFor(t, 20*time.Second, "both dead hubs' transports down", func() bool {
		return te.metric("corral_edge_origins_down") == 2
	})
	failures := make([]int32, len(deadOrigins))
	for i, o := range deadOrigins {
		failures[i] = o.failures.Load()
	}
	for n := range 60 {
		if node := welcomedOn(t, te); slices.Contains(deadNodes, node) {
			t.Fatalf("session %d welcomed by %s, a dead hub", n, node)
		}
	}
	for i, o := range deadOrigins {
		if f := o.failures.Load(); f != failures[i] {
			t.Errorf("%s: %d failures after its transport was down, %d before: new sessions were tried on it", o.Addr(), f, failures[i])
		}
		if o.Load() != 0 {
			t.Errorf("%s: load %d", o.Addr(), o.Load())
		}
	}
	if v := te.metric("corral_edge_origin_picks_all_down_total"); v != 0 {
		t.Errorf("%v picks refused with live hubs left", v)
	}

	addr := hubs[dead[0]].GRPCAddr().String()
	startHub(t, func(c *hub.Config) { c.NodeID, c.GRPCListen = deadNodes[0], addr })
	testkit.WaitFor(t, 30*time.Second, "the restarted hub's transport back", func() bool {
		return !deadOrigins[0].TransportDown()
	})
	back := 0
	for range 20 {
		switch welcomedOn(t, te) {
		case deadNodes[0]:
			back++
		case deadNodes[1]:
			t.Fatal("a session welcomed by the hub still dead")
		}
	}
	if back == 0 {
		t.Errorf("none of 20 new sessions went to the restarted hub (no load, transport back)")
	}
}
