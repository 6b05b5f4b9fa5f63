// Package natsutil connects a corral server to NATS, the distributed engine
// of the fabric: either an embedded nats-server running inside the process
// (the default: nothing to install, and no port is opened unless one is
// asked for) or an external NATS server or cluster named by URL.
//
// Connect is what most callers want: it starts the embedded server when
// Config.URL is empty, connects a client to it (in process, without a
// socket), and opens JetStream. EnsureStream creates or updates a JetStream
// stream. StartCluster runs several embedded servers joined by routes, for
// tests and for the local fabric of `corral up`.
//
// The package imports nothing of corral.
package natsutil
