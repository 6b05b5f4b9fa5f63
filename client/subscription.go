package client

import (
	"context"
	"errors"

	"github.com/corralhq/corral/wire/corralv1"
)

// Subscription is one channel whose events (its messages, gaps, resume
// results and a refusal) the client sends to a Go channel of the
// application's instead of Events; ChanSubscribe makes it. Connection
// events (connecting, connected, disconnected) stay on Events, which must
// still be drained. Safe for concurrent use.
type Subscription struct {
	// Channel is the corral channel's name.
	Channel string
	// Subscribed is the server's answer: the position, and for a resume
	// whether it recovered.
	Subscribed *corralv1.Subscribed

	c  *Client
	ch chan<- Event
}

// ChanSubscribe subscribes to channel, live when from is nil, else
// resuming after from (as SubscribeFrom), and sends the channel's events
// to ch from then on, across reconnects, in the order Events would have
// had them. The client never closes ch. A full ch stops the client reading
// from the server, as a full Events does. Nothing more is sent to ch after
// Unsubscribe, or after an EventRefused (the server no longer allows the
// channel), which is the last event ch gets.
func (c *Client) ChanSubscribe(ctx context.Context, channel string, from *corralv1.Position, ch chan<- Event) (*Subscription, error) {
	if ch == nil {
		return nil, errors.New("client: subscribe with a nil Go channel")
	}
	c.mu.Lock()
	if c.routes == nil {
		c.routes = make(map[string]chan<- Event)
	}
	c.routes[channel] = ch // before the request: a gap its answer raises goes to ch
	c.mu.Unlock()
	var s *corralv1.Subscribed
	var err error
	if from != nil {
		s, err = c.SubscribeFrom(ctx, channel, from.GetEpoch(), from.GetOffset())
	} else {
		s, err = c.Subscribe(ctx, channel)
	}
	if err != nil {
		c.unroute(channel, ch)
		return nil, err
	}
	return &Subscription{Channel: channel, Subscribed: s, c: c, ch: ch}, nil
}

// Unsubscribe stops the channel; nothing more is sent to the
// subscription's Go channel.
func (s *Subscription) Unsubscribe(ctx context.Context) error {
	s.c.unroute(s.Channel, s.ch)
	return s.c.Unsubscribe(ctx, s.Channel)
}

// Position returns the epoch and the highest offset of the channel
// delivered.
func (s *Subscription) Position() (string, uint64) { return s.c.Position(s.Channel) }

// unroute stops sending channel's events to ch, if they still go there.
func (c *Client) unroute(channel string, ch chan<- Event) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.routes[channel] == ch {
		delete(c.routes, channel)
	}
}

// destination returns where e goes: the Go channel of its channel's
// Subscription, else Events. A refusal is the last event of a route.
// Called with mu held.
func (c *Client) destination(e Event) chan<- Event {
	r := c.routes[e.Channel]
	if e.Channel == "" || r == nil {
		return c.events
	}
	if e.Kind == EventRefused {
		delete(c.routes, e.Channel)
	}
	return r
}
