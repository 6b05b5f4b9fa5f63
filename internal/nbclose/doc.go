// Package nbclose closes nbio connections on their poller goroutine.
//
// nbio's poller takes a batch of events from epoll_wait (kqueue on the
// BSDs) and then handles them one by one, finding each event's connection
// by its descriptor number. A connection closed by another goroutine while
// a batch is being handled frees its number at once; the next accepted or
// dialled connection can get that number and be registered before the
// poller reaches the closed connection's event; the stale event (the old
// peer's FIN: EPOLLRDHUP) is then taken for the new connection, which nbio
// closes with EOF before its first byte. Under CPU load, with handlers on
// worker goroutines, this cut fresh hub sessions without a close frame
// (about 5 dials in 4,000, internal/wsserve's "known problem" until this
// package).
//
// Close avoids it by leaving the close to the poller: it shuts the socket
// down (shutdown(2), both ways), which sends the FIN and makes the socket
// report end of file; the poller then closes the connection while it
// handles that event, so a descriptor number is only ever freed between
// the events that name it. This is the fix of the same bug in libre's
// epoll loop (creytiv/re pull request 266 cancels the pending events
// instead); nbio has no such hook, and its poller loop is not ours to
// change.
package nbclose
