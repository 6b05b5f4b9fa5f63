// Package client is the Go SDK of corral hubs (and edges): it connects
// over WebSocket or gRPC (TLS with wss:// and grpcs://) to one of the
// addresses of its URLs, a host name standing for every address it
// resolves to, picked in a random order and resolved again before every
// attempt; it subscribes, publishes, acknowledges P0 messages, and after a
// disconnect reconnects with jittered backoff above any server hint,
// resuming every channel from the last position it saw, so that the
// application gets every message once per offset (the client drops
// duplicates by offset) or one explicit gap per loss.
//
// Dial is what most callers want; Events delivers messages, gaps, resume
// results and connection changes (kinds printed by name), ChanSubscribe
// sends one channel's events to a Go channel of the caller's, and Err says why
// a client stopped for good: a *TerminalError (ErrUnauthorized,
// ErrForbidden, ErrPolicy) after one refused attempt. A Client is safe for
// concurrent use.
package client
