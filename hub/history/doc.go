// Package history keeps the recent messages of hub channels so that a
// client that reconnects can ask "what did I miss?" and get the exact
// missing messages, or learn that it missed too much (a gap) and must
// resync from its source of truth.
//
// Every message of a channel gets an offset, counting up from 1 without
// holes, and the channel has an epoch: a token that changes whenever the
// channel's history was lost (the channel was silent for longer than
// Config.MetaTTL, or its store was wiped). A client position is an (epoch, offset)
// pair; Since answers with the messages after it, or Recovered=false.
//
// Two stores implement Store. Memory keeps history in the process (one hub
// only; it is the reference and the fast path of tests). JetStream keeps it
// in a NATS JetStream stream whose MaxAge is the window, so history survives
// a hub restart and every hub of a fleet hands out the same offsets: offsets
// are assigned with JetStream's per-subject optimistic concurrency, not by a
// protocol of our own.
//
// A channel's messages last the window; its metadata (epoch and last
// offset) lasts Config.MetaTTL (24 hours by default) after its newest
// message. A channel idle for longer than the window therefore keeps its
// epoch: a client resuming at the last offset is recovered with no message,
// and the next message continues the offsets. Once the metadata too has aged
// out, the channel starts over with a new epoch at offset 1, and a client
// resuming from the old epoch gets a gap.
package history
