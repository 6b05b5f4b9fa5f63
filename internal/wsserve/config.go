package wsserve

import (
	"cmp"
	"crypto/tls"
	"errors"
	"fmt"
	"strings"
	"time"
)

// The defaults of the bounds a server's "connections" section sets, the
// same for every server that serves WebSocket devices (the hub's and the
// edge's YAML keys in brackets). A zero Config field takes them.
const (
	DefaultHandshakeTimeout = 10 * time.Second // the session's handshake timeout (session.handshake_timeout)
	DefaultHTTPReadTimeout  = 30 * time.Second // connections.http_read_timeout
	DefaultHTTPWriteTimeout = 30 * time.Second // connections.http_write_timeout
	DefaultHTTPIdleTimeout  = 60 * time.Second // connections.http_idle_timeout
	DefaultWriteTimeout     = 10 * time.Second // session.write_timeout
	DefaultCloseTimeout     = time.Second      // connections.close_timeout: the linger of Conn.Close
)

// Config is what a Server needs beside its Handler. The zero value of a
// duration takes its default; Path, Subprotocols and MaxFrameBytes are
// required.
type Config struct {
	// Path is the path of WebSocket upgrades, "/v1/ws" for corral's
	// devices. A query string is allowed.
	Path string
	// Subprotocols are the WebSocket subprotocols the server speaks, in
	// its order of preference. An upgrade that offers none of them is
	// upgraded by net/http and closed at once with 1002.
	Subprotocols []string
	// MaxFrameBytes bounds the payload of one frame and of one message:
	// nbio closes a connection that sends more with 1009.
	MaxFrameBytes int
	// HandshakeTimeout bounds nbio's upgrade (the 101 answer); the
	// session's own handshake (its first message) is the caller's.
	// Default 10s.
	HandshakeTimeout time.Duration
	// HTTPReadHeaderTimeout bounds reading a request's head, from its
	// first byte: on the listener's own path and on net/http's.
	// Default: HandshakeTimeout.
	HTTPReadHeaderTimeout time.Duration
	// HTTPReadTimeout and HTTPWriteTimeout bound one request and one
	// response on net/http; HTTPIdleTimeout a keep-alive connection's
	// wait for its next request. Upgraded connections leave net/http.
	// Defaults 30s, 30s, 60s.
	HTTPReadTimeout  time.Duration
	HTTPWriteTimeout time.Duration
	HTTPIdleTimeout  time.Duration
	// WriteTimeout is how long Conn.Write waits for a peer that reads
	// nothing before it returns ErrStalled, and how long Conn.Close waits
	// without progress for the peer to take its close frame. Default 10s.
	WriteTimeout time.Duration
	// Workers runs nbio's message handlers (in order per connection) and
	// the reading of request heads; nil: a pool of the Server's own that
	// keeps its goroutines 10s.
	Workers *Workers
	// TLS, when set, serves every connection of the listener over TLS:
	// wss, and HTTPS for what goes to net/http (tls.go). Its NextProtos
	// should offer "http/1.1". nil: plain TCP.
	TLS *tls.Config
	// Unserved, when set, is called for every upgrade answered 503 with
	// Retry-After UnservedRetryAfter because the server could not take
	// the connection onto its poller (the process out of descriptors;
	// counted when the answer was written): the caller's metric.
	Unserved func()
}

// WithDefaults returns c with its zero durations and Workers filled.
func (c Config) WithDefaults() Config {
	c.HandshakeTimeout = cmp.Or(c.HandshakeTimeout, DefaultHandshakeTimeout)
	c.HTTPReadHeaderTimeout = cmp.Or(c.HTTPReadHeaderTimeout, c.HandshakeTimeout)
	c.HTTPReadTimeout = cmp.Or(c.HTTPReadTimeout, DefaultHTTPReadTimeout)
	c.HTTPWriteTimeout = cmp.Or(c.HTTPWriteTimeout, DefaultHTTPWriteTimeout)
	c.HTTPIdleTimeout = cmp.Or(c.HTTPIdleTimeout, DefaultHTTPIdleTimeout)
	c.WriteTimeout = cmp.Or(c.WriteTimeout, DefaultWriteTimeout)
	if c.Workers == nil {
		c.Workers = NewWorkers(10 * time.Second)
	}
	return c
}

// Validate checks that the required fields are set and no bound is
// negative.
func (c Config) Validate() error {
	switch {
	case !strings.HasPrefix(c.Path, "/") || strings.ContainsAny(c.Path, "? \r\n"):
		return fmt.Errorf("wsserve: path %q is not an absolute path", c.Path)
	case len(c.Subprotocols) == 0:
		return errors.New("wsserve: no subprotocol")
	case c.MaxFrameBytes <= 0:
		return fmt.Errorf("wsserve: max frame bytes must be positive, got %d", c.MaxFrameBytes)
	}
	for _, p := range c.Subprotocols {
		if p == "" || strings.ContainsAny(p, ", \t\r\n") {
			return fmt.Errorf("wsserve: subprotocol %q is not a token", p)
		}
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{
		{"handshake timeout", c.HandshakeTimeout}, {"HTTP read header timeout", c.HTTPReadHeaderTimeout},
		{"HTTP read timeout", c.HTTPReadTimeout}, {"HTTP write timeout", c.HTTPWriteTimeout},
		{"HTTP idle timeout", c.HTTPIdleTimeout}, {"write timeout", c.WriteTimeout},
	} {
		if d.v < 0 {
			return fmt.Errorf("wsserve: %s must not be negative, got %v", d.name, d.v)
		}
	}
	return nil
}
