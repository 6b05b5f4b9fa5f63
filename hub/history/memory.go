package history

import (
	"context"
	"hash/maphash"
	"sync"
	"time"
)

const memShards = 32

// Memory is a Store in process memory, for a single hub. Create it with
// NewMemory; it is safe for concurrent use. Expired messages are dropped
// lazily when a channel is touched; a channel's epoch and last offset stay
// for Config.MetaTTL after its newest message, and Sweep drops channels
// silent for longer.
type Memory struct {
	cfg      Config
	now      func() time.Time
	newEpoch func() string
	seed     maphash.Seed
	shards   [memShards]memShard
}

type memShard struct {
	mu       sync.Mutex
	channels map[string]*memChannel
}

type memChannel struct {
	epoch  string
	last   uint64
	msgs   []Message // retained, offset order
	bytes  int
	newest time.Time // when the newest message was stored
}

// MemoryOptions are the injectable parts of a Memory store.
type MemoryOptions struct {
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// NewEpoch makes epoch tokens; nil means NewEpoch.
	NewEpoch func() string
}

var _ Store = (*Memory)(nil)

// NewMemory returns an empty memory store bounded by cfg (defaults applied).
func NewMemory(cfg Config, opts MemoryOptions) *Memory {
	m := &Memory{cfg: cfg.WithDefaults(), now: opts.Now, newEpoch: opts.NewEpoch, seed: maphash.MakeSeed()}
	if m.now == nil {
		m.now = time.Now
	}
	if m.newEpoch == nil {
		m.newEpoch = NewEpoch
	}
	for i := range m.shards {
		m.shards[i].channels = make(map[string]*memChannel)
	}
	return m
}

func (m *Memory) shard(channel string) *memShard {
	return &m.shards[maphash.String(m.seed, channel)%memShards]
}

// expire drops the messages of c older than the window at now and reports
// whether the channel is forgotten: silent for longer than MetaTTL, so its
// epoch and last offset are gone too.
func (m *Memory) expire(c *memChannel, now time.Time) bool {
	cut := now.Add(-m.cfg.Window)
	i := 0
	for i < len(c.msgs) && !c.msgs[i].Time.After(cut) {
		c.bytes -= len(c.msgs[i].Data)
		i++
	}
	if i == len(c.msgs) {
		c.msgs = nil // release the backing array of an idle channel
	} else if i > 0 {
		clear(c.msgs[:i])
		c.msgs = c.msgs[i:]
	}
	return now.Sub(c.newest) >= m.cfg.MetaTTL
}

// live returns the channel of s named channel with its aged-out messages
// dropped at now, or nil when there is none or it is forgotten (then it is
// deleted). The caller holds s.mu.
func (m *Memory) live(s *memShard, channel string, now time.Time) *memChannel {
	c := s.channels[channel]
	if c != nil && m.expire(c, now) {
		delete(s.channels, channel)
		c = nil
	}
	return c
}

// Append implements Store.
func (m *Memory) Append(_ context.Context, channel string, msg Message) (Message, error) {
	if err := ValidChannel(channel); err != nil {
		return Message{}, err
	}
	now := m.now()
	s := m.shard(channel)
	s.mu.Lock()
	defer s.mu.Unlock()
	c := m.live(s, channel, now)
	if c == nil {
		c = &memChannel{epoch: m.newEpoch()}
		s.channels[channel] = c
	}
	c.last++
	msg.Offset, msg.Epoch, msg.Time = c.last, c.epoch, now
	c.msgs = append(c.msgs, msg)
	c.bytes += len(msg.Data)
	c.newest = now
	drop := 0
	for len(c.msgs)-drop > m.cfg.MaxMessages || (c.bytes > m.cfg.MaxBytes && len(c.msgs)-drop > 1) {
		c.bytes -= len(c.msgs[drop].Data)
		drop++
	}
	if drop > 0 {
		clear(c.msgs[:drop])
		c.msgs = c.msgs[drop:]
	}
	return msg, nil
}

// Since implements Store.
func (m *Memory) Since(_ context.Context, channel string, from Position) (Recovery, error) {
	s := m.shard(channel)
	s.mu.Lock()
	defer s.mu.Unlock()
	c := m.live(s, channel, m.now())
	if c == nil {
		return answer(from, Position{}, nil), nil
	}
	return answer(from, Position{Epoch: c.epoch, Offset: c.last}, c.msgs), nil
}

// Current implements Store.
func (m *Memory) Current(_ context.Context, channel string) (Position, error) {
	s := m.shard(channel)
	s.mu.Lock()
	defer s.mu.Unlock()
	c := m.live(s, channel, m.now())
	if c == nil {
		return Position{}, nil
	}
	return Position{Epoch: c.epoch, Offset: c.last}, nil
}

// Sweep drops the messages that aged out at now, and every channel silent
// for MetaTTL (its epoch and last offset with it); it returns how many
// channels it dropped. The hub calls it periodically; tests call it with
// their clock.
func (m *Memory) Sweep(now time.Time) int {
	n := 0
	for i := range m.shards {
		s := &m.shards[i]
		s.mu.Lock()
		for name, c := range s.channels {
			if m.expire(c, now) {
				delete(s.channels, name)
				n++
			}
		}
		s.mu.Unlock()
	}
	return n
}

// Channels returns how many channels the store knows: with messages, or
// idle within MetaTTL.
func (m *Memory) Channels() int {
	n := 0
	for i := range m.shards {
		s := &m.shards[i]
		s.mu.Lock()
		n += len(s.channels)
		s.mu.Unlock()
	}
	return n
}
