package hub

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/corralhq/corral/client"
	"github.com/corralhq/corral/hub/auth"
	"github.com/corralhq/corral/wire"
	"github.com/corralhq/corral/wire/corralv1"
)

func TestAuthRejections(t *testing.T) {
	th := startHub(t, nil)
	tests := []struct {
		name   string
		token  string
		prio   client.Priority
		reason string
	}{
		{"missing", "-", client.PriorityP2, "missing"},
		{"malformed", "garbage", client.PriorityP2, "malformed"},
		{"forged", token(t, tokenOpts{secret: "not-the-hub-secret-123"}), client.PriorityP2, "forged"},
		{"expired", token(t, tokenOpts{expires: -time.Minute}), client.PriorityP2, "expired"},
		{"no exp", token(t, tokenOpts{noExpiry: true}), client.PriorityP2, "no_expiry"},
		{"P2 token claims P0", token(t, tokenOpts{prio: 2}), client.PriorityP0, "priority"},
		{"P2 token claims P1", token(t, tokenOpts{prio: 2}), client.PriorityP1, "priority"},
	}
	for _, tr := range transports {
		for _, tc := range tests {
			t.Run(tr.name+"/"+tc.name, func(t *testing.T) {
				before := th.metric("corral_hub_auth_rejected_total", "reason", tc.reason)
				tok := tc.token
				if tok == "-" {
					tok = ""
				}
				// The bounds are for liveness: the client's default 5 s from
				// dial to the hub's answer is not enough on a loaded machine.
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				defer cancel()
				_, err := client.Dial(ctx, client.Config{Addrs: []string{tr.addr(th)}, JSON: tr.json, Token: tok, Priority: tc.prio, DialTimeout: 30 * time.Second})
				var cl wire.Close
				if !errors.As(err, &cl) || cl.Code != wire.ClosePolicyViolation {
					t.Fatalf("dial: %v, want close 1008", err)
				}
				if got := th.metric("corral_hub_auth_rejected_total", "reason", tc.reason); got != before+1 {
					t.Fatalf("rejections counted %v -> %v", before, got)
				}
			})
		}
	}
	// The same P2 token is fine at P2.
	dialClient(t, client.Config{Addrs: []string{th.grpcAddr()}, Token: token(t, tokenOpts{prio: 2}), Priority: client.PriorityP2})
}

func TestGRPCUnauthenticatedStatus(t *testing.T) {
	th := startHub(t, nil)
	cc, err := grpc.NewClient(th.GRPCAddr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	stream, err := corralv1.NewCorralClient(cc).Connect(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Send(&corralv1.ClientFrame{Id: 1, Frame: &corralv1.ClientFrame_Hello{Hello: &corralv1.Hello{Token: "x.y.z"}}}); err != nil {
		t.Fatal(err)
	}
	for {
		_, err := stream.Recv()
		if err != nil {
			if status.Code(err) != codes.Unauthenticated {
				t.Fatalf("status %v, want Unauthenticated", err)
			}
			if c := wire.CloseFromStatus(err); c.Code != wire.ClosePolicyViolation {
				t.Fatalf("close %v, want 1008", c)
			}
			return
		}
	}
}

func TestTenantsAreNamespaces(t *testing.T) {
	th := startHub(t, nil)
	ctx := context.Background()
	acme := dialClient(t, client.Config{Addrs: []string{th.wsAddr()}, Token: token(t, tokenOpts{tenant: "acme"})})
	other := dialClient(t, client.Config{Addrs: []string{th.wsAddr()}, Token: token(t, tokenOpts{tenant: "other"})})
	if _, err := other.Subscribe(ctx, "news"); err != nil {
		t.Fatal(err)
	}
	a, err := acme.Publish(ctx, "news", client.PriorityP1, []byte("acme's"), "")
	if err != nil {
		t.Fatal(err)
	}
	// A position taken from acme's channel means nothing in other's.
	s, err := other.SubscribeFrom(ctx, "news", a.GetEpoch(), 0)
	if err != nil {
		t.Fatal(err)
	}
	if s.GetRecovered() || s.GetPosition().GetOffset() != 0 {
		t.Fatalf("other tenant resumed acme's history: %+v", s)
	}
	if e := nextEvent(t, other, client.EventGap); e.Channel != "news" { // the unrecovered resume, as the client reports it
		t.Fatalf("gap event %v, want one for news", e)
	}
	if _, err := other.Publish(ctx, "news", client.PriorityP1, []byte("other's"), ""); err != nil {
		t.Fatal(err)
	}
	if got := collect(t, other, 1); got[0] != "other's" {
		t.Fatalf("tenant other received %q", got[0])
	}
}

func TestChannelPatternsAndAPIKeys(t *testing.T) {
	th := startHub(t, func(c *Config, _ *Options) {
		c.Auth.APIKeys = append(c.Auth.APIKeys, auth.APIKeyConfig{Name: "acme-only", Key: "acme-only-key-0123456", Tenants: []string{"acme"}})
	})
	ctx := context.Background()
	c := dialClient(t, client.Config{Addrs: []string{th.grpcAddr()}, Token: token(t, tokenOpts{channels: []string{"chat.*"}, publish: []string{"chat.*"}})})
	if _, err := c.Subscribe(ctx, "chat.1"); err != nil {
		t.Fatal(err)
	}
	_, err := c.Subscribe(ctx, "admin.logs")
	var cl wire.Close
	if !errors.As(err, &cl) || cl.Code != wire.CloseForbidden {
		t.Fatalf("subscribe outside the patterns: %v, want 4005", err)
	}
	if _, err := c.Publish(ctx, "admin.logs", client.PriorityP2, nil, ""); !errors.As(err, &cl) || cl.Code != wire.CloseForbidden {
		t.Fatalf("publish outside the patterns: %v, want 4005", err)
	}
	post := func(key, tenant string) int {
		body := `{"tenant":"` + tenant + `","channel":"chat.1","data":"x"}`
		req, _ := http.NewRequest("POST", "http://"+th.Addr().String()+"/v1/publish", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := post("acme-only-key-0123456", "acme"); code != 200 {
		t.Errorf("key for its tenant: HTTP %d", code)
	}
	cc, err := grpc.NewClient(th.GRPCAddr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	api := corralv1.NewCorralClient(cc)
	// A valid key used for another tenant is authenticated but not
	// authorised (403, PermissionDenied); a missing or unknown key is not
	// authenticated (401, Unauthenticated).
	refusals := []struct {
		name, key, tenant, reason string
		http                      int
		grpc                      codes.Code
	}{
		{"valid key for another tenant", "acme-only-key-0123456", "other", "tenant", 403, codes.PermissionDenied},
		{"unknown key", "wrong-key-0123456789", "acme", "api_key", 401, codes.Unauthenticated},
		{"no key", "", "acme", "api_key", 401, codes.Unauthenticated},
	}
	for _, tc := range refusals {
		t.Run(tc.name, func(t *testing.T) {
			before := th.metric("corral_hub_auth_rejected_total", "reason", tc.reason)
			if code := post(tc.key, tc.tenant); code != tc.http {
				t.Errorf("HTTP %d, want %d", code, tc.http)
			}
			actx := metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+tc.key)
			_, err := api.Publish(actx, &corralv1.PublishRequest{Tenant: tc.tenant, Publish: &corralv1.Publish{Channel: "chat.1"}})
			if status.Code(err) != tc.grpc {
				t.Errorf("gRPC: %v, want %v", err, tc.grpc)
			}
			if got := th.metric("corral_hub_auth_rejected_total", "reason", tc.reason); got != before+2 {
				t.Errorf("rejections{reason=%q} %v -> %v, want +2", tc.reason, before, got)
			}
		})
	}
}
