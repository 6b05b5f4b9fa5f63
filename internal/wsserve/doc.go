// Package wsserve is the WebSocket server plumbing of corral's servers,
// shared by the hub and the edge so that a device sees the same listener,
// bounds and close codes on either: github.com/lesismal/nbio's epoll
// engine (the library wire chose by measurement, no goroutine per
// connection), a listener that reads each request head itself and hands a
// plain upgrade straight to nbio (anything else goes to net/http), an
// admission hook that refuses an upgrade with HTTP 503 and Retry-After,
// the framing checks nbio v1.6.8 does not make (unmasked, empty and
// malformed frames close with 1002 before nbio parses them), the messages
// that arrive before a connection's session is set, write pacing on the
// kernel's send queue, the closing handshake, and the kept goroutines that
// run it all (Workers).
//
// It knows nothing of the session protocol: the caller names the path,
// the subprotocols and the frame bound in Config, and decodes messages in
// its Session. A caller implements Handler (Admit, Open) and Session
// (Conn, Message, ProtocolError, Pong, Closing, Closed); most callers want
// New, then Start, Serve and, at the end, Shutdown and Stop:
//
//	srv, err := wsserve.New(cfg, handler, otherRequests)
//	if err == nil {
//		err = srv.Start()
//	}
//	go srv.Serve(ln)
//	// ... close ln, close the sessions (Conn.Close), then
//	srv.Shutdown(ctx)
//	srv.Stop()
//
// An idle connection costs the caller's session, which keeps a 24-byte
// Conn by value: wsserve adds no allocation and no goroutine per
// connection after the upgrade. The listener must yield plain TCP
// connections (nbio's poller takes nothing else): TLS goes through
// Config.TLS, whose connections nbio serves in its blocking mode, a
// goroutine per connection, with the same frame checks on the plaintext
// and the same write pacing (tls.go).
package wsserve
