package edge

import (
	"context"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/corralhq/corral/client"
	"github.com/corralhq/corral/wire/corralv1"
)

// TestPublishThroughEdge: a backend's Corral.Publish at the edge reaches
// a hub with the backend's own API key (a device subscribed through the
// edge gets the message), and a wrong key is refused by the hub, not let
// through by the edge.
func TestPublishThroughEdge(t *testing.T) {
	th := startHub(t, nil)
	te := startEdge(t, nil, th)
	sub := dialClient(t, client.Config{Addrs: []string{te.wsAddr()}})
	ctx := context.Background()
	if _, err := sub.Subscribe(ctx, "news"); err != nil {
		t.Fatal(err)
	}
	cc, err := grpc.NewClient("passthrough:///"+te.GRPCAddr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	api := corralv1.NewCorralClient(cc)
	publish := func(key string) (*corralv1.Published, error) {
		md := metadata.Pairs("authorization", "Bearer "+key)
		return api.Publish(metadata.NewOutgoingContext(ctx, md), &corralv1.PublishRequest{
			Tenant: "acme", Publish: &corralv1.Publish{Channel: "news", Priority: corralv1.Priority_PRIORITY_P1, Data: []byte("via the edge")},
		})
	}
	res, err := publish(testAPIKey)
	if err != nil {
		t.Fatalf("publish through the edge: %v", err)
	}
	if res.GetOffset() != 1 {
		t.Fatalf("published at offset %d, want 1", res.GetOffset())
	}
	if got := collect(t, sub, 1); got[0] != "via the edge" {
		t.Fatalf("subscriber got %q", got)
	}
	if _, err := publish("wrong-key-0123456789"); status.Code(err) == codes.OK {
		t.Fatal("a wrong API key was let through")
	}
}
