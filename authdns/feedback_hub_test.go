package authdns_test

import (
	"context"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/miekg/dns"

	"github.com/corralhq/corral/authdns"
	"github.com/corralhq/corral/client"
	"github.com/corralhq/corral/hub"
	"github.com/corralhq/corral/hub/auth"
	"github.com/corralhq/corral/internal/natsutil"
	"github.com/corralhq/corral/internal/testkit"
	"github.com/corralhq/corral/limit"
)

const feedbackSecret = "feedback-secret-0123456789"

// feedbackNATS skips the test when host, a second loopback address of the
// hubs, cannot be bound, and starts the NATS server the hubs and authdns
// share, shut down at the end (after a test's own Shutdown, a no-op).
func feedbackNATS(t *testing.T, host string) *natsutil.Embedded {
	t.Helper()
	if ln, err := net.Listen("tcp", host+":0"); err != nil {
		t.Skipf("no loopback address %s: %v", host, err)
	} else {
		_ = ln.Close()
	}
	ns, err := natsutil.StartServer(natsutil.Config{Listen: "127.0.0.1:0"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ns.Shutdown)
	return ns
}

// feedbackHub runs a hub on host (a loopback address of its own, so that an
// A record tells the two hubs apart) that publishes its load every 50 ms
// on the NATS at url. Its Shedder's latency target is 1 ns: every admitted
// handshake is over it, so a stream of new sessions drives the real
// shedding stage up to lifeboat, and the stage falls back, one stage per
// fall dwell, once the sessions stop coming.
func feedbackHub(t *testing.T, host, url string) *hub.Hub {
	t.Helper()
	return startFeedbackHub(t, host, url, func(cfg *hub.Config) {
		cfg.Overload.Enabled, cfg.Overload.LatencyStages = true, true
		cfg.Overload.Shedder = limit.ShedderConfig{Target: time.Nanosecond, MinSamples: 1, EvalInterval: 20 * time.Millisecond,
			RiseDwell: time.Nanosecond, FallDwell: 100 * time.Millisecond, MaxFallDwell: 200 * time.Millisecond}
	})
}

// startFeedbackHub runs a hub on host that publishes its load every 50 ms
// on the NATS at url, with edit's changes to its config.
func startFeedbackHub(t *testing.T, host, url string, edit func(*hub.Config)) *hub.Hub {
	t.Helper()
	cfg := hub.DefaultConfig()
	cfg.Listen, cfg.GRPCListen, cfg.Admin.Addr, cfg.NodeID = host+":0", "", "", "hub-"+host
	cfg.NATS.URL = url
	cfg.Auth = auth.Config{Keys: []auth.KeyConfig{{Algorithm: "HS256", Secret: feedbackSecret}}}
	cfg.Drain.Deadline = time.Second
	cfg.Load = hub.LoadConfig{Enabled: true, Interval: 50 * time.Millisecond}
	edit(&cfg)
	h, err := hub.New(cfg, hub.Options{})
	if err != nil {
		t.Fatal(err)
	}
	errc := make(chan error, 1)
	go func() { errc <- h.Run(context.Background()) }()
	<-h.Started()
	if h.Ready() != nil {
		t.Fatalf("hub %s did not start: %v", host, <-errc)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = h.Shutdown(ctx)
	})
	return h
}

// load dials P0 sessions to h, one after the other, closing each, until
// stop is closed.
func load(t *testing.T, h *hub.Hub, stop <-chan struct{}, wg *sync.WaitGroup) {
	tok, err := feedbackToken()
	if err != nil {
		t.Error(err)
		return
	}
	addr := "ws://" + h.Addr().String() + "/v1/ws"
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			c, err := client.Dial(ctx, client.Config{Addrs: []string{addr}, Token: tok, Priority: client.PriorityP0})
			cancel()
			if err == nil {
				_ = c.Close()
			} else {
				time.Sleep(5 * time.Millisecond) // refused in lifeboat: try again
			}
		}
	})
}

// feedbackToken returns a session token of the feedback hubs' key.
func feedbackToken() (string, error) {
	p := 0
	return jwt.NewWithClaims(jwt.SigningMethodHS256, auth.Claims{Tenant: "acme", Channels: []string{">"}, Publish: []string{">"}, MaxPriority: &p,
		RegisteredClaims: jwt.RegisteredClaims{ExpiresAt: jwt.NewNumericDate(time.Now().Add(time.Hour))}}).SignedString([]byte(feedbackSecret))
}

// share asks authdns n times for the weighted name with a DNS client and
// returns the fraction of answers that are host.
func share(t *testing.T, dnsAddr, host string, n int) float64 {
	t.Helper()
	c := &dns.Client{Net: "udp", Timeout: 5 * time.Second}
	hits := 0
	for range n {
		m := new(dns.Msg)
		m.SetQuestion("origin.corral.test.", dns.TypeA)
		r, _, err := c.Exchange(m, dnsAddr)
		if err != nil {
			t.Fatalf("query: %v", err)
		}
		if len(r.Answer) != 1 {
			t.Fatalf("weighted answer with %d records: %v", len(r.Answer), r)
		}
		if r.Answer[0].(*dns.A).A.String() == host {
			hits++
		}
	}
	return float64(hits) / float64(n)
}

// effective returns the effective weight of the record of value v.
func effective(s *authdns.Server, v string) float64 {
	for _, w := range s.FeedbackWeights() {
		if w.Value == v {
			return w.Effective
		}
	}
	return -1
}

// feedbackDNS runs authdns with load feedback from the NATS at url every
// 50 ms (timeout 1 s, default bounds) and the weighted name
// origin.corral.test of the two hosts, weight 1 each, until the test
// ends; it returns the server and its DNS address.
func feedbackDNS(t *testing.T, url, hostA, hostB string) (*authdns.Server, string) {
	t.Helper()
	cfg, err := authdns.ParseConfig("dns.yaml", fmt.Appendf(nil, `
listen: 127.0.0.1:0
rrl: {enabled: false}
feedback: {nats: %q, interval: 50ms, timeout: 1s, floor: 0.1, ceiling: 2, max_step: 0.25, hysteresis: 0.05}
zones:
  - origin: corral.test
    soa: {mname: ns1.corral.test, rname: hostmaster.corral.test, serial: 1}
    ns: [ns1.corral.test]
    records:
      - {name: ns1, type: A, values: [127.0.0.1]}
      - name: origin
        type: A
        policy: weighted
        values: [{value: %s, weight: 1}, {value: %s, weight: 1}]
`, url, hostA, hostB))
	if err != nil {
		t.Fatal(err)
	}
	srv, err := authdns.New(cfg, authdns.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	<-srv.Started()
	return srv, srv.Addr().String()
}

// TestFeedbackShiftsWeightedAnswers is issue 17's test: two hubs and
// authdns over an embedded NATS. While one hub is loaded (its Shedder in
// its upper stages, through real handshakes), the weighted answers shift
// away from it; they shift back when the load ends; with NATS stopped
// while it is loaded, the configured weights return after the timeout.
func TestFeedbackShiftsWeightedAnswers(t *testing.T) {
	const hostA, hostB = "127.0.0.2", "127.0.0.3"
	ns := feedbackNATS(t, hostA)
	url := ns.Server.ClientURL()
	hubA := feedbackHub(t, hostA, url)
	feedbackHub(t, hostB, url)

	srv, dnsAddr := feedbackDNS(t, url, hostA, hostB)

	// Both idle: both at the ceiling, equal shares.
	testkit.WaitFor(t, 30*time.Second, "both origins at the ceiling", func() bool {
		return effective(srv, hostA) == 2 && effective(srv, hostB) == 2
	})
	if s := share(t, dnsAddr, hostA, 400); s < 0.3 || s > 0.7 {
		t.Fatalf("both idle: %s has %.2f of the answers, want about half", hostA, s)
	}

	var wg sync.WaitGroup
	stop := make(chan struct{})
	load(t, hubA, stop, &wg)
	testkit.WaitFor(t, 30*time.Second, "the loaded hub at the floor", func() bool {
		return effective(srv, hostA) <= 0.1+1e-9 && effective(srv, hostB) == 2
	})
	if s := share(t, dnsAddr, hostA, 400); s > 0.2 { // expected 0.1/2.1
		t.Fatalf("%s loaded (stage %v): it has %.2f of the answers, want under 0.2", hostA, hubA.Stats().Stage, s)
	}

	close(stop)
	wg.Wait()
	testkit.WaitFor(t, 30*time.Second, "the hub back at the ceiling once its load ended", func() bool {
		return effective(srv, hostA) == 2
	})
	if s := share(t, dnsAddr, hostA, 400); s < 0.3 || s > 0.7 {
		t.Fatalf("load over: %s has %.2f of the answers, want about half", hostA, s)
	}

	stop = make(chan struct{})
	load(t, hubA, stop, &wg)
	defer func() { close(stop); wg.Wait() }()
	testkit.WaitFor(t, 30*time.Second, "the loaded hub at the floor again", func() bool {
		return effective(srv, hostA) <= 0.1+1e-9
	})
	ns.Shutdown() // the reports stop while the hub is still loaded
	testkit.WaitFor(t, 30*time.Second, "the configured weights back after the timeout", func() bool {
		return effective(srv, hostA) == 1 && effective(srv, hostB) == 1
	})
	if s := share(t, dnsAddr, hostA, 400); s < 0.3 || s > 0.7 {
		t.Fatalf("NATS stopped: %s has %.2f of the answers, want about half (configured 1:1)", hostA, s)
	}
	if w := srv.FeedbackWeights(); len(w) != 2 || !strings.HasPrefix(w[0].Origin, hostA+":") || !strings.HasPrefix(w[1].Origin, hostB+":") {
		t.Fatalf("feedback weights %+v: want each record matched to its hub's advertised address", w)
	}
}

// TestFeedbackSeesAFullHub: a hub whose sessions reach its load.capacity
// gets less weight although nothing else presses it (no overload
// control: no limiter, stage 0, no set-up queue); the weighted answers
// shift away from it while it is full and back once its sessions end.
func TestFeedbackSeesAFullHub(t *testing.T) {
	const hostA, hostB, capacity = "127.0.0.2", "127.0.0.3", 4
	url := feedbackNATS(t, hostA).Server.ClientURL()
	sized := func(cfg *hub.Config) { cfg.Load.Capacity = capacity }
	hubA := startFeedbackHub(t, hostA, url, sized)
	startFeedbackHub(t, hostB, url, sized)
	srv, dnsAddr := feedbackDNS(t, url, hostA, hostB)

	testkit.WaitFor(t, 30*time.Second, "both origins at the ceiling", func() bool {
		return effective(srv, hostA) == 2 && effective(srv, hostB) == 2
	})
	tok, err := feedbackToken()
	if err != nil {
		t.Fatal(err)
	}
	var held []*client.Client
	for range capacity {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		c, err := client.Dial(ctx, client.Config{Addrs: []string{"ws://" + hubA.Addr().String() + "/v1/ws"}, Token: tok})
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, c)
	}
	testkit.WaitFor(t, 30*time.Second, "the full hub at the floor", func() bool {
		return effective(srv, hostA) <= 0.1+1e-9 && effective(srv, hostB) == 2
	})
	if st := hubA.Stats(); st.Stage != 0 || st.PublishLimit != 0 {
		t.Fatalf("the full hub's stage %v, publish limit %d: want no overload control pressing it", st.Stage, st.PublishLimit)
	}
	if s := share(t, dnsAddr, hostA, 400); s > 0.2 { // expected 0.1/2.1
		t.Fatalf("%s full: it has %.2f of the answers, want under 0.2", hostA, s)
	}
	for _, c := range held {
		_ = c.Close()
	}
	testkit.WaitFor(t, 30*time.Second, "the hub back at the ceiling once its sessions ended", func() bool {
		return effective(srv, hostA) == 2
	})
}
