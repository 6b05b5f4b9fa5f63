// Package fleet runs a whole corral fabric on one machine, in process: a
// NATS cluster (embedded nats-servers joined by routes, clustered
// JetStream), `authdns` serving the origin name, hubs on their own
// loopback addresses sharing history over JetStream, and edges that
// resolve the origin name and relay their devices to the hubs, with the
// live controls (KillHub, PauseHub, SetPolicy, DropSessions) and Stats.
// The fabric's end-to-end tests and `corral up` build on it.
//
// Parts run in process because that is the simplest way to start, watch
// and stop them together; a part that must be killed as a process would
// be (a kill -9 demonstration) or that needs its own file-descriptor budget
// is its own command's process instead (see README.md).
package fleet
