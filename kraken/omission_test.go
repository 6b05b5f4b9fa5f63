package kraken

import (
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/corralhq/corral/hub"
)

// stallingAPI forwards to the hub's publish API and, from its stallAt-th
// request on, holds every request that arrives within stall of that one
// until the stall ends: a publish path that stops answering for a while.
type stallingAPI struct {
	next    http.Handler
	stallAt int
	stall   time.Duration

	mu    sync.Mutex
	n     int
	until time.Time
}

func (s *stallingAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	s.n++
	if s.n == s.stallAt {
		s.until = time.Now().Add(s.stall)
	}
	until := s.until
	s.mu.Unlock()
	if d := time.Until(until); d > 0 {
		time.Sleep(d)
	}
	s.next.ServeHTTP(w, r)
}

// TestCoordinatedOmissionIsCorrected: P0 is published at 50 per second
// for 2 s through a publish API that stops answering for a second after
// its 25th request. kraken's 8 publishers are held by it, and the messages
// due meanwhile wait for them; a message's latency runs from its due time
// (the open model's schedule), so the ones that waited count their wait:
// about a third of the deliveries take half the stall or more. Measured
// from the moment a publisher sent it, only the 8 held requests would
// show the stall, and the p90 would be a few milliseconds (checked: with
// the payload stamped at send time, this fails).
func TestCoordinatedOmissionIsCorrected(t *testing.T) {
	if testing.Short() {
		t.Skip("a run against a hub")
	}
	h := startHub(t, hub.Options{})
	target, err := url.Parse("http://" + h.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	const stall = time.Second
	api := httptest.NewServer(&stallingAPI{next: httputil.NewSingleHostReverseProxy(target), stallAt: 25, stall: stall})
	defer api.Close()
	sc := loadScenario(t, "omission.yaml", `
name: omission
duration: 5s
population: {devices: 10, initial: 10, protocol: websocket, tenants: 1, channels: 1, priorities: [{name: P0, share: 1}]}
dns: {policy: multivalue}
origins: [{name: hub, headroom: 2, max_new_per_second: 1000}]
client:
  backoff: {policy: full, base: 50ms, cap: 500ms}
traffic:
  publish: [{at: 500ms, for: 2s, priority: P0, per_second: 50}]
`)
	res := runScenario(t, sc, Config{Targets: []string{h.url()}, Token: testToken(testSecret), PublishURL: api.URL, APIKey: testAPIKey})
	d := res.Latency.Deliver["p0"]
	if res.Messages.Published.Total() != 100 || d.Count() != 1000 {
		t.Fatalf("published %d, deliveries measured %d; want 100, 1000", res.Messages.Published.Total(), d.Count())
	}
	if p90, m := d.Quantile(90), d.Max(); p90 < stall/2 || m < stall*9/10 {
		t.Errorf("deliver p90 %v, max %v; want the stall counted: p90 >= %v, max >= %v", p90, m, stall/2, stall*9/10)
	} else {
		t.Logf("deliver p50 %v, p90 %v, max %v", d.Quantile(50), p90, m)
	}
}
