package edge

import (
	"context"

	"google.golang.org/protobuf/proto"

	"github.com/corralhq/corral/wire/corralv1"
)

// The replay cache's use by a session (replay.go has the cache). Every
// Message relayed to a device whose priority the cache keeps is added to
// it. A resume (Subscribe.from, in Hello or alone) asks the cache, with
// the tenant of the session's token, which the edge reads only once the
// hub has verified that token (Welcome): a resume in Hello is held back
// from the Hello and sent after Welcome as a Subscribe of the Hello's id
// (the hub answers it as it answers Hello's entries). Then:
//
//   - covered (ReplayHit): upstream goes the same Subscribe with
//     from = {E, L}, L the newest offset cached; when the hub's Subscribed
//     arrives it is forwarded, then the cached X+1 .. L, then the hub's
//     deliveries above L (any at or below L is dropped);
//   - not covered, first to ask (ReplayLead): upstream unchanged; the
//     ticket is released (Done) when the deliveries reach the hub's
//     Subscribed.position, so that identical resumes waiting for it are
//     answered from the cache, or failed on any other end;
//   - an identical resume on its way (ReplayWait): wait for it (on the
//     device's reader, or a goroutine of its own for a resume of Hello,
//     never on the Relay stream's goroutine), then as a hit or a miss.

// resumeState is a session's replay state; the session's mutex guards it
// (lock order: session.mu, then the cache's locks).
type resumeState struct {
	tenant   string                // of the token, trusted once welcomed
	deferred []*corralv1.Subscribe // Hello's resumes, sent after Welcome
	helloID  uint64
	subs     []*resumeSub // resumes in progress
}

// resumeSub is one resume in progress.
type resumeSub struct {
	channel string
	epoch   string
	from    uint64              // the device's position X
	last    uint64              // hit: deliveries at or below it are dropped
	msgs    []*corralv1.Message // hit: sent after Subscribed
	hit     bool
	ticket  *ReplayTicket // lead
	target  uint64        // lead: the hub's Subscribed.position offset
	seen    bool          // Subscribed arrived
}

func (r *resumeState) find(channel string) (int, *resumeSub) {
	for i, rs := range r.subs {
		if rs.channel == channel {
			return i, rs
		}
	}
	return -1, nil
}

// forget ends the resume of channel (unsubscribed, refused, closed): a
// leader's ticket fails, so that its waiters go upstream. s.mu is held.
func (r *resumeState) forget(channel string) {
	if i, rs := r.find(channel); rs != nil {
		rs.ticket.Fail()
		r.subs = append(r.subs[:i], r.subs[i+1:]...)
	}
}

// forgetAll ends every resume (teardown). s.mu is held.
func (r *resumeState) forgetAll() {
	for _, rs := range r.subs {
		rs.ticket.Fail()
	}
	r.subs = nil
}

// prepareHello holds the resumes of h back until Welcome and returns the
// Hello to send upstream. It runs on the reader before anything goes up.
func (s *session) prepareHello(id uint64, h *corralv1.Hello) *corralv1.Hello {
	if s.e.cache == nil {
		return h
	}
	var keep, held []*corralv1.Subscribe
	for _, sub := range h.GetSubscribe() {
		if sub.GetFrom() != nil {
			held = append(held, sub)
		} else {
			keep = append(keep, sub)
		}
	}
	s.mu.Lock()
	s.replay.tenant = tokenTenantHint(h.GetToken())
	s.replay.deferred, s.replay.helloID = held, id
	s.mu.Unlock()
	if len(held) == 0 {
		return h
	}
	h = proto.CloneOf(h)
	h.Subscribe = keep
	return h
}

// welcomed sends the resumes held back from Hello, off the Relay
// stream's goroutine (a resume may wait for an identical one).
func (s *session) welcomed() {
	s.mu.Lock()
	held, id := s.replay.deferred, s.replay.helloID
	s.replay.deferred = nil
	s.mu.Unlock()
	if len(held) == 0 {
		return
	}
	go func() {
		for _, sub := range held {
			if s.isClosing() {
				return
			}
			s.resume(&corralv1.ClientFrame{Id: id, Frame: &corralv1.ClientFrame_Subscribe{Subscribe: sub}}, sub)
		}
	}()
}

// prepareSubscribe is the reader's Subscribe: a resume asks the cache.
func (s *session) prepareSubscribe(f *corralv1.ClientFrame, sub *corralv1.Subscribe) {
	if s.e.cache == nil || sub.GetFrom() == nil {
		s.relay(f)
		return
	}
	s.resume(f, sub)
}

// resume serves one resume through the cache and sends its Subscribe
// upstream.
func (s *session) resume(f *corralv1.ClientFrame, sub *corralv1.Subscribe) {
	e := s.e
	s.mu.Lock()
	tenant := s.replay.tenant
	s.replay.forget(sub.GetChannel())
	s.mu.Unlock()
	a := e.cache.Resume(tenant, sub.GetChannel(), sub.GetFrom())
	if a.Kind == ReplayWait {
		ctx, cancel := context.WithCancel(context.Background())
		stop := context.AfterFunc(e.runCtx(), cancel)
		e.metrics.replayWaiting.Inc()
		a = a.Wait.Answer(ctx)
		e.metrics.replayWaiting.Dec()
		stop()
		cancel()
	}
	rs := &resumeSub{channel: sub.GetChannel(), epoch: sub.GetFrom().GetEpoch(), from: sub.GetFrom().GetOffset()}
	switch a.Kind {
	case ReplayHit:
		rs.hit, rs.last, rs.msgs = true, a.Last.GetOffset(), a.Messages
		up := proto.CloneOf(sub)
		up.From = &corralv1.Position{Epoch: a.Last.GetEpoch(), Offset: a.Last.GetOffset()}
		f = &corralv1.ClientFrame{Id: f.GetId(), Frame: &corralv1.ClientFrame_Subscribe{Subscribe: up}}
	case ReplayLead:
		rs.ticket = a.Ticket
	default:
		s.relay(f)
		return
	}
	s.mu.Lock()
	if s.closing {
		s.mu.Unlock()
		rs.ticket.Fail()
		return
	}
	s.replay.subs = append(s.replay.subs, rs)
	s.mu.Unlock()
	s.relay(f)
}

// replayFromUpstream takes a Subscribed or a Message of the hub on the
// Relay stream's goroutine: it feeds the cache and serves the resumes in
// progress.
func (s *session) replayFromUpstream(f *corralv1.ServerFrame) {
	e := s.e
	switch fr := f.GetFrame().(type) {
	case *corralv1.ServerFrame_Message:
		m := fr.Message
		s.mu.Lock()
		tenant := s.replay.tenant
		_, rs := s.replay.find(m.GetChannel())
		if rs != nil && rs.seen {
			switch {
			case rs.hit && m.GetEpoch() == rs.epoch && m.GetOffset() <= rs.last:
				s.mu.Unlock()
				return // the device has it from the cache
			case rs.hit && m.GetOffset() > rs.last:
				s.replay.forget(rs.channel) // caught up: live from here
			case rs.ticket != nil && m.GetOffset() >= rs.target:
				defer rs.ticket.Done(&corralv1.Position{Epoch: m.GetEpoch(), Offset: rs.target})
				s.replay.subs = deleteResume(s.replay.subs, rs)
			}
		}
		s.mu.Unlock()
		if e.cache != nil && e.cache.Caches(m.GetPriority()) {
			e.cache.Add(tenant, m)
		}
		s.push(f)
	case *corralv1.ServerFrame_Subscribed:
		sd := fr.Subscribed
		s.mu.Lock()
		_, rs := s.replay.find(sd.GetChannel())
		var msgs []*corralv1.Message
		if rs != nil {
			rs.seen = true
			pos := sd.GetPosition()
			switch {
			case rs.hit:
				msgs, rs.msgs = rs.msgs, nil
				if pos.GetEpoch() != rs.epoch || pos.GetOffset() <= rs.last {
					s.replay.subs = deleteResume(s.replay.subs, rs)
				}
			case pos.GetEpoch() != rs.epoch || !sd.GetRecovered() || pos.GetOffset() <= rs.from:
				// Nothing to catch up (or not in this epoch): the waiters
				// look at the cache now.
				rs.ticket.Done(pos)
				s.replay.subs = deleteResume(s.replay.subs, rs)
			default:
				rs.target = pos.GetOffset()
			}
		}
		s.mu.Unlock()
		if len(msgs) > 0 {
			e.metrics.replayServed.Add(float64(len(msgs))) // before the device can see them
		}
		s.push(f)
		for _, m := range msgs {
			s.push(&corralv1.ServerFrame{Frame: &corralv1.ServerFrame_Message{Message: m}})
		}
	}
}

func deleteResume(l []*resumeSub, rs *resumeSub) []*resumeSub {
	for i, v := range l {
		if v == rs {
			return append(l[:i], l[i+1:]...)
		}
	}
	return l
}
