package client_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/corralhq/corral/client"
	"github.com/corralhq/corral/hub"
	"github.com/corralhq/corral/internal/testkit"
	"github.com/corralhq/corral/limit"
	"github.com/corralhq/corral/wire"
)

// herdPolicy is a hub overload policy for a herd: while shedding it severs
// every open P2 session (1001, no hint) and turns every new one away with
// 1013 and the hint; otherwise it admits everything.
type herdPolicy struct {
	hint     time.Duration
	shedding atomic.Bool
	rejected atomic.Int64
}

func (p *herdPolicy) AdmitAt(limit.Priority, time.Time) limit.Decision {
	if p.shedding.Load() {
		p.rejected.Add(1)
		return limit.Decision{Stage: limit.StageSeverP2, RetryAfter: p.hint}
	}
	return limit.Decision{Admit: true}
}

func (p *herdPolicy) SeverQuotaAt(open limit.Counts, _ time.Time) limit.Counts {
	var q limit.Counts
	if p.shedding.Load() {
		q[limit.P2] = open[limit.P2]
	}
	return q
}

func (p *herdPolicy) RetryWindowAt(limit.Priority, time.Time) limit.Retry { return limit.Retry{} }

// herdClient is what the test keeps of one client of the herd: the start
// of each of its attempt rounds (the resolver is asked once per round, and
// the name has one address, so round k is its k-th connecting event) and
// its events.
type herdClient struct {
	c       *client.Client
	mu      sync.Mutex
	rounds  []time.Time
	events  []client.Event
	got1013 bool
}

// TestHerdSpreadsAboveAHint: 1,000 clients on a real hub, which then sheds
// them all and turns their reconnections away with 1013 and a 2 s retry
// hint. Each client's next attempt comes no sooner than the hint after the
// attempt that was turned away, and the delays the clients chose (from the
// refused attempt to the announced next one) spread over [2 s, 4 s): no
// 100 ms bucket holds more than 100 of them (full jitter above the hint
// puts 50 in each on average; with the seeds used the fullest holds about
// 60; lock-step on the hint puts all 1,000 in one), and they fall in at
// least 15 buckets (the window has 20; the time an attempt takes to be
// turned away adds to the delay, which only spreads them further).
func TestHerdSpreadsAboveAHint(t *testing.T) {
	const clients, hint, bucket = 1000, 2 * time.Second, 100 * time.Millisecond
	policy := &herdPolicy{hint: hint}
	h := startHubWith(t, "127.0.0.1:0", nil, hub.Options{Overload: policy})
	_, port, _ := net.SplitHostPort(h.Addr().String())
	tok := newToken(t, []string{">"}, time.Now().Add(time.Hour))

	herd := make([]*herdClient, clients)
	var wg sync.WaitGroup
	var failed atomic.Value
	work := make(chan int, clients)
	for i := range clients {
		work <- i
	}
	close(work)
	for range 16 {
		wg.Go(func() {
			for i := range work {
				hc := &herdClient{}
				cfg := client.WithRetryRand(client.Config{
					Addrs: []string{"ws://herd.corral.test:" + port}, Token: tok,
					ReconnectMin: time.Millisecond, ReconnectMax: 20 * time.Millisecond,
					DialTimeout: 20 * time.Second,
					Resolve: func(context.Context, string) ([]netip.Addr, error) {
						hc.mu.Lock()
						hc.rounds = append(hc.rounds, time.Now())
						hc.mu.Unlock()
						return []netip.Addr{netip.MustParseAddr("127.0.0.1")}, nil
					},
				}, rand.New(rand.NewPCG(uint64(i), 13)))
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				c, err := client.Dial(ctx, cfg)
				cancel()
				if err != nil {
					failed.Store(err)
					return
				}
				hc.c = c
				herd[i] = hc
			}
		})
	}
	wg.Wait()
	if err := failed.Load(); err != nil {
		t.Fatalf("dial: %v", err)
	}
	var turnedAway atomic.Int64
	var readers sync.WaitGroup
	for _, hc := range herd {
		readers.Go(func() {
			for e := range hc.c.Events() {
				hc.mu.Lock()
				hc.events = append(hc.events, e)
				if e.Kind == client.EventDisconnected && e.Close.Code == wire.CloseTryAgainLater && !hc.got1013 {
					hc.got1013 = true
					turnedAway.Add(1)
				}
				hc.mu.Unlock()
			}
		})
	}
	defer func() {
		for _, hc := range herd {
			_ = hc.c.Close()
		}
		readers.Wait()
	}()
	testkit.WaitFor(t, 20*time.Second, "every client's session", func() bool { return h.Sessions() == clients })

	policy.shedding.Store(true)
	testkit.WaitFor(t, 60*time.Second, "every client turned away with 1013", func() bool { return turnedAway.Load() == clients })
	policy.shedding.Store(false)
	// Back means a session welcomed after the 1013 (the hub's own count
	// still holds connections lingering in their close).
	testkit.WaitFor(t, 60*time.Second, "every client back", func() bool {
		for _, hc := range herd {
			hc.mu.Lock()
			back, after := false, false
			for _, e := range hc.events {
				switch {
				case e.Kind == client.EventDisconnected && e.Close.Code == wire.CloseTryAgainLater:
					after = true
				case after && e.Kind == client.EventConnected:
					back = true
				}
			}
			hc.mu.Unlock()
			if !back {
				return false
			}
		}
		return true
	})

	buckets := map[time.Duration]int{}
	for i, hc := range herd {
		hc.mu.Lock()
		rounds, events := hc.rounds, hc.events
		hc.mu.Unlock()
		// k counts the connecting events up to the first 1013: the
		// refused attempt was round k (1-based), the next one round k+1.
		k, retryAt := 0, time.Time{}
		for _, e := range events {
			if e.Kind == client.EventConnecting {
				k++
			}
			if e.Kind == client.EventDisconnected && e.Close.Code == wire.CloseTryAgainLater {
				if e.Close.RetryAfter != hint {
					t.Fatalf("client %d: 1013 with hint %v, want %v", i, e.Close.RetryAfter, hint)
				}
				retryAt = e.RetryAt
				break
			}
		}
		if retryAt.IsZero() || k == 0 || len(rounds) <= k {
			t.Fatalf("client %d: no attempt after its 1013 (rounds %d, refused round %d, events %v)", i, len(rounds), k, events)
		}
		refused, again := rounds[k-1], rounds[k]
		if again.Sub(refused) < hint {
			t.Fatalf("client %d came back %v after the attempt turned away with a %v hint", i, again.Sub(refused), hint)
		}
		if again.Before(retryAt) {
			t.Fatalf("client %d came back %v before the time it announced", i, retryAt.Sub(again))
		}
		buckets[retryAt.Sub(refused)/bucket]++
	}
	most := 0
	for _, n := range buckets {
		most = max(most, n)
	}
	t.Logf("chosen delays in %d buckets of %v, at most %d clients in one", len(buckets), bucket, most)
	if most > 100 {
		t.Errorf("%d of %d clients chose delays in one %v bucket: lock-step, want at most 100", most, clients, bucket)
	}
	if len(buckets) < 15 {
		t.Errorf("the delays fall in %d buckets of %v, want them spread over at least 15 (the window [%v, %v) has 20)", len(buckets), bucket, hint, 2*hint)
	}
	if n := policy.rejected.Load(); n < clients {
		t.Errorf("the hub turned away %d attempts, want at least %d", n, clients)
	}
}

// TestRetryAfterOfARefusedUpgrade: a server (here a proxy in front of the
// hub) that answers the WebSocket upgrade with 503 and Retry-After says
// when to come back: Dial's error is a 1013 close with that hint, and a
// reconnection turned away so waits at least that long before its next
// attempt.
func TestRetryAfterOfARefusedUpgrade(t *testing.T) {
	h := startHub(t, "127.0.0.1:0", nil)
	p := startProxy(t, h.Addr().String())
	tok := newToken(t, []string{">"}, time.Now().Add(time.Hour))
	refusal := "HTTP/1.1 503 Service Unavailable\r\nRetry-After: 2\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	p.answer.Store(&refusal)
	_, err := client.Dial(ctx, client.Config{Addrs: []string{p.url()}, Token: tok})
	var cl wire.Close
	if !errors.As(err, &cl) || cl.Code != wire.CloseTryAgainLater || cl.RetryAfter != 2*time.Second {
		t.Fatalf("Dial through a 503: %v, want 1013 with a 2s hint", err)
	}

	p.answer.Store(nil)
	c, err := client.Dial(ctx, client.Config{Addrs: []string{p.url()}, Token: tok, ReconnectMin: time.Millisecond, ReconnectMax: 5 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	p.answer.Store(&refusal)
	cut := time.Now()
	p.cut()
	var refused client.Event
	for refused.Kind == 0 {
		e := next(t, c, client.EventDisconnected, nil)
		if e.Close.Code == wire.CloseTryAgainLater {
			refused = e
		}
	}
	if refused.Close.RetryAfter != 2*time.Second || refused.RetryAt.Before(cut.Add(2*time.Second)) {
		t.Fatalf("refused reconnect: %v, next attempt %v after the cut; want a 2s hint and at least 2s", refused.Close, refused.RetryAt.Sub(cut))
	}
	p.answer.Store(nil)
	if e := next(t, c, client.EventConnected, nil); time.Since(cut) < 2*time.Second {
		t.Fatalf("reconnected %v after the cut (%v), before the 2s the 503 asked", time.Since(cut), e)
	}
}
