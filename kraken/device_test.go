package kraken

import (
	"testing"
	"time"

	"github.com/corralhq/corral/backoff"
	"github.com/corralhq/corral/wire"
	"github.com/corralhq/corral/wire/corralv1"
)

// quietConn is a connection that does nothing: the device's rules alone
// are under test.
type quietConn struct{ cuts int }

func (c *quietConn) sendFrame(*corralv1.ClientFrame) error { return nil }
func (c *quietConn) cut()                                  { c.cuts++ }
func (c *quietConn) close(wire.CloseCode)                  {}

// heldDevice returns a device holding a session on c, retrying after a
// constant 2 s, whose runner records each delay it schedules (never
// firing it) in delays.
func heldDevice(t *testing.T, c conn, delays *[]time.Duration) *device {
	t.Helper()
	r := &runner{rec: testRecorder(time.Now().Add(-time.Second)), nodes: map[string]*originCount{}}
	r.latest.Store(-1)
	r.afterFunc = func(d time.Duration, f func()) *time.Timer {
		*delays = append(*delays, d)
		return time.AfterFunc(time.Hour, f)
	}
	t.Cleanup(func() {
		for _, d := range r.devices {
			d.timer.Stop()
		}
	})
	d := &device{r: r, storm: -1, pending: -1, state: stUp, conn: c}
	b, err := backoff.NewBackoff(backoff.Config{Policy: "none", Base: 2 * time.Second}, &d.rnd)
	if err != nil {
		t.Fatal(err)
	}
	d.retry = *b
	r.devices = append(r.devices, d)
	r.held.Add(1)
	return d
}

// TestDropCountsFromTheCut: a session kraken cut is down from the cut, not
// from the moment the event loop got round to its close (1-2 s later under
// a drop of 50,000). Its first retry is its backoff delay after the cut,
// and its time back counts from the cut. A close the server sent is down
// when it is read, and its retry is the whole delay after that.
func TestDropCountsFromTheCut(t *testing.T) {
	const lag = 1500 * time.Millisecond
	var delays []time.Duration
	c := &quietConn{}
	d := heldDevice(t, c, &delays)
	if !d.drop(0) || c.cuts != 1 {
		t.Fatalf("drop of a held session: cuts %d, want 1", c.cuts)
	}
	cut := time.Now().Add(-lag) // the loop saw the cut lag after it
	d.cutAt = cut
	d.ended(c, "cut", wire.Close{Code: closeAbnormal})
	if len(delays) != 1 || delays[0] > 2*time.Second-lag+50*time.Millisecond || delays[0] < 2*time.Second-lag-50*time.Millisecond {
		t.Fatalf("first retry in %v after the close was handled %v after the cut: want 2s - %v", delays, lag, lag)
	}
	if !d.downAt.Equal(cut) {
		t.Errorf("down at %v, want the cut at %v", d.downAt, cut)
	}
	// Back at once: the figure counts from the cut.
	d.mu.Lock()
	d.state, d.conn = stHello, c
	d.mu.Unlock()
	d.welcome(c, &corralv1.Welcome{NodeId: "n"}, time.Now())
	st := d.r.rec.res.Storms[0]
	if st.Back != 1 || st.BackAfter.Quantile(50) < lag {
		t.Errorf("back %d, back after %v: want 1, at least %v (from the cut)", st.Back, st.BackAfter.Quantile(50), lag)
	}

	// A close the server sent: the whole delay from when it was read.
	delays = delays[:0]
	s := &quietConn{}
	d2 := heldDevice(t, s, &delays)
	d2.r.latest.Store(0)
	d2.ended(s, "", wire.Close{Code: wire.CloseGoingAway})
	if len(delays) != 1 || delays[0] != 2*time.Second {
		t.Errorf("retry after a server's close in %v, want 2s", delays)
	}
}

// TestWelcomeSetsTheEnvelope: as package client does, a Welcome that
// advertises a reconnect base and cap replaces the scenario's (policy none
// waits its base: the server's 700 ms, not the scenario's 2 s), and a later
// Welcome without them brings the scenario's schedule back.
func TestWelcomeSetsTheEnvelope(t *testing.T) {
	var delays []time.Duration
	c := &quietConn{}
	d := heldDevice(t, c, &delays)
	d.r.backoff = backoff.Config{Policy: "none", Base: 2 * time.Second, Cap: 2 * time.Second}
	lose := func(hints *corralv1.ServerHints) time.Duration {
		t.Helper()
		d.mu.Lock()
		d.state, d.conn = stHello, c
		d.mu.Unlock()
		d.welcome(c, &corralv1.Welcome{NodeId: "n", Hints: hints}, time.Now())
		delays = delays[:0]
		d.ended(c, "", wire.Close{Code: wire.CloseGoingAway})
		if len(delays) != 1 {
			t.Fatalf("delays %v after a close, want one", delays)
		}
		return delays[0]
	}
	if got := lose(&corralv1.ServerHints{ReconnectBaseMs: 700, ReconnectCapMs: 700}); got != 700*time.Millisecond {
		t.Errorf("after a Welcome with base 700 ms: retry in %v, want 700ms", got)
	}
	if got := lose(&corralv1.ServerHints{PingIntervalMs: 25000}); got != 2*time.Second {
		t.Errorf("after a Welcome without an envelope: retry in %v, want the scenario's 2s", got)
	}
}
