package e2e

import (
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/corralhq/corral/hub/auth"
	"github.com/corralhq/corral/internal/browser"
	"github.com/corralhq/corral/internal/testkit"
)

// devSecret is the session-token secret of examples/hub.yaml.
const devSecret = "dev-secret-change-me-0123456789"

// token mints a session JWT for the tenant of examples/hub.yaml.
func token(t *testing.T) string {
	t.Helper()
	tok, err := jwt.NewWithClaims(jwt.SigningMethodHS256, auth.Claims{
		Tenant: tenant, Channels: []string{">"},
		RegisteredClaims: jwt.RegisteredClaims{ExpiresAt: jwt.NewNumericDate(time.Now().Add(time.Hour))},
	}).SignedString([]byte(devSecret))
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// event is a line "E2E {json}" of page.html.
type event struct {
	at           time.Time
	Ev           string  `json:"ev"`
	Client       string  `json:"client"`
	URL          string  `json:"url"`
	Node         string  `json:"node"`
	Code         int     `json:"code"`
	Reason       string  `json:"reason"`
	RetryAfterMs int     `json:"retryAfterMs"`
	RetryInMs    float64 `json:"retryInMs"`
	Recovered    bool    `json:"recovered"`
	Offset       uint64  `json:"offset"`
	Text         string  `json:"text"`
}

func events(b *browser.Page) []event {
	var out []event
	for _, l := range b.Lines() {
		rest, ok := strings.CutPrefix(l.Text, "E2E ")
		if !ok {
			continue
		}
		var e event
		if json.Unmarshal([]byte(rest), &e) == nil {
			e.at = l.At
			out = append(out, e)
		}
	}
	return out
}

// TestBrowserResumesAcrossDrain: two `corral hub` processes (examples/hub.yaml,
// on one NATS server: shared history) and a page in headless Chromium with
// two clients (binary and JSON frames) given both hubs' URLs. The clients
// subscribe and receive; the hub that holds the binary client drains
// (SIGTERM) while a backend keeps publishing on the other; the client
// resumes on the other hub. Every client gets every offset exactly once, in
// order, including those published while it was away; the binary client
// saw the drain's GoAway hint and a recovered resume.
func TestBrowserResumesAcrossDrain(t *testing.T) {
	needBrowser(t)
	bin := build(t)
	natsURL := startNATS(t)
	env := []string{
		"CORRAL_HUB_NATS_URL=" + natsURL, "CORRAL_HUB_NATS_STORE_DIR=",
		// A short hint keeps the test short; the drain still spreads it.
		"CORRAL_HUB_DRAIN_RETRY_AFTER=300ms",
		// Admission control would refuse sessions on a loaded test machine;
		// the SDK would retry, but the test is about the drain.
		"CORRAL_HUB_OVERLOAD_ENABLED=false",
	}
	hubs := map[string]*hubProc{}
	for _, name := range []string{"hub-a", "hub-b"} {
		hubs[name] = startHub(t, bin, name, env...)
	}
	const channel = "e2e.drain"
	page, err := os.ReadFile("page.html")
	if err != nil {
		t.Fatal(err)
	}
	srv := pageServer(t, map[string][]byte{"page.html": page})
	q := url.Values{"urls": {hubs["hub-a"].wsURL() + "," + hubs["hub-b"].wsURL()}, "channel": {channel}}
	b := openPage(t, srv.URL+"/page.html?"+q.Encode()+"#"+token(t))

	clients := []string{"proto", "json"}
	for _, c := range clients {
		b.WaitLine(t, c+" client subscribed", func(s string) bool { return strings.Contains(s, `"ev":"ready","client":"`+c+`"`) })
	}
	// Twenty messages through both hubs: the fleet shares its channels.
	n := 0
	next := func(h *hubProc) {
		n++
		if off := publish(t, h.addr, channel, fmt.Sprintf("m%d", n)); off != uint64(n) {
			t.Fatalf("publish m%d got offset %d", n, off)
		}
	}
	for i := 0; i < 20; i++ {
		next(hubs[[]string{"hub-a", "hub-b"}[i%2]])
	}
	received := func(client string) []event {
		var out []event
		for _, e := range events(b) {
			if e.Ev == "message" && e.Client == client {
				out = append(out, e)
			}
		}
		return out
	}
	for _, c := range clients {
		testkit.WaitFor(t, 60*time.Second, c+" client receiving m1..m20", func() bool { return len(received(c)) >= 20 })
	}

	// The hub of the binary client drains; a backend goes on publishing on
	// the other one until the client is back there, and a little after.
	var drained, stays *hubProc
	for _, e := range events(b) {
		if e.Ev == "connected" && e.Client == "proto" {
			drained, stays = hubs[e.Node], hubs[map[string]string{"hub-a": "hub-b", "hub-b": "hub-a"}[e.Node]]
		}
	}
	if drained == nil || stays == nil {
		t.Fatalf("no connected event of the binary client naming a hub:\n%s", b.Text())
	}
	type sent struct {
		off uint64
		at  time.Time
	}
	var (
		mu   sync.Mutex
		log  []sent
		stop = make(chan struct{})
		done = make(chan struct{})
	)
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			default:
			}
			mu.Lock()
			n++
			text := fmt.Sprintf("m%d", n)
			mu.Unlock()
			off := publish(t, stays.addr, channel, text)
			mu.Lock()
			log = append(log, sent{off, time.Now()})
			mu.Unlock()
			time.Sleep(10 * time.Millisecond)
		}
	}()
	drainAt := time.Now()
	drained.drain(t)
	back := b.WaitLine(t, "the binary client connected to "+stays.name+" after the drain", func(s string) bool {
		return strings.Contains(s, `"ev":"connected","client":"proto","url":"`+stays.wsURL()+`"`)
	})
	// A few more after the resume, then stop.
	mu.Lock()
	target := n + 20
	mu.Unlock()
	testkit.WaitFor(t, 60*time.Second, "20 more publishes", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return n >= target
	})
	close(stop)
	<-done
	drained.waitExit(t)
	last := uint64(n)

	for _, c := range clients {
		testkit.WaitFor(t, 60*time.Second, fmt.Sprintf("%s client receiving m1..m%d", c, last), func() bool { return uint64(len(received(c))) >= last })
		got := received(c)
		if uint64(len(got)) != last {
			t.Errorf("%s client: %d messages, want %d (some twice)", c, len(got), last)
		}
		for i, e := range got {
			if e.Offset != uint64(i+1) || e.Text != fmt.Sprintf("m%d", i+1) {
				t.Fatalf("%s client: message %d is offset %d %q, want offset %d \"m%d\" (missing, twice or out of order)", c, i+1, e.Offset, e.Text, i+1, i+1)
			}
		}
	}

	// What the binary client went through: the drain's GoAway (1001 with a
	// hint), a resume on the other hub that recovered, no gap, no stop; and
	// messages were published while it was away, so the resume carried them.
	var away, resumed bool
	var gone time.Time
	var story []string
	for _, e := range events(b) {
		if e.Client != "proto" {
			continue
		}
		if e.Ev != "message" {
			story = append(story, fmt.Sprintf("%s %s %s %d %q %v", e.at.Format("15:04:05.000"), e.Ev, e.Node, e.Code, e.Reason, e.RetryInMs))
		}
		switch e.Ev {
		case "disconnected":
			if e.Code == 1001 && e.RetryAfterMs >= 300 && e.at.After(drainAt) {
				away, gone = true, e.at
			}
		case "resumed":
			if !e.Recovered {
				t.Errorf("the binary client resumed without recovering: %+v", e)
			}
			resumed = resumed || e.Recovered
		case "gap", "closed", "refused":
			t.Errorf("the binary client reported %s: %+v", e.Ev, e)
		}
	}
	if !away {
		t.Errorf("the binary client reported no drain (close 1001 with a retry hint of at least 300 ms):\n%s", b.Text())
	}
	if !resumed {
		t.Errorf("the binary client reported no recovered resume")
	}
	meanwhile := 0
	mu.Lock()
	for _, s := range log {
		if s.at.After(gone) && s.at.Before(back.At) {
			meanwhile++
		}
	}
	mu.Unlock()
	if meanwhile == 0 {
		t.Errorf("no message was published while the binary client was away: the resume was not tested")
	}
	t.Logf("the binary client's events:\n%s", strings.Join(story, "\n"))
	t.Logf("%d messages, %d published while the binary client was away (%v between its disconnect and its reconnect)", last, meanwhile, back.At.Sub(gone).Round(time.Millisecond))
}
