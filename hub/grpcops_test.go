package hub

import (
	"context"
	"slices"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	reflectionpb "google.golang.org/grpc/reflection/grpc_reflection_v1"

	"github.com/corralhq/corral/client"
)

// TestGRPCHealth asks grpc.health.v1 on the hub's gRPC port: SERVING for
// the server and corral.v1.Corral while the hub runs, unknown services
// refused, and a watcher sees NOT_SERVING as soon as a drain starts, while
// sessions are still open (ten sessions at five GoAways per second keep
// the drain going for at least 1.8 s).
func TestGRPCHealth(t *testing.T) {
	th := startHub(t, func(c *Config, _ *Options) { c.Drain.Rate, c.Drain.Deadline = 5, time.Minute })
	for range 10 {
		dialClient(t, client.Config{Addrs: []string{th.wsAddr()}})
	}
	cc, err := grpc.NewClient(th.GRPCAddr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	hc := healthpb.NewHealthClient(cc)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for _, svc := range []string{"", "corral.v1.Corral"} {
		res, err := hc.Check(ctx, &healthpb.HealthCheckRequest{Service: svc})
		if err != nil || res.GetStatus() != healthpb.HealthCheckResponse_SERVING {
			t.Fatalf("Check(%q) = %v, %v; want SERVING", svc, res, err)
		}
	}
	if _, err := hc.Check(ctx, &healthpb.HealthCheckRequest{Service: "no.such.Service"}); err == nil {
		t.Fatal("Check of an unknown service answered")
	}

	w, err := hc.Watch(ctx, &healthpb.HealthCheckRequest{Service: "corral.v1.Corral"})
	if err != nil {
		t.Fatal(err)
	}
	if res, err := w.Recv(); err != nil || res.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("watch: %v, %v; want SERVING first", res, err)
	}
	done := make(chan error, 1)
	go func() { done <- th.Shutdown(ctx) }()
	res, err := w.Recv()
	if err != nil || res.GetStatus() != healthpb.HealthCheckResponse_NOT_SERVING {
		t.Fatalf("watch during the drain: %v, %v; want NOT_SERVING", res, err)
	}
	if n := th.Sessions(); n == 0 {
		t.Fatal("NOT_SERVING came only once every session was gone, not when the drain started")
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// TestGRPCReflection lists the services of the hub's gRPC port with the
// reflection protocol (what grpcurl list does) and fetches the descriptor
// of corral.v1.Corral.
func TestGRPCReflection(t *testing.T) {
	th := startHub(t, nil)
	cc, err := grpc.NewClient(th.GRPCAddr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	stream, err := reflectionpb.NewServerReflectionClient(cc).ServerReflectionInfo(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ask := func(req *reflectionpb.ServerReflectionRequest) *reflectionpb.ServerReflectionResponse {
		t.Helper()
		if err := stream.Send(req); err != nil {
			t.Fatal(err)
		}
		res, err := stream.Recv()
		if err != nil {
			t.Fatal(err)
		}
		if e := res.GetErrorResponse(); e != nil {
			t.Fatalf("reflection error %d: %s", e.GetErrorCode(), e.GetErrorMessage())
		}
		return res
	}
	res := ask(&reflectionpb.ServerReflectionRequest{MessageRequest: &reflectionpb.ServerReflectionRequest_ListServices{}})
	var names []string
	for _, s := range res.GetListServicesResponse().GetService() {
		names = append(names, s.GetName())
	}
	for _, want := range []string{"corral.v1.Corral", "grpc.health.v1.Health", "grpc.reflection.v1.ServerReflection"} {
		if !slices.Contains(names, want) {
			t.Errorf("services %v lack %s", names, want)
		}
	}
	res = ask(&reflectionpb.ServerReflectionRequest{MessageRequest: &reflectionpb.ServerReflectionRequest_FileContainingSymbol{FileContainingSymbol: "corral.v1.Corral"}})
	if len(res.GetFileDescriptorResponse().GetFileDescriptorProto()) == 0 {
		t.Fatal("no descriptor for corral.v1.Corral")
	}
}
