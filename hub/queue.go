package hub

import (
	"sync"

	"github.com/corralhq/corral/hub/history"
	"github.com/corralhq/corral/wire"
	"github.com/corralhq/corral/wire/corralv1"
)

// delivery is one channel message on its way to the local subscribers of a
// channel. It is built once per message and shared by every session: the
// frame is read-only, and each wire format is encoded at most once.
type delivery struct {
	msg   history.Message
	frame *corralv1.ServerFrame
	size  int

	once [3]sync.Once // by wire.Format
	enc  [3][]byte
	err  [3]error

	relayOnce sync.Once
	relayed   []byte // frame as RelayFrame field 4 (relay.go), shared by relayed sessions
	relayErr  error
}

func newDelivery(name string, m history.Message) *delivery {
	return &delivery{
		msg: m,
		frame: &corralv1.ServerFrame{Frame: &corralv1.ServerFrame_Message{Message: &corralv1.Message{
			Channel:    name,
			Epoch:      m.Epoch,
			Offset:     m.Offset,
			Priority:   wire.PriorityOfRank(int(m.Priority)),
			Data:       m.Data,
			TimeUnixMs: m.Time.UnixMilli(),
		}}},
		size: len(m.Data) + len(name) + len(m.Epoch) + 24,
	}
}

// encoded returns the frame in c's format, encoding it on first use.
func (d *delivery) encoded(c *wire.Codec) ([]byte, error) {
	f := c.Format()
	d.once[f].Do(func() { d.enc[f], d.err[f] = c.AppendServerFrame(nil, d.frame) })
	return d.enc[f], d.err[f]
}

// outItem is one frame waiting in a session's outbound queue: either a
// control frame (prio -1, never dropped) or a channel message.
type outItem struct {
	frame *corralv1.ServerFrame
	d     *delivery
	size  int
	prio  int8
}

// controlSize is what a control frame (a Gap, a reply) counts against the
// queue bound: about its encoded size.
const controlSize = 32

// outQueue is a session's outbound queue, bounded in bytes (the bound is
// the hub's, passed to each push: a session does not keep a copy). The
// zero value is an empty queue. Not safe for concurrent use: the session's
// mutex guards it. It is 32 bytes, inside every session.
type outQueue struct {
	items []outItem
	head  int32
	bytes int32 // at most the bound plus one message (at most a frame, < 2 GiB)
}

func (q *outQueue) len() int { return len(q.items) - int(q.head) }

func (q *outQueue) pop() (outItem, bool) {
	if int(q.head) == len(q.items) {
		return outItem{}, false
	}
	it := q.items[q.head]
	q.items[q.head] = outItem{}
	q.head++
	q.bytes -= int32(it.size)
	if int(q.head) == len(q.items) {
		q.items, q.head = nil, 0 // an idle session keeps no buffer
	}
	return it, true
}

func (q *outQueue) clear() {
	clear(q.items)
	q.items, q.head, q.bytes = q.items[:0], 0, 0
}

// pushControl queues a control frame; force ignores the bound (for the
// last frame before a close). It reports false when the frame does not fit.
func (q *outQueue) pushControl(f *corralv1.ServerFrame, force bool, limit int, dropped func(int8)) bool {
	if !force && !q.makeRoom(controlSize, 1, limit, dropped) {
		return false
	}
	q.items = append(q.items, outItem{frame: f, size: controlSize, prio: -1})
	q.bytes += int32(controlSize)
	return true
}

// pushMessage queues a message. When it would pass limit it drops queued P2
// messages, then P1 (never P0), replacing each with a Gap; a P1 or P2
// message that still does not fit is itself replaced by a Gap. It reports
// false only when a P0 message cannot be queued.
func (q *outQueue) pushMessage(d *delivery, limit int, dropped func(int8)) bool {
	p := int8(d.msg.Priority)
	lowest := max(p, 1) // a new P2 may displace queued P2 only; P1 and P0 displace P2 then P1
	if !q.makeRoom(d.size, lowest, limit, dropped) {
		if p == 0 {
			return false
		}
		dropped(p)
		q.appendGap(d.frame.GetMessage().GetChannel(), d.msg.Epoch, d.msg.Offset)
		return true
	}
	q.items = append(q.items, outItem{d: d, size: d.size, prio: p})
	q.bytes += int32(d.size)
	return true
}

// makeRoom drops queued messages of priority 2 down to lowest until size
// more bytes fit, and reports whether they do.
func (q *outQueue) makeRoom(size int, lowest int8, limit int, dropped func(int8)) bool {
	if q.fits(size, limit) || q.len() == 0 {
		return true // an empty queue takes anything, however big
	}
	for p := int8(2); p >= lowest; p-- {
		out := q.items[:q.head]
		changed := false
		for i := int(q.head); i < len(q.items); i++ {
			it := q.items[i]
			if !q.fits(size, limit) && it.d != nil && it.prio == p {
				dropped(p)
				q.bytes -= int32(it.size)
				changed = true
				ch, ep, off := it.d.frame.GetMessage().GetChannel(), it.d.msg.Epoch, it.d.msg.Offset
				if n := len(out); n > int(q.head) && extendGap(out[n-1], ch, ep, off) {
					continue
				}
				it = outItem{frame: gapFrame(ch, ep, off), size: controlSize, prio: -1}
				q.bytes += int32(controlSize)
			}
			out = append(out, it)
		}
		if changed {
			clear(q.items[len(out):])
			q.items = out
		}
		if q.fits(size, limit) {
			return true
		}
	}
	return false
}

// fits reports whether size more bytes stay within limit.
func (q *outQueue) fits(size, limit int) bool { return int(q.bytes)+size <= limit }

// appendGap records that the message at off will not come, merging with a
// Gap at the tail of the queue when it continues it.
func (q *outQueue) appendGap(ch, epoch string, off uint64) {
	if n := len(q.items); n > int(q.head) && extendGap(q.items[n-1], ch, epoch, off) {
		return
	}
	q.items = append(q.items, outItem{frame: gapFrame(ch, epoch, off), size: controlSize, prio: -1})
	q.bytes += int32(controlSize)
}

func extendGap(it outItem, ch, epoch string, off uint64) bool {
	g := it.frame.GetGap()
	if g == nil || g.Channel != ch || g.Epoch != epoch || g.ToOffset+1 != off {
		return false
	}
	g.ToOffset = off
	return true
}

func gapFrame(ch, epoch string, off uint64) *corralv1.ServerFrame {
	return &corralv1.ServerFrame{Frame: &corralv1.ServerFrame_Gap{Gap: &corralv1.Gap{
		Channel: ch, Epoch: epoch, FromOffset: off, ToOffset: off, Reason: "slow consumer",
	}}}
}
