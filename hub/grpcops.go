package hub

import (
	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/reflection"

	"github.com/corralhq/corral/wire/corralv1"
)

// The operational services of the hub's gRPC port, beside corral.v1.Corral:
// grpc.health.v1.Health (which load balancers, Kubernetes probes and
// corral's own health package ask) and server reflection (grpcurl list,
// describe). Health follows Ready: SERVING while the hub takes sessions,
// NOT_SERVING before it started, while NATS is down and from the first
// moment of a drain, for the overall service ("") and corral.v1.Corral.

// newHealthServer returns the health service of a hub that has not started:
// every service NOT_SERVING.
func newHealthServer() *health.Server {
	hs := health.NewServer()
	for _, svc := range healthServices {
		hs.SetServingStatus(svc, healthpb.HealthCheckResponse_NOT_SERVING)
	}
	return hs
}

// healthServices are the service names health reports: the whole server
// and the session service.
var healthServices = []string{"", corralv1.Corral_ServiceDesc.ServiceName}

// registerGRPCOps adds health and reflection to s.
func (h *Hub) registerGRPCOps(s *grpc.Server) {
	healthpb.RegisterHealthServer(s, h.health)
	reflection.Register(s)
}

// syncHealth sets the health of every service from Ready. Watchers of the
// health service get each change.
func (h *Hub) syncHealth() {
	st := healthpb.HealthCheckResponse_SERVING
	if h.Ready() != nil {
		st = healthpb.HealthCheckResponse_NOT_SERVING
	}
	for _, svc := range healthServices {
		h.health.SetServingStatus(svc, st)
	}
}
