package fleet

import (
	"net"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/corralhq/corral/hub"
	"github.com/corralhq/corral/internal/testkit"
)

// TestSetPolicySwitchesTheAnswer switches the origin record of a running
// fleet: a bad policy changes nothing, weighted answers one hub where
// multivalue answered all three, and the fleet's Stats say which policy
// is live.
func TestSetPolicySwitchesTheAnswer(t *testing.T) {
	f := startFleet(t, Config{Edges: -1})
	all := []string{"127.0.1.1", "127.0.1.2", "127.0.1.3"}
	if got := lookup(t, f); !slices.Equal(got, all) {
		t.Fatalf("multivalue answers %v, want %v", got, all)
	}
	for _, bad := range []string{"", "fastest", "cidr"} {
		if err := f.SetPolicy(bad); err == nil {
			t.Errorf("SetPolicy(%q): no error", bad)
		}
		if got := lookup(t, f); !slices.Equal(got, all) || f.Policy() != "multivalue" {
			t.Errorf("after SetPolicy(%q): answer %v, policy %s; want the multivalue answer kept", bad, got, f.Policy())
		}
	}
	if err := f.SetPolicy("weighted"); err != nil {
		t.Fatal(err)
	}
	if got := lookup(t, f); len(got) != 1 || !slices.Contains(all, got[0]) {
		t.Errorf("weighted answers %v, want one of %v", got, all)
	}
	if err := f.SetPolicy("weighted-subset"); err != nil {
		t.Fatal(err)
	}
	if got := lookup(t, f); len(got) != 2 {
		t.Errorf("weighted-subset answers %v, want 2 hubs", got)
	}
	if p := f.Stats().Policy; p != "weighted-subset" {
		t.Errorf("Stats().Policy = %q, want weighted-subset", p)
	}
}

// TestPauseHubHoldsHandshakes pauses the one hub of a fleet: a device's
// Hello reaches it but no Welcome comes back until the hub is resumed;
// sessions it already held keep going, and Stats names the state. A hub
// without admission cannot be paused.
func TestPauseHubHoldsHandshakes(t *testing.T) {
	f := startFleetWith(t, Config{Hubs: 2, Edges: -1}, Options{
		Hub: func(i int, c *hub.Config, _ *hub.Options) { c.Overload.Enabled = i == 0 },
	})
	if err := f.PauseHub(1); err == nil {
		t.Error("pausing a hub without admission: no error")
	}
	tok, err := f.Token("acme", []string{">"}, 0, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	url := "ws://" + net.JoinHostPort("127.0.1.1", strconv.Itoa(f.WSPort())) + "/v1/ws"
	held, _, err := dialDevice(url, tok)
	if err != nil {
		t.Fatal(err)
	}
	defer held.c.Close()
	if err := f.PauseHub(0); err != nil {
		t.Fatal(err)
	}
	if err := f.PauseHub(0); err == nil {
		t.Error("pausing a paused hub: no error")
	}
	if err := f.PauseHub(3); err == nil {
		t.Error("pausing hub 3 of 2: no error")
	}
	if s, _ := f.HubState(0); s != "paused" || f.Stats().Hubs[0].State != "paused" {
		t.Errorf("state %q, stats %q; want paused", s, f.Stats().Hubs[0].State)
	}
	hellos := func() float64 {
		return counterSum(t, f.Hubs()[0].Registry, "corral_hub_frames_received_total", "type", "hello")
	}
	type dialed struct {
		d   *device
		err error
	}
	done := make(chan dialed, 1)
	go func() {
		d, _, err := dialDevice(url, tok)
		done <- dialed{d, err}
	}()
	testkit.WaitFor(t, 20*time.Second, "the second Hello at the hub", func() bool { return hellos() >= 2 })
	select {
	case r := <-done:
		t.Fatalf("a paused hub answered a Hello (err %v)", r.err)
	default:
	}
	if n := f.Stats().Hubs[0].Sessions; n != 1 {
		t.Errorf("%d sessions admitted while paused, want the 1 held before", n)
	}
	if err := f.ResumeHub(0); err != nil {
		t.Fatal(err)
	}
	r := <-done
	if r.err != nil {
		t.Fatalf("after resume: %v", r.err)
	}
	r.d.c.Close()
	if err := f.ResumeHub(0); err == nil {
		t.Error("resuming a running hub: no error")
	}
	if s, _ := f.HubState(0); s != "up" {
		t.Errorf("state %q after resume, want up", s)
	}
}

// TestDropSessionsCutsAShare drops half of the edges' device sessions:
// half of them end, and a bad share cuts nothing.
func TestDropSessionsCutsAShare(t *testing.T) {
	f := startFleet(t, Config{Hubs: 1})
	tok, err := f.Token("acme", []string{">"}, 0, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	devs := dialDevices(t, f, 40, tok)
	edgeSessions := func() int {
		n := 0
		for _, e := range f.Edges() {
			n += e.Sessions()
		}
		return n
	}
	testkit.WaitFor(t, 20*time.Second, "40 sessions at the edges", func() bool { return edgeSessions() == 40 })
	for _, bad := range []float64{0, -0.5, 1.5} {
		if _, err := f.DropSessions(bad); err == nil {
			t.Errorf("DropSessions(%v): no error", bad)
		}
	}
	if n := edgeSessions(); n != 40 {
		t.Fatalf("%d sessions after bad drops, want 40", n)
	}
	n, err := f.DropSessions(0.5)
	if err != nil {
		t.Fatal(err)
	}
	if n < 19 || n > 21 {
		t.Errorf("dropped %d of 40 at 0.5", n)
	}
	testkit.WaitFor(t, 20*time.Second, "the dropped sessions gone from the edges", func() bool { return edgeSessions() == 40-n })
	cut := 0
	for _, d := range devs {
		_ = d.c.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
		if _, err := d.next(); err != nil && !isTimeout(err) {
			cut++
		}
	}
	if cut != n {
		t.Errorf("%d devices saw their connection end, want %d", cut, n)
	}
}

func isTimeout(err error) bool {
	ne, ok := err.(net.Error)
	return ok && ne.Timeout()
}
