package client

import (
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net/netip"
	"time"

	"github.com/corralhq/corral/backoff"
	"github.com/corralhq/corral/internal/tlssession"
)

// Config says where and how a Client connects. Addrs and Token are
// required; the other zero fields take defaults.
type Config struct {
	// Addrs are the servers: ws://host:port[/path] and wss:// (WebSocket;
	// no path means /v1/ws), grpc://host:port and grpcs:// (gRPC), or a
	// bare host:port carried by Transport. A host name stands for every A
	// and AAAA address it resolves to, resolved again before every
	// connection attempt. Each attempt tries the addresses in a random
	// order (the first address is no more likely than any other), the
	// next one at once when one cannot be reached.
	Addrs []string
	// InOrder tries the addresses in the order given, starting after the
	// one tried last, instead of in a random order (for tests).
	InOrder bool
	// Transport is "ws" (default) or "grpc" for bare host:port addresses;
	// a URL scheme overrides it.
	Transport string
	// TLS configures wss:// and grpcs:// connections: RootCAs for a private
	// CA, InsecureSkipVerify for tests only. nil uses the system roots.
	// ServerName defaults to the host of the address. Without a
	// ClientSessionCache the Client keeps one of its own, so that its
	// reconnects resume their TLS sessions instead of repeating the full
	// handshake. Tickets are kept per address dialled (the cache's keys
	// are the server name prefixed by the address), since the servers
	// behind one name each issue tickets only they can open.
	TLS *tls.Config
	// Resolve returns the addresses of a host name. nil uses the system
	// resolver (every A and AAAA record).
	Resolve func(ctx context.Context, host string) ([]netip.Addr, error)
	// JSON selects the corral.v1.json WebSocket subprotocol instead of
	// corral.v1.proto.
	JSON bool
	// Token is the session JWT.
	Token string
	// Priority is the session priority rank: 0 (P0), 1 or 2 (default 2;
	// set PriorityP0 for P0, since the zero value means P2).
	Priority Priority
	// ManualAck leaves the acknowledgement of P0 messages to the caller
	// (Ack); by default they are acknowledged as soon as they are received.
	// Unacknowledged P0 messages are delivered again after a resume.
	ManualAck bool
	// ReconnectMin and ReconnectMax bound the jittered reconnect delay.
	// Defaults 50ms and 5s. A server's retry hint raises the delay; the
	// base and cap a server's Welcome advertises (hints.reconnect_base_ms,
	// reconnect_cap_ms) replace them when set.
	ReconnectMin, ReconnectMax time.Duration
	// Backoff, when its Policy is set ("full", "equal", "decorrelated",
	// "grpc", "exponential" or "none", package backoff), is the reconnect
	// schedule in place of ReconnectMin and ReconnectMax, with backoff's
	// defaults for the fields left zero. A server's retry hint is the floor
	// of the next delay either way (backoff's hint code), and a Welcome's
	// reconnect base and cap replace Base and Cap.
	Backoff backoff.Config
	// DialTimeout bounds one connection attempt, Hello to Welcome included.
	// Default 5s.
	DialTimeout time.Duration
	// EventBuffer is the capacity of the Events channel. Default 1024. When
	// it is full the client stops reading from the server (back-pressure).
	EventBuffer int
	// Name is sent in Hello.client. Default "corral-go-client".
	Name string

	// rand draws the reconnect delays (nil: the process-wide generator);
	// tests seed it.
	rand backoff.Rand
	// afterWelcome, when set, runs between an attempt's Welcome and the
	// session taking its place (tests: a Close in that gap).
	afterWelcome func(*Client)
}

// Priority is a session or message priority rank for the client; the zero
// value is P2.
type Priority uint8

// The priorities. PriorityDefault (the zero value) means P2.
const (
	PriorityDefault Priority = iota
	PriorityP0
	PriorityP1
	PriorityP2
)

// Rank returns 0, 1 or 2.
func (p Priority) Rank() int {
	switch p {
	case PriorityP0:
		return 0
	case PriorityP1:
		return 1
	}
	return 2
}

// DefaultConfig returns the defaults of every field but Addrs and Token,
// which a caller must set: WebSocket, P2, reconnects jittered between 50 ms
// and 5 s, a 5 s dial timeout, 1024 buffered events.
func DefaultConfig() Config { return Config{}.withDefaults() }

func (c Config) withDefaults() Config {
	c.ReconnectMin = cmp.Or(c.ReconnectMin, 50*time.Millisecond)
	c.ReconnectMax = cmp.Or(c.ReconnectMax, 5*time.Second)
	c.DialTimeout = cmp.Or(c.DialTimeout, 5*time.Second)
	c.EventBuffer = cmp.Or(c.EventBuffer, 1024)
	c.Name = cmp.Or(c.Name, "corral-go-client")
	c.Transport = cmp.Or(c.Transport, "ws")
	if c.Resolve == nil {
		c.Resolve = lookupIP
	}
	return c
}

// sessionCacheSize is how many servers (address and name) a Client keeps
// a TLS session ticket for.
const sessionCacheSize = 64

// withSessionCache returns the TLS configuration of one Client: tc (nil:
// the default) with a session cache of the Client's own when tc has none.
func withSessionCache(tc *tls.Config) *tls.Config {
	if tc != nil && tc.ClientSessionCache != nil {
		return tc
	}
	c := &tls.Config{MinVersion: tls.VersionTLS12}
	if tc != nil {
		c = tc.Clone()
	}
	c.ClientSessionCache = tlssession.NewCache(sessionCacheSize)
	return c
}

// Validate checks the addresses and values.
func (c Config) Validate() error {
	if len(c.Addrs) == 0 {
		return errors.New("client: no address")
	}
	for _, a := range c.Addrs {
		if _, err := parseAddr(a, c.Transport); err != nil {
			return err
		}
	}
	if c.Transport != "" && c.Transport != "ws" && c.Transport != "grpc" {
		return fmt.Errorf("client: transport %q: want ws or grpc", c.Transport)
	}
	if c.Priority > PriorityP2 {
		return fmt.Errorf("client: priority %d", c.Priority)
	}
	if c.Backoff.Policy != "" {
		if _, err := c.Backoff.WithDefaults(); err != nil {
			return fmt.Errorf("client: backoff: %w", err)
		}
	}
	if c.ReconnectMin < 0 || c.ReconnectMax < c.ReconnectMin && c.ReconnectMax != 0 || c.DialTimeout < 0 || c.EventBuffer < 0 {
		return errors.New("client: negative or inverted durations or sizes")
	}
	return nil
}
