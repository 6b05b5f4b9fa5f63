package hub

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/corralhq/corral/hub/history"
	"github.com/corralhq/corral/wire"
	"github.com/corralhq/corral/wire/corralv1"
)

// TestPublishValidationOnEveryPath sends the same invalid publishes through
// the session, gRPC, HTTP and NATS: each answers the client error naming the
// field (4004 / HTTP 400 / InvalidArgument, or 1009 / 413 for the data),
// and none reaches the history store (no history error, nothing stored).
func TestPublishValidationOnEveryPath(t *testing.T) {
	nc := sharedNATS(t)
	th := startHub(t, func(c *Config, o *Options) {
		o.NATS = nc.NC
		c.History.Store = history.StoreMemory
	})
	ctx := context.Background()
	cc, err := grpc.NewClient(th.GRPCAddr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	api := corralv1.NewCorralClient(cc)
	actx := metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+testAPIKey)

	type publish struct {
		tenant, channel, clientID string
		data                      []byte
	}
	// paths publish p and return the close code and text they answered.
	paths := []struct {
		name string
		send func(t *testing.T, p publish) (wire.CloseCode, string)
	}{
		{"session", func(t *testing.T, p publish) (wire.CloseCode, string) {
			// A session's invalid frame closes the session (4004 naming
			// the field): read it on a raw gRPC session.
			stream, err := api.Connect(ctx)
			if err != nil {
				t.Fatal(err)
			}
			send := func(f *corralv1.ClientFrame) {
				if err := stream.Send(f); err != nil {
					t.Fatal(err)
				}
			}
			send(&corralv1.ClientFrame{Id: 1, Frame: &corralv1.ClientFrame_Hello{Hello: &corralv1.Hello{Token: token(t, tokenOpts{})}}})
			if f, err := stream.Recv(); err != nil || f.GetWelcome() == nil {
				t.Fatalf("hello: %v %v", f, err)
			}
			send(&corralv1.ClientFrame{Id: 2, Frame: &corralv1.ClientFrame_Publish{Publish: &corralv1.Publish{Channel: p.channel, Data: p.data, ClientMessageId: p.clientID}}})
			for {
				f, err := stream.Recv()
				if err != nil {
					c := wire.CloseFromStatus(err)
					return c.Code, c.Text
				}
				if c, ok := wire.CloseFromFrame(f); ok {
					return c.Code, c.Text
				}
			}
		}},
		{"grpc", func(t *testing.T, p publish) (wire.CloseCode, string) {
			_, err := api.Publish(actx, &corralv1.PublishRequest{Tenant: p.tenant, Publish: &corralv1.Publish{Channel: p.channel, Data: p.data, ClientMessageId: p.clientID}})
			c := wire.CloseFromStatus(err)
			if want := c.Code.GRPCCode(); status.Code(err) != want {
				t.Errorf("gRPC status %v, want %v for close %v", status.Code(err), want, c.Code)
			}
			return c.Code, c.Text
		}},
		{"http", func(t *testing.T, p publish) (wire.CloseCode, string) {
			b, _ := json.Marshal(map[string]any{"tenant": p.tenant, "channel": p.channel, "data_base64": p.data, "client_message_id": p.clientID})
			req, _ := http.NewRequest("POST", "http://"+th.Addr().String()+"/v1/publish", strings.NewReader(string(b)))
			req.Header.Set("Authorization", "Bearer "+testAPIKey)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			body, _ := io.ReadAll(resp.Body)
			var e errorReply
			if err := json.Unmarshal(body, &e); err != nil {
				t.Fatalf("HTTP %d %s: %v", resp.StatusCode, body, err)
			}
			if want := httpStatusOf(wire.CloseCode(e.Code)); resp.StatusCode != want || resp.Header.Get("Retry-After") != "" {
				t.Errorf("HTTP %d (Retry-After %q), want %d and no Retry-After", resp.StatusCode, resp.Header.Get("Retry-After"), want)
			}
			return wire.CloseCode(e.Code), e.Error
		}},
		{"nats", func(t *testing.T, p publish) (wire.CloseCode, string) {
			m := nats.NewMsg("corral.publish." + p.tenant + "." + p.channel)
			m.Data = p.data
			if p.clientID != "" {
				m.Header.Set(history.HeaderClientID, p.clientID)
			}
			r, err := nc.NC.RequestMsg(m, 10*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			var e errorReply
			if err := json.Unmarshal(r.Data, &e); err != nil {
				t.Fatalf("reply %s: %v", r.Data, err)
			}
			return wire.CloseCode(e.Code), e.Error
		}},
	}
	tests := []struct {
		name  string
		p     publish
		skip  string // the paths that cannot carry it, space-separated
		code  wire.CloseCode
		field string
	}{
		{name: "channel of 201 bytes (the limit is 200)", p: publish{channel: strings.Repeat("a", 201)}, code: wire.CloseBadRequest, field: "channel"},
		{name: "channel of 512 bytes", p: publish{channel: strings.Repeat("b", 512)}, code: wire.CloseBadRequest, field: "channel"},
		{name: "client_message_id of 50,000 characters", p: publish{channel: "news", clientID: strings.Repeat("x", 50000)}, code: wire.CloseBadRequest, field: "client_message_id"},
		{name: "channel with an empty part", p: publish{channel: "news..eu"}, skip: "nats", code: wire.CloseBadRequest, field: "channel"},
		{name: "channel with a wildcard", p: publish{channel: "news.*"}, code: wire.CloseBadRequest, field: "channel"},
		{name: "tenant that is not a name", p: publish{tenant: "ac$me", channel: "news"}, skip: "session", code: wire.CloseBadRequest, field: "tenant"},
		{name: "data above max_frame_bytes", p: publish{channel: "news", data: make([]byte, wire.DefaultMaxFrameBytes+1)}, skip: "session grpc", code: wire.CloseTooBig, field: "data"},
	}
	for _, path := range paths {
		for _, tc := range tests {
			if slices.Contains(strings.Fields(tc.skip), path.name) {
				continue
			}
			t.Run(path.name+"/"+tc.name, func(t *testing.T) {
				p := tc.p
				if p.tenant == "" {
					p.tenant = "acme"
				}
				code, text := path.send(t, p)
				if code != tc.code || !strings.HasPrefix(strings.TrimPrefix(text, "publish."), tc.field+": ") {
					t.Fatalf("answer %v %q, want %v naming the field %q", code, text, tc.code, tc.field)
				}
			})
		}
	}
	if n := th.metric("corral_hub_history_errors_total"); n != 0 {
		t.Fatalf("%v history errors: an invalid publish reached the store", n)
	}
	if n := th.metric("corral_hub_published_total"); n != 0 {
		t.Fatalf("%v invalid publishes were published", n)
	}
}
