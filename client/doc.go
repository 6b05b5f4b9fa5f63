// Package client is a minimal Go client of corral hubs (and edges): it
// connects to one of several addresses over WebSocket or gRPC, subscribes,
// publishes, acknowledges P0 messages, and after a disconnect reconnects,
// to the next address, resuming every channel from the last position it
// saw, so that the application gets every message exactly once per offset
// (the client drops duplicates by offset) or an explicit gap.
//
// Dial is what most callers want; Events delivers messages, gaps, resume
// results and connection changes. The full SDK (DNS resolution of every
// address, the backoff policies of package backoff, server hints, a
// JavaScript twin) is a later step; this client is what the hub's tests and
// the examples use.
package client
