package hub

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/corralhq/corral/client"
)

// TestUnhealthyControl: POST /health/unhealthy of HealthControl makes the
// hub fail its health checks (Ready an error, gRPC health NOT_SERVING)
// while the session it holds stays and a new one is still welcomed; POST
// /health/healthy makes it SERVING again.
func TestUnhealthyControl(t *testing.T) {
	th := startHub(t, nil)
	held := dialClient(t, client.Config{Addrs: []string{th.wsAddr()}})
	session := held.SessionID()
	ctl := httptest.NewServer(th.HealthControl())
	defer ctl.Close()
	cc, err := grpc.NewClient(th.GRPCAddr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	hc := healthpb.NewHealthClient(cc)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	status := func() healthpb.HealthCheckResponse_ServingStatus {
		res, err := hc.Check(ctx, &healthpb.HealthCheckRequest{Service: ""})
		if err != nil {
			t.Fatal(err)
		}
		return res.GetStatus()
	}
	post := func(path string) string {
		res, err := http.Post(ctl.URL+path, "text/plain", nil)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		if res.StatusCode != http.StatusOK {
			t.Fatalf("POST %s: %s %s", path, res.Status, b)
		}
		return string(b)
	}
	if status() != healthpb.HealthCheckResponse_SERVING {
		t.Fatal("not SERVING before the control")
	}
	if got := post("/health/unhealthy"); !strings.Contains(got, "marked unhealthy") {
		t.Errorf("POST /health/unhealthy answered %q", got)
	}
	if th.Ready() == nil || status() != healthpb.HealthCheckResponse_NOT_SERVING {
		t.Fatalf("marked unhealthy: Ready %v, health %v; want an error and NOT_SERVING", th.Ready(), status())
	}
	dialClient(t, client.Config{Addrs: []string{th.wsAddr()}}) // still welcomed
	if n := th.Sessions(); n != 2 {
		t.Errorf("%d sessions while unhealthy, want the held one and the new one", n)
	}
	if held.Err() != nil || held.SessionID() != session {
		t.Errorf("the held session ended: %v (session %q, was %q)", held.Err(), held.SessionID(), session)
	}
	if got := post("/health/healthy"); strings.TrimSpace(got) != "ready" {
		t.Errorf("POST /health/healthy answered %q", got)
	}
	if th.Ready() != nil || status() != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("healthy again: Ready %v, health %v", th.Ready(), status())
	}
}
