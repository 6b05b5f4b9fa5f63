package fleet

import (
	"context"
	"net/netip"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/corralhq/corral/client"
	"github.com/corralhq/corral/internal/testkit"
)

// startFleet starts a fleet of three hubs for a test and stops it at the
// end.
func startFleet(t *testing.T, cfg Config) *Fleet {
	t.Helper()
	return startFleetWith(t, cfg, Options{})
}

// startFleetWith is startFleet with opts.
func startFleetWith(t *testing.T, cfg Config, opts Options) *Fleet {
	t.Helper()
	if testing.Short() {
		t.Skip("starts a NATS cluster and three hubs")
	}
	f, err := New(cfg, opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := f.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := f.Shutdown(ctx); err != nil {
			t.Errorf("shutdown: %v", err)
		}
	})
	return f
}

// lookup asks the fleet's DNS for the origin name's addresses, sorted.
func lookup(t *testing.T, f *Fleet) []string {
	t.Helper()
	ips, err := f.Resolver().LookupNetIP(context.Background(), "ip4", f.OriginName())
	if err != nil {
		t.Fatal(err)
	}
	var s []string
	for _, ip := range ips {
		s = append(s, ip.String())
	}
	slices.Sort(s)
	return s
}

// TestFleetServesEveryHubUnderOneName starts the fabric and checks what a
// device sees: the origin name answers every hub's address, sessions
// reached through that name land on every hub and receive a message
// published on one of them, and a killed hub leaves the answer once its
// health check fails while its devices resume on the others.
func TestFleetServesEveryHubUnderOneName(t *testing.T) {
	f := startFleet(t, Config{})
	want := []string{"127.0.1.1", "127.0.1.2", "127.0.1.3"}
	if got := lookup(t, f); !slices.Equal(got, want) {
		t.Fatalf("origin answers %v, want %v", got, want)
	}
	tok, err := f.Token("acme", []string{"news"}, 0, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	url := "ws://" + f.OriginName() + ":" + strconv.Itoa(f.WSPort()) + "/v1/ws"
	resolve := func(ctx context.Context, host string) ([]netip.Addr, error) {
		return f.Resolver().LookupNetIP(ctx, "ip", host)
	}
	var clients []*client.Client
	for range 30 {
		c, err := client.Dial(ctx, client.Config{Addrs: []string{url}, Token: tok, Resolve: resolve,
			Priority: client.PriorityP0, ReconnectMin: 20 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		if _, err := c.Subscribe(ctx, "news"); err != nil {
			t.Fatal(err)
		}
		clients = append(clients, c)
	}
	for _, h := range f.Hubs() {
		if h.Sessions() == 0 {
			t.Errorf("%s holds no session of 30 dialled through the origin name", h.Name)
		}
	}

	if _, err := clients[0].Publish(ctx, "news", client.PriorityP0, []byte("one"), ""); err != nil {
		t.Fatal(err)
	}
	for i, c := range clients {
		if got := nextMessage(t, c); got != "one" {
			t.Fatalf("client %d got %q, want one", i, got)
		}
	}

	if err := f.KillHub(1); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, 20*time.Second, "the killed hub's address leaves the answer", func() bool {
		return slices.Equal(lookup(t, f), []string{"127.0.1.1", "127.0.1.3"})
	})
	testkit.WaitFor(t, 30*time.Second, "every session back on the two other hubs", func() bool {
		hs := f.Hubs()
		return hs[0].Sessions()+hs[2].Sessions() == len(clients)
	})
	if _, err := clients[0].Publish(ctx, "news", client.PriorityP0, []byte("two"), ""); err != nil {
		t.Fatal(err)
	}
	for i, c := range clients {
		if got := nextMessage(t, c); got != "two" {
			t.Fatalf("client %d got %q after the kill, want two", i, got)
		}
	}
}

// nextMessage returns the data of c's next message, failing the test on a
// gap or after 15 s.
func nextMessage(t *testing.T, c *client.Client) string {
	t.Helper()
	timeout := time.After(15 * time.Second)
	for {
		select {
		case e := <-c.Events():
			switch e.Kind {
			case client.EventMessage:
				return string(e.Message.GetData())
			case client.EventGap:
				t.Fatalf("gap: %+v", e.Gap)
			}
		case <-timeout:
			t.Fatal("no message within 15 s")
		}
	}
}

func TestConfigValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  Config
		want string
	}{
		{"too many hubs", Config{Hubs: 300}, "fleet: hubs: 300, want 1 to 254"},
		{"not loopback", Config{HubNet: "10.0.0."}, `fleet: hub_net "10.0.0.": not a loopback network (127.0.0.0/8)`},
		{"no dot", Config{HubNet: "127.0.1"}, `fleet: hub_net "127.0.1": want three octets and a dot (127.0.1. for example)`},
		{"unknown policy", Config{Policy: "roundrobin"}, "fleet: policy: "},
		{"short secret", Config{Secret: "x"}, "fleet: secret: shorter than 32 bytes"},
		{"one NATS member", Config{NATSMembers: 1}, "fleet: nats_members: 1, want 3 to 5"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.cfg.Validate()
			if err == nil || len(err.Error()) < len(tc.want) || err.Error()[:len(tc.want)] != tc.want {
				t.Fatalf("Validate = %v, want %q", err, tc.want)
			}
		})
	}
	var c Config
	if err := c.Validate(); err != nil || c.Hubs != 3 || c.Policy != "multivalue" {
		t.Fatalf("defaults: %v %+v", err, c)
	}
}
