package hub

import (
	"fmt"
	"net/http"
)

// SetUnhealthy(true) makes the hub report itself unhealthy: Ready returns
// an error, so /readyz answers 503 and the gRPC health service
// NOT_SERVING, and the health checks in front of it (DNS, load balancers)
// take it out of their answers. The hub keeps serving the sessions it
// holds and still accepts new ones (clients with a cached address keep
// coming until their caches expire). SetUnhealthy(false) undoes it. It
// is the operator's control behind the admin pages of HealthControl, and
// kraken's traffic.unhealthy storm. It is safe for concurrent use.
func (h *Hub) SetUnhealthy(on bool) {
	h.unhealthy.Store(on)
	h.syncHealth()
}

// HealthControl returns the admin pages that flip SetUnhealthy: POST
// /health/unhealthy and POST /health/healthy, each answering the hub's
// readiness after the change. `corral hub` adds them to its admin
// listener, which only operators reach.
func (h *Hub) HealthControl() http.Handler {
	mux := http.NewServeMux()
	set := func(on bool) http.HandlerFunc {
		return func(w http.ResponseWriter, _ *http.Request) {
			h.SetUnhealthy(on)
			if err := h.Ready(); err != nil {
				fmt.Fprintln(w, "not ready:", err)
				return
			}
			fmt.Fprintln(w, "ready")
		}
	}
	mux.Handle("POST /health/unhealthy", set(true))
	mux.Handle("POST /health/healthy", set(false))
	return mux
}
