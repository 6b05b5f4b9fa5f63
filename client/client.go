package client

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/corralhq/corral/backoff"
	"github.com/corralhq/corral/wire"
	"github.com/corralhq/corral/wire/corralv1"
)

// ErrClosed is returned by calls on a closed Client.
var ErrClosed = errors.New("client: closed")

// EventKind says what an Event carries. Its String is the name of the
// kind ("connecting", "connected", ...).
type EventKind uint8

// The kinds of Event.
const (
	// EventConnecting: a connection attempt to Addr starts, Dial's as
	// well as every reconnection's (Dial's events wait until it returns:
	// they are the first ones Events delivers).
	EventConnecting EventKind = iota + 1
	// EventConnected: a session is up (Welcome received); Addr and
	// SessionID are set.
	EventConnected
	// EventDisconnected: the session ended, or an attempt failed; Close
	// says why. RetryAt is when the next attempt starts; it is zero when
	// the client stops (Err then says why, or Close was called).
	EventDisconnected
	// EventMessage: a channel message, never one whose offset was already
	// delivered in its epoch: the unacknowledged P0 messages a resume
	// brings again are dropped here (counted by Duplicates).
	EventMessage
	// EventGap: messages of Channel that will not come: Gap says which
	// (from_offset to to_offset of epoch). It comes once per loss: for
	// messages the server dropped on a slow session, or for a resume that
	// could not recover (Gap.reason "resume": the offsets missed while
	// away; resync the channel from its source of truth).
	EventGap
	// EventResumed: after a reconnect, a channel's resume result
	// (Subscribed). Recovered false means messages were lost; an EventGap
	// for the channel precedes it. (The answer to the application's own
	// SubscribeFrom is SubscribeFrom's result, not an EventResumed; a loss
	// it reports comes as an EventGap too.)
	EventResumed
	// EventRefused: after a reconnect, the server refused to resubscribe
	// Channel (Close says why, for example 4005 when the new token no
	// longer allows it). The session stays up; the client has dropped the
	// channel from the ones it resubscribes.
	EventRefused
)

var eventNames = [...]string{
	EventConnecting: "connecting", EventConnected: "connected", EventDisconnected: "disconnected",
	EventMessage: "message", EventGap: "gap", EventResumed: "resumed", EventRefused: "refused",
}

// String returns the name of k: connecting, connected, disconnected,
// message, gap, resumed or refused.
func (k EventKind) String() string {
	if int(k) < len(eventNames) && eventNames[k] != "" {
		return eventNames[k]
	}
	return fmt.Sprintf("event(%d)", uint8(k))
}

// Event is what Events delivers.
type Event struct {
	Kind      EventKind
	Addr      string // the address (resolved) of the attempt or session
	Channel   string // EventGap, EventResumed, EventRefused, EventMessage
	SessionID string
	Close     wire.Close
	// RetryAt is when the next attempt starts (EventDisconnected); zero
	// when the client stops.
	RetryAt    time.Time
	Message    *corralv1.Message
	Gap        *corralv1.Gap
	Subscribed *corralv1.Subscribed
}

// String describes e in a line, for logs.
func (e Event) String() string {
	switch e.Kind {
	case EventConnecting:
		return "connecting to " + e.Addr
	case EventConnected:
		return "connected to " + e.Addr + " (session " + e.SessionID + ")"
	case EventDisconnected:
		if e.RetryAt.IsZero() {
			return fmt.Sprintf("disconnected: %v; stopped", e.Close)
		}
		return fmt.Sprintf("disconnected: %v; next attempt in %v", e.Close, time.Until(e.RetryAt).Round(time.Millisecond))
	case EventMessage:
		return fmt.Sprintf("message %s #%d", e.Channel, e.Message.GetOffset())
	case EventGap:
		return fmt.Sprintf("gap %s: offsets %d to %d lost (%s)", e.Channel, e.Gap.GetFromOffset(), e.Gap.GetToOffset(), e.Gap.GetReason())
	case EventResumed:
		return fmt.Sprintf("resumed %s at offset %d (recovered %v)", e.Channel, e.Subscribed.GetPosition().GetOffset(), e.Subscribed.GetRecovered())
	case EventRefused:
		return fmt.Sprintf("refused %s: %v", e.Channel, e.Close)
	}
	return e.Kind.String()
}

// chanState is the client's view of one subscribed channel.
type chanState struct {
	epoch    string
	received uint64   // highest offset delivered to the application
	unacked  []uint64 // P0 offsets delivered and not acknowledged, ascending
}

// resumeFrom is where a resume starts: before the oldest unacknowledged P0
// message, else after the newest message received.
func (s *chanState) resumeFrom() *corralv1.Position {
	if s.epoch == "" {
		return nil
	}
	off := s.received
	if len(s.unacked) > 0 {
		off = s.unacked[0] - 1
	}
	return &corralv1.Position{Epoch: s.epoch, Offset: off}
}

// Client is a connection to a corral hub that survives disconnects. Create
// it with Dial; it is safe for concurrent use. Events must be drained.
type Client struct {
	cfg    Config
	events chan Event // made once Dial's round is over (see early)
	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{}

	mu        sync.Mutex
	cond      *sync.Cond // signalled when cur changes
	cur       conn
	addr      string
	sessionID string
	next      int // index into cfg.Addrs of the next attempt
	nextID    uint64
	pending   map[uint64]chan *corralv1.ServerFrame
	subs      map[string]*chanState
	final     error
	dups      uint64 // messages dropped as already delivered
	last      string // the endpoint of the last attempt: tried last in the next round
	dialing   bool   // Dial's round runs: events wait in early
	early     []Event
	hints     *corralv1.ServerHints   // of the last Welcome: its reconnect envelope
	routes    map[string]chan<- Event // channels whose events go to a Subscription's Go channel
}

// Dial connects to one of cfg.Addrs (the first that answers, starting from
// a random one) and returns once a session is up. The client then keeps the
// session alive until Close or ctx ends.
func Dial(ctx context.Context, cfg Config) (*Client, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	cfg.TLS = withSessionCache(cfg.TLS) // one cache for the Client's reconnects
	cctx, cancel := context.WithCancel(context.Background())
	c := &Client{
		cfg: cfg, ctx: cctx, cancel: cancel, done: make(chan struct{}),
		next: rand.IntN(len(cfg.Addrs)), pending: make(map[uint64]chan *corralv1.ServerFrame), subs: make(map[string]*chanState),
	}
	c.cond = sync.NewCond(&c.mu)
	if cfg.InOrder {
		c.next = 0
	}
	if _, err := newRetry(cfg, nil, cfg.rand); err != nil {
		cancel()
		return nil, fmt.Errorf("client: reconnect delays: %w", err)
	}
	// Until Dial returns nobody reads Events: the events of its round
	// (connecting, connected) wait in early, then go first into an Events
	// channel made with room for them on top of EventBuffer, so that they
	// neither block Dial nor take the room the session's events have.
	c.dialing = true
	cn, err := c.connectRound(ctx)
	if err != nil {
		cancel()
		if te := terminal(err); te != nil {
			return nil, te
		}
		return nil, err
	}
	c.mu.Lock()
	c.dialing = false
	c.events = make(chan Event, cfg.EventBuffer+len(c.early))
	for _, e := range c.early {
		c.events <- e
	}
	c.early = nil
	c.mu.Unlock()
	go c.run(cn)
	return c, nil
}

// schedule returns the reconnect schedule for the session that just
// started: the configured one, with the base and cap the server's
// Welcome advertised (hints.reconnect_base_ms, reconnect_cap_ms) in place
// of the client's when set.
func (c *Client) schedule() *backoff.Backoff {
	c.mu.Lock()
	h := c.hints
	c.mu.Unlock()
	b, err := newRetry(c.cfg, h, c.cfg.rand)
	if err != nil {
		// Validated in Dial; server hints only move the base and cap,
		// which newRetry keeps in order.
		b, _ = newRetry(c.cfg, nil, c.cfg.rand)
	}
	return b
}

// connectRound resolves every address again and tries the endpoints in
// the order of order() until a session is up. It goes on to the next
// endpoint when one fails, and stops at a terminal refusal, at a refusal
// with a retry hint (the hint decides when to come back), or when ctx
// ends.
func (c *Client) connectRound(ctx context.Context) (conn, error) {
	targets := make([]target, len(c.cfg.Addrs))
	for i, a := range c.cfg.Addrs {
		t, err := parseAddr(a, c.cfg.Transport)
		if err != nil {
			return nil, err
		}
		targets[i] = t
	}
	rctx, cancel := context.WithTimeout(ctx, c.cfg.DialTimeout)
	eps, err := resolve(rctx, c.cfg.Resolve, targets)
	cancel()
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	start := c.next
	c.mu.Unlock()
	var errs []error
	c.mu.Lock()
	last := c.last
	c.mu.Unlock()
	for _, ep := range order(eps, c.cfg.InOrder, start, last) {
		c.mu.Lock()
		c.next++
		c.last = ep.String()
		c.mu.Unlock()
		cn, err := c.connect(ctx, ep)
		if err == nil {
			return cn, nil
		}
		var cl wire.Close
		errors.As(err, &cl)
		if !backoff.TryNext(terminal(err) == nil, cl.RetryAfter) || ctx.Err() != nil {
			// Refused for good, or told when to come back: no other
			// address now.
			return nil, err
		}
		errs = append(errs, err)
	}
	return nil, errors.Join(errs...)
}

// Err returns why the client stopped: nil while it runs or after Close,
// else a *TerminalError (errors.Is ErrUnauthorized, ErrForbidden or
// ErrPolicy). Read it once Events is closed.
func (c *Client) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if te, ok := c.final.(*TerminalError); ok {
		return te
	}
	return nil
}

// Events returns the channel of events. It is closed after Close.
func (c *Client) Events() <-chan Event { return c.events }

// Addr returns the address of the current session ("" while disconnected).
func (c *Client) Addr() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.addr
}

// SessionID returns the id of the current session.
func (c *Client) SessionID() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.sessionID
}

// connect dials ep and runs the Hello/Welcome exchange, resubscribing
// every channel from its resume position.
func (c *Client) connect(ctx context.Context, ep endpoint) (conn, error) {
	a := ep.String()
	c.emit(Event{Kind: EventConnecting, Addr: a})
	c.mu.Lock()
	hello := &corralv1.Hello{Token: c.cfg.Token, Priority: wire.PriorityOfRank(c.cfg.Priority.Rank()), Client: c.cfg.Name, PreviousSessionId: c.sessionID}
	names := make([]string, 0, len(c.subs))
	for name := range c.subs {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		hello.Subscribe = append(hello.Subscribe, &corralv1.Subscribe{Channel: name, From: c.subs[name].resumeFrom()})
	}
	c.mu.Unlock()

	dctx, cancel := context.WithTimeout(ctx, c.cfg.DialTimeout)
	defer cancel()
	cn, err := dial(dctx, ep, c.cfg.TLS, c.cfg.JSON)
	if err != nil {
		return nil, err
	}
	if err := cn.send(&corralv1.ClientFrame{Id: 1, Frame: &corralv1.ClientFrame_Hello{Hello: hello}}); err != nil {
		cn.close()
		return nil, fmt.Errorf("client: hello to %s: %w", a, err)
	}
	type result struct {
		f   *corralv1.ServerFrame
		err error
	}
	rc := make(chan result, 1)
	go func() {
		f, err := cn.recv()
		rc <- result{f, err}
	}()
	var r result
	select {
	case r = <-rc:
	case <-dctx.Done():
		cn.close()
		return nil, fmt.Errorf("client: no welcome from %s: %w", a, dctx.Err())
	}
	if r.err != nil {
		cn.close()
		return nil, r.err
	}
	w := r.f.GetWelcome()
	if w == nil {
		cn.close()
		if cl, ok := wire.CloseFromFrame(r.f); ok { // an Error or a GoAway, with its hint and window
			return nil, cl
		}
		return nil, fmt.Errorf("client: %s answered hello with %T", a, r.f.GetFrame())
	}
	if c.cfg.afterWelcome != nil {
		c.cfg.afterWelcome(c)
	}
	c.mu.Lock()
	if c.final != nil {
		// Close (or a terminal stop) ran while this attempt waited for
		// its Welcome: it found no session to close, so close this one
		// here (under mu, which stop takes to set final before Close
		// looks at cur) rather than leave run reading it for ever.
		c.mu.Unlock()
		cn.close()
		return nil, ErrClosed
	}
	c.cur, c.addr, c.sessionID, c.hints = cn, a, w.GetSessionId(), w.GetHints()
	c.cond.Broadcast()
	c.mu.Unlock()
	c.emit(Event{Kind: EventConnected, Addr: a, SessionID: w.GetSessionId()})
	return cn, nil
}

// run reads the session's frames, and reconnects when it ends, waiting
// retry.NextAfter (the next delay of the session's schedule, or one drawn
// above the server's retry hint: package backoff's rule) before each
// attempt.
func (c *Client) run(cn conn) {
	defer close(c.done)
	defer close(c.events)
	for {
		retry := c.schedule()
		cl := c.read(cn)
		cn.close()
		c.mu.Lock()
		c.cur, c.addr = nil, ""
		for id, ch := range c.pending {
			close(ch)
			delete(c.pending, id)
		}
		c.mu.Unlock()
		if c.ctx.Err() != nil {
			c.emit(Event{Kind: EventDisconnected, Close: cl})
			c.stop(ErrClosed)
			return
		}
		if !cl.Code.Retryable() {
			c.emit(Event{Kind: EventDisconnected, Close: cl})
			c.stop(&TerminalError{Close: cl})
			return
		}
		wait, within := cl.RetryAfter, cl.RetryWithin
		for {
			d := retry.NextAfterWithin(wait, within)
			c.emit(Event{Kind: EventDisconnected, Close: cl, RetryAt: time.Now().Add(d)})
			select {
			case <-c.ctx.Done():
				c.stop(ErrClosed)
				return
			case <-time.After(d):
			}
			var err error
			cn, err = c.connectRound(c.ctx)
			if err == nil {
				break // a new schedule for the new session
			}
			if te := terminal(err); te != nil {
				// Refused for good after one attempt: say so and stop.
				c.emit(Event{Kind: EventDisconnected, Close: te.Close})
				c.stop(te)
				return
			}
			if c.ctx.Err() != nil {
				c.stop(ErrClosed)
				return
			}
			cl = wire.CloseOf(err)
			wait, within = 0, 0
			var cerr wire.Close
			if errors.As(err, &cerr) {
				wait, within = cerr.RetryAfter, cerr.RetryWithin
			}
		}
	}
}

func (c *Client) stop(err error) {
	c.mu.Lock()
	if c.final == nil {
		c.final = err
	}
	c.cond.Broadcast()
	c.mu.Unlock()
	c.cancel()
}

// read handles frames until the connection ends, and returns why it ended.
func (c *Client) read(cn conn) wire.Close {
	// said is the close the server announced (GoAway, or an Error frame
	// not answering a request) before the connection ended.
	var said *wire.Close
	for {
		f, err := cn.recv()
		if err != nil {
			cl := wire.CloseOf(err)
			if said != nil {
				// The server said why before closing; the transport may
				// have lost it (a gRPC stream cut before its status).
				cl.Code = said.Code
				if cl.RetryAfter == 0 {
					cl.RetryAfter, cl.RetryWithin = said.RetryAfter, said.RetryWithin
				}
			}
			return cl
		}
		if id := f.GetId(); id != 0 && f.GetPing() == nil {
			// A reply names its request's id; a server's Ping carries an
			// id of the server's own, which may equal a pending one.
			c.mu.Lock()
			ch := c.pending[id]
			delete(c.pending, id)
			c.mu.Unlock()
			if ch != nil {
				var gap *corralv1.Gap
				if s := f.GetSubscribed(); s != nil {
					// The answer to the application's Subscribe or
					// SubscribeFrom: a resume that could not recover is
					// one EventGap, as in a Hello; it follows the answer,
					// so that a caller reading Events after the call
					// never blocks the reply.
					gap = c.noteSubscribed(s)
				}
				ch <- f
				if gap != nil {
					c.emit(Event{Kind: EventGap, Channel: gap.GetChannel(), Gap: gap})
				}
				continue
			}
		}
		switch fr := f.GetFrame().(type) {
		case *corralv1.ServerFrame_Message:
			c.onMessage(cn, fr.Message)
		case *corralv1.ServerFrame_Gap:
			c.emit(Event{Kind: EventGap, Channel: fr.Gap.GetChannel(), Gap: fr.Gap})
		case *corralv1.ServerFrame_Subscribed:
			if g := c.noteSubscribed(fr.Subscribed); g != nil {
				c.emit(Event{Kind: EventGap, Channel: g.GetChannel(), Gap: g})
			}
			c.emit(Event{Kind: EventResumed, Channel: fr.Subscribed.GetChannel(), Subscribed: fr.Subscribed})
		case *corralv1.ServerFrame_GoAway:
			if cl, ok := wire.CloseFromFrame(f); ok {
				said = &cl
			}
		case *corralv1.ServerFrame_Ping:
			_ = cn.send(&corralv1.ClientFrame{Id: f.GetId(), Frame: &corralv1.ClientFrame_Pong{Pong: &corralv1.Pong{Payload: fr.Ping.GetPayload()}}})
		case *corralv1.ServerFrame_Error:
			cl, _ := wire.CloseFromFrame(f)
			if ch := fr.Error.GetChannel(); ch != "" {
				// A refused entry of the Hello's resubscriptions: only
				// that channel ends, not the session.
				c.mu.Lock()
				delete(c.subs, ch)
				c.mu.Unlock()
				c.emit(Event{Kind: EventRefused, Channel: ch, Close: cl})
				continue
			}
			if f.GetId() == 0 {
				// An Error that answers no request explains the close
				// that follows; remember it in case the transport drops
				// the reason.
				said = &cl
			}
		}
	}
}

// noteSubscribed moves a channel to the position a (re)subscription
// reported when the resume could not recover, or when it started live. A
// resume that could not recover returns the Gap to surface: the offsets
// after the resume position up to the new one (of the new epoch when it
// changed). The channel then continues from the new position, so the
// same loss is never reported twice.
func (c *Client) noteSubscribed(s *corralv1.Subscribed) *corralv1.Gap {
	c.mu.Lock()
	defer c.mu.Unlock()
	st := c.subs[s.GetChannel()]
	if st == nil || s.GetRecovered() {
		return nil
	}
	var gap *corralv1.Gap
	if s.GetResumed() {
		from := st.resumeFrom().GetOffset() + 1
		pos := s.GetPosition()
		if pos.GetEpoch() != st.epoch {
			from = 1
		}
		if pos.GetOffset() >= from || pos.GetEpoch() != st.epoch {
			gap = &corralv1.Gap{Channel: s.GetChannel(), Epoch: pos.GetEpoch(), FromOffset: from, ToOffset: pos.GetOffset(), Reason: "resume"}
		}
	}
	st.epoch, st.received, st.unacked = s.GetPosition().GetEpoch(), s.GetPosition().GetOffset(), nil
	return gap
}

func (c *Client) onMessage(cn conn, m *corralv1.Message) {
	c.mu.Lock()
	st := c.subs[m.GetChannel()]
	if st == nil {
		c.mu.Unlock()
		return
	}
	p0 := m.GetPriority() == corralv1.Priority_PRIORITY_P0
	if m.GetEpoch() == st.epoch && m.GetOffset() <= st.received {
		// Already delivered: an unacknowledged P0 message a resume sent
		// again, or an overlap of recovered and live messages.
		c.dups++
		c.mu.Unlock()
		return
	}
	if m.GetEpoch() != st.epoch {
		st.epoch, st.unacked = m.GetEpoch(), nil
	}
	st.received = m.GetOffset()
	if p0 && c.cfg.ManualAck {
		st.unacked = append(st.unacked, m.GetOffset())
	}
	c.mu.Unlock()
	if p0 && !c.cfg.ManualAck {
		_ = cn.send(&corralv1.ClientFrame{Frame: &corralv1.ClientFrame_Ack{Ack: &corralv1.Ack{Channel: m.GetChannel(), Epoch: m.GetEpoch(), Offset: m.GetOffset()}}})
	}
	c.emit(Event{Kind: EventMessage, Channel: m.GetChannel(), Message: m})
}

// emit delivers e on Events, or on the Go channel of its channel's
// Subscription, waiting for room (back-pressure); during Dial it keeps e
// in early. Never called with mu held.
func (c *Client) emit(e Event) {
	c.mu.Lock()
	if c.dialing {
		c.early = append(c.early, e)
		c.mu.Unlock()
		return
	}
	to := c.destination(e)
	c.mu.Unlock()
	select {
	case to <- e:
	case <-c.ctx.Done():
	}
}

// request sends f with a fresh id and waits for the reply, waiting for a
// session first if there is none.
func (c *Client) request(ctx context.Context, f *corralv1.ClientFrame) (*corralv1.ServerFrame, error) {
	for {
		c.mu.Lock()
		for c.cur == nil && c.final == nil && ctx.Err() == nil {
			stop := context.AfterFunc(ctx, func() {
				c.mu.Lock()
				c.cond.Broadcast()
				c.mu.Unlock()
			})
			c.cond.Wait()
			stop()
		}
		if c.final != nil {
			c.mu.Unlock()
			return nil, ErrClosed
		}
		if err := ctx.Err(); err != nil {
			c.mu.Unlock()
			return nil, err
		}
		cn := c.cur
		c.nextID++
		id := c.nextID + 1 // 1 is the Hello
		ch := make(chan *corralv1.ServerFrame, 1)
		c.pending[id] = ch
		c.mu.Unlock()
		f.Id = id
		if err := cn.send(f); err != nil {
			c.mu.Lock()
			delete(c.pending, id)
			c.mu.Unlock()
			continue // the reader notices the broken connection
		}
		select {
		case r, ok := <-ch:
			if !ok {
				continue // disconnected before the reply: retry on the next session
			}
			if r.GetError() != nil {
				cl, _ := wire.CloseFromFrame(r)
				return nil, cl
			}
			return r, nil
		case <-ctx.Done():
			c.mu.Lock()
			delete(c.pending, id)
			c.mu.Unlock()
			return nil, ctx.Err()
		}
	}
}

// Subscribe subscribes to channel, live (from the next message), and
// returns the server's answer. After a reconnect the client resubscribes by
// itself, resuming from the last message received.
func (c *Client) Subscribe(ctx context.Context, channel string) (*corralv1.Subscribed, error) {
	c.mu.Lock()
	if c.subs[channel] == nil {
		c.subs[channel] = &chanState{}
	}
	from := c.subs[channel].resumeFrom()
	c.mu.Unlock()
	r, err := c.request(ctx, &corralv1.ClientFrame{Frame: &corralv1.ClientFrame_Subscribe{Subscribe: &corralv1.Subscribe{Channel: channel, From: from}}})
	if err != nil {
		c.mu.Lock()
		if st := c.subs[channel]; st != nil && st.epoch == "" {
			delete(c.subs, channel)
		}
		c.mu.Unlock()
		return nil, err
	}
	return r.GetSubscribed(), nil
}

// SubscribeFrom subscribes to channel resuming after (epoch, offset), a
// position the application kept (from Position, or from a Message). The
// answer's Recovered says whether every message after it follows.
func (c *Client) SubscribeFrom(ctx context.Context, channel, epoch string, offset uint64) (*corralv1.Subscribed, error) {
	st := &chanState{epoch: epoch, received: offset}
	c.mu.Lock()
	c.subs[channel] = st
	c.mu.Unlock()
	r, err := c.request(ctx, &corralv1.ClientFrame{Frame: &corralv1.ClientFrame_Subscribe{Subscribe: &corralv1.Subscribe{
		Channel: channel, From: &corralv1.Position{Epoch: epoch, Offset: offset},
	}}})
	if err != nil {
		c.mu.Lock()
		if c.subs[channel] == st {
			delete(c.subs, channel) // refused: not resubscribed after a reconnect
		}
		c.mu.Unlock()
		return nil, err
	}
	return r.GetSubscribed(), nil
}

// Position returns the epoch and the highest offset of channel delivered
// to the application.
func (c *Client) Position(channel string) (string, uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if st := c.subs[channel]; st != nil {
		return st.epoch, st.received
	}
	return "", 0
}

// Unsubscribe stops the channel.
func (c *Client) Unsubscribe(ctx context.Context, channel string) error {
	c.mu.Lock()
	delete(c.subs, channel)
	c.mu.Unlock()
	_, err := c.request(ctx, &corralv1.ClientFrame{Frame: &corralv1.ClientFrame_Unsubscribe{Unsubscribe: &corralv1.Unsubscribe{Channel: channel}}})
	return err
}

// Publish sends data on channel with priority p and waits for the server's
// answer. id, when not empty, lets the server recognise a retry of the same
// publish (Published.Duplicate).
func (c *Client) Publish(ctx context.Context, channel string, p Priority, data []byte, id string) (*corralv1.Published, error) {
	r, err := c.request(ctx, &corralv1.ClientFrame{Frame: &corralv1.ClientFrame_Publish{Publish: &corralv1.Publish{
		Channel: channel, Priority: wire.PriorityOfRank(p.Rank()), Data: data, ClientMessageId: id,
	}}})
	if err != nil {
		return nil, err
	}
	return r.GetPublished(), nil
}

// Duplicates returns how many messages the client dropped because their
// offset had already been delivered: after a resume, the unacknowledged P0
// messages the hub sends again, and overlaps of recovered and live
// messages.
func (c *Client) Duplicates() uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.dups
}

// Ack acknowledges every P0 message of channel up to offset (with
// ManualAck; otherwise the client acknowledges by itself). Until then a
// resume, on whichever hub, starts before the oldest unacknowledged P0
// message, so the hub sends it again (the client does not deliver it
// twice). An application that keeps its own position durably should keep
// the acknowledged offset and resume from it with SubscribeFrom.
func (c *Client) Ack(channel, epoch string, offset uint64) error {
	c.mu.Lock()
	cn := c.cur
	if st := c.subs[channel]; st != nil && st.epoch == epoch {
		i, _ := slices.BinarySearch(st.unacked, offset+1)
		st.unacked = st.unacked[i:]
	}
	c.mu.Unlock()
	if cn == nil {
		return nil // the resume will start after the acknowledged offsets
	}
	return cn.send(&corralv1.ClientFrame{Frame: &corralv1.ClientFrame_Ack{Ack: &corralv1.Ack{Channel: channel, Epoch: epoch, Offset: offset}}})
}

// Close ends the session and stops reconnecting. Events is closed once the
// client has stopped.
func (c *Client) Close() error {
	c.stop(ErrClosed)
	c.mu.Lock()
	cn := c.cur
	c.mu.Unlock()
	if cn != nil {
		cn.close()
	}
	go func() {
		for range c.events { // drain so that run can finish
		}
	}()
	<-c.done
	return nil
}
