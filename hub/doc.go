// Package hub is corral's origin server: it holds client sessions over
// WebSocket (subprotocols corral.v1.proto and corral.v1.json on /v1/ws) and
// gRPC (corral.v1.Corral/Connect), delivers channel messages, answers
// "what did I miss?" from a replay window, and takes publishes from
// backends over gRPC, HTTP (POST /v1/publish) and plain NATS.
//
// The shape is the one of every corral server: Config -> Validate -> New
// (no I/O, no goroutine) -> Run (blocks) -> Shutdown (drains), with Addr,
// GRPCAddr and Ready.
//
// Channels live in the namespace of a tenant (the tenant of the session's
// token): a channel "chat.1" of tenant "acme" is "acme.chat.1" in history
// and on NATS. Every message gets an offset in its channel from the history
// store (package hub/history); the hub then announces it on the NATS
// subject corral.fanout.<tenant>.<channel>, and every hub with local
// subscribers hands it to them. A hub that sees a hole in the offsets it
// received (NATS dropped or reordered a fan-out message) fills it from
// history before handing out the next message, so subscribers get every
// offset once, in order.
//
// Slow consumers: each session has an outbound queue bounded in bytes. When
// it is full, queued P2 messages are dropped first, then P1, each replaced
// by a Gap frame; a P0 message that cannot be queued closes the session
// with 4000 (slow consumer) and the client resumes from history.
//
// Overload: an Overload policy (*limit.Shedder) admits or rejects new
// sessions by priority (1013 with a retry hint) and says how many open
// sessions of each priority to sever (GoAway, then 1001 with the hint).
// Shutdown drains: GoAway to every session at a bounded rate with
// jittered retry hints, then exit when empty or at the deadline.
package hub
