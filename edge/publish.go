package edge

import (
	"context"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/corralhq/corral/wire"
	"github.com/corralhq/corral/wire/corralv1"
)

// Publish forwards a backend's publish to a hub picked as a new session's
// would be (Pick, for the request's tenant), on the connection the edge
// already holds to it, with the backend's own "authorization" metadata:
// the hub checks the API key, the edge holds none. A hub that fails the
// call is reported to the outlier detection, and the backend gets the
// hub's status (Unavailable with a retry hint when no hub is reachable).
func (g *grpcService) Publish(ctx context.Context, req *corralv1.PublishRequest) (*corralv1.Published, error) {
	e := g.e
	if e.draining.Load() {
		return nil, wire.Close{Code: wire.CloseGoingAway, RetryAfter: e.drainCfg.RetryAfter, Text: "edge draining"}.Status().Err()
	}
	o, err := e.origins.Pick(req.GetTenant())
	if err != nil {
		return nil, wire.Close{Code: wire.CloseTryAgainLater, RetryAfter: time.Second, Text: "no origin"}.Status().Err()
	}
	oc, err := e.up.conn(o.Addr())
	if err != nil {
		o.HandshakeDone(OriginNeutral)
		return nil, wire.Close{Code: wire.CloseGoingAway, RetryAfter: time.Second, Text: "edge stopped"}.Status().Err()
	}
	out := metadata.MD{}
	if md, ok := metadata.FromIncomingContext(ctx); ok {
		out.Set("authorization", md.Get("authorization")...)
	}
	res, err := corralv1.NewCorralClient(oc.cc).Publish(metadata.NewOutgoingContext(ctx, out), req)
	switch status.Code(err) {
	case codes.OK:
		o.HandshakeDone(OriginNeutral)
	case codes.Unavailable:
		o.HandshakeDone(OriginFailure)
	default:
		o.HandshakeDone(OriginNeutral) // the hub answered: a refusal is the backend's
	}
	return res, err
}
