// Package edge is corral's L7 tier in front of the hubs: it terminates the
// devices' WebSocket and gRPC sessions, enforces every bound of the session
// protocol before any work reaches an origin, and carries each session to a
// hub over a few long-lived Relay streams per hub address (tagged frames,
// one receiving goroutine per stream, not per session).
//
// The shape is the one of every corral server: Config -> Validate -> New
// (no I/O, no goroutine) -> Run (blocks) -> Shutdown (drains), with Addr,
// GRPCAddr and Ready. A device cannot tell an edge from a hub except by
// Welcome's node_id, which reads "<edge>/<hub>".
//
// A session's life at the edge: the device's frames are decoded with the
// codec of its subprotocol and checked (size, content, frame and publish
// rates, subscription count, Hello within the handshake timeout); Ping is
// answered at the edge, which also pings the device; Hello picks an origin
// (origins.go) and opens the session upstream; the rest of the frames go up
// tagged with the session, and the hub's frames come down to a bounded
// queue per device, so a device that does not read never holds up the
// stream it shares: it is closed with 4000 (slow consumer). The hub's close
// of a session (RelayClose) reaches the device unchanged: the same code,
// text and retry hint. A Relay stream that breaks ends every session on
// it with GoAway and a jittered retry hint, then 1001 (WebSocket) or
// Unavailable with grpc-retry-pushback-ms (gRPC).
//
// Admission (admission.go): an adaptive Limiter on handshakes in flight
// (device Hello to the origin's Welcome, whose latencies are its samples),
// another on device publishes in flight, and the staged Shedder of package
// limit, which severs sessions of the lowest priorities first and leaves
// P0 alone until its lifeboat stage.
//
// TLS (internal/tlsconf): with Config.TLS both device listeners serve TLS
// (wss and grpcs) from one certificate, reloaded when its files change,
// with session tickets under rotating keys; with OriginsConfig.TLS the
// Relay streams to the hubs are TLS, the hubs' certificates checked
// against a CA file and name, with an optional client certificate.
//
// An Edge is safe for concurrent use.
package edge
