package history

import (
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"math/rand/v2"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/corralhq/corral/internal/natsutil"
)

// Header names of the JetStream messages that hold history.
const (
	HeaderOffset   = "Corral-Offset"
	HeaderEpoch    = "Corral-Epoch"
	HeaderPriority = "Corral-Priority"
	HeaderClientID = "Corral-Client-Id"
)

// maxAppendAttempts bounds the optimistic-concurrency retries of Append.
const maxAppendAttempts = 32

// JetStreamOptions are the injectable parts of a JetStream store.
type JetStreamOptions struct {
	// JS is JetStream; required.
	JS jetstream.JetStream
	// Stream is the stream name; default "CORRAL_HISTORY".
	Stream string
	// Subject is the subject prefix; a channel "a.b" is stored on
	// "<Subject>.a.b". Default "corral.history".
	Subject string
	// FileStorage keeps the stream on disk (so history survives a restart
	// of the NATS server); false keeps it in memory.
	FileStorage bool
	// NewEpoch makes epoch tokens; nil means NewEpoch.
	NewEpoch func() string
}

// JetStream is a Store backed by one JetStream stream with MaxAge equal to
// the window and MaxMsgsPerSubject equal to the per-channel cap. Offsets
// and epochs travel in message headers; a new offset is taken with
// JetStream's expected-last-subject-sequence check, so hubs that append to
// the same channel concurrently never hand out the same offset. Create it
// with NewJetStream, then Open it. It is safe for concurrent use.
type JetStream struct {
	cfg    Config
	opts   JetStreamOptions
	stream jetstream.Stream
	seed   maphash.Seed

	// locks serialise appends per channel within this process, so that
	// optimistic concurrency only retries across processes.
	locks [64]sync.Mutex
	// mu guards last; it is taken inside a locks[i] (never the reverse).
	mu   sync.Mutex
	last map[string]jsLast
}

// jsLast caches the newest message of a channel as this process last saw it.
type jsLast struct {
	seq    uint64 // stream sequence
	pos    Position
	stored time.Time
}

var _ Store = (*JetStream)(nil)

// NewJetStream returns a store; it does no I/O until Open.
func NewJetStream(cfg Config, opts JetStreamOptions) *JetStream {
	if opts.Stream == "" {
		opts.Stream = "CORRAL_HISTORY"
	}
	if opts.Subject == "" {
		opts.Subject = "corral.history"
	}
	if opts.NewEpoch == nil {
		opts.NewEpoch = NewEpoch
	}
	return &JetStream{cfg: cfg.Defaults(), opts: opts, seed: maphash.MakeSeed(), last: make(map[string]jsLast)}
}

// Open creates or updates the stream.
func (j *JetStream) Open(ctx context.Context) error {
	if j.opts.JS == nil {
		return errors.New("history: JetStream store without JetStream")
	}
	storage := jetstream.MemoryStorage
	if j.opts.FileStorage {
		storage = jetstream.FileStorage
	}
	maxBytes := j.cfg.StreamMaxBytes
	if maxBytes == 0 {
		maxBytes = -1
	}
	s, err := natsutil.EnsureStream(ctx, j.opts.JS, jetstream.StreamConfig{
		Name:              j.opts.Stream,
		Description:       "corral hub channel history",
		Subjects:          []string{j.opts.Subject + ".>"},
		Retention:         jetstream.LimitsPolicy,
		Discard:           jetstream.DiscardOld,
		MaxAge:            j.cfg.Window,
		MaxMsgsPerSubject: int64(j.cfg.MaxMessages),
		MaxBytes:          maxBytes,
		Storage:           storage,
		Replicas:          j.cfg.Replicas,
		AllowDirect:       true,
	})
	if err != nil {
		return fmt.Errorf("history: %w", err)
	}
	j.stream = s
	return nil
}

func (j *JetStream) subject(channel string) string { return j.opts.Subject + "." + channel }

// fetchLast reads the channel's newest message from the stream.
func (j *JetStream) fetchLast(ctx context.Context, channel string) (jsLast, error) {
	m, err := j.stream.GetLastMsgForSubject(ctx, j.subject(channel))
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return jsLast{}, nil
	}
	if err != nil {
		return jsLast{}, fmt.Errorf("history: last of %s: %w", channel, err)
	}
	msg, err := decode(m.Header, m.Data, m.Time)
	if err != nil {
		return jsLast{}, err
	}
	return jsLast{seq: m.Sequence, pos: Position{Epoch: msg.Epoch, Offset: msg.Offset}, stored: m.Time}, nil
}

// Append implements Store.
func (j *JetStream) Append(ctx context.Context, channel string, m Message) (Message, error) {
	if err := ValidChannel(channel); err != nil {
		return Message{}, err
	}
	if j.stream == nil {
		return Message{}, errors.New("history: JetStream store not open")
	}
	l := &j.locks[maphash.String(j.seed, channel)%uint64(len(j.locks))]
	l.Lock()
	defer l.Unlock()
	j.mu.Lock()
	last, cached := j.last[channel]
	j.mu.Unlock()
	for attempt := range maxAppendAttempts {
		if attempt > 1 {
			// Back off a little, jittered, so that a hub in a tight
			// publish loop does not starve the others.
			t := time.NewTimer(time.Duration(rand.Int64N(int64(attempt) * int64(time.Millisecond))))
			select {
			case <-ctx.Done():
				t.Stop()
				return Message{}, ctx.Err()
			case <-t.C:
			}
		}
		if !cached {
			var err error
			if last, err = j.fetchLast(ctx, channel); err != nil {
				return Message{}, err
			}
		}
		out := m
		if last.pos == (Position{}) {
			out.Epoch, out.Offset = j.opts.NewEpoch(), 1
		} else {
			out.Epoch, out.Offset = last.pos.Epoch, last.pos.Offset+1
		}
		msg := nats.NewMsg(j.subject(channel))
		msg.Data = out.Data
		msg.Header.Set(HeaderOffset, strconv.FormatUint(out.Offset, 10))
		msg.Header.Set(HeaderEpoch, out.Epoch)
		msg.Header.Set(HeaderPriority, strconv.Itoa(int(out.Priority)))
		if out.ClientID != "" {
			msg.Header.Set(HeaderClientID, out.ClientID)
		}
		ack, err := j.opts.JS.PublishMsg(ctx, msg, jetstream.WithExpectLastSequencePerSubject(last.seq))
		if natsutil.IsWrongLastSequence(err) {
			// Another hub appended, or our newest message aged out.
			cached = false
			continue
		}
		if err != nil {
			return Message{}, fmt.Errorf("history: append to %s: %w", channel, err)
		}
		out.Time = time.Now()
		j.mu.Lock()
		j.last[channel] = jsLast{seq: ack.Sequence, pos: Position{Epoch: out.Epoch, Offset: out.Offset}, stored: out.Time}
		j.mu.Unlock()
		return out, nil
	}
	return Message{}, fmt.Errorf("history: append to %s: lost the race for an offset %d times", channel, maxAppendAttempts)
}

// Since implements Store.
func (j *JetStream) Since(ctx context.Context, channel string, from Position) (Recovery, error) {
	if j.stream == nil {
		return Recovery{}, errors.New("history: JetStream store not open")
	}
	if ValidChannel(channel) != nil {
		return answer(from, Position{}, nil), nil
	}
	last, err := j.fetchLast(ctx, channel)
	if err != nil {
		return Recovery{}, err
	}
	cur := last.pos
	if from == (Position{}) || cur == (Position{}) || from.Epoch != cur.Epoch || from.Offset >= cur.Offset {
		return answer(from, cur, nil), nil
	}
	want := cur.Offset - from.Offset
	if want > uint64(j.cfg.MaxMessages) {
		return answer(from, cur, nil), nil // more than the cap keeps: a gap
	}
	retained, err := j.load(ctx, channel, from.Offset, cur.Offset, last.seq)
	if err != nil {
		return Recovery{}, err
	}
	return answer(from, cur, retained), nil
}

// load reads the channel's retained messages with offsets in (after, upto]
// and stream sequences up to lastSeq, through an ordered consumer.
func (j *JetStream) load(ctx context.Context, channel string, after, upto, lastSeq uint64) ([]Message, error) {
	cons, err := j.stream.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{j.subject(channel)},
		DeliverPolicy:  jetstream.DeliverAllPolicy,
	})
	if err != nil {
		return nil, fmt.Errorf("history: read %s: %w", channel, err)
	}
	var out []Message
	for {
		batch, err := cons.Fetch(j.cfg.MaxMessages, jetstream.FetchMaxWait(5*time.Second))
		if err != nil {
			return nil, fmt.Errorf("history: read %s: %w", channel, err)
		}
		n := 0
		for m := range batch.Messages() {
			n++
			md, err := m.Metadata()
			if err != nil {
				return nil, fmt.Errorf("history: read %s: %w", channel, err)
			}
			msg, err := decode(m.Headers(), m.Data(), md.Timestamp)
			if err != nil {
				return nil, err
			}
			if msg.Offset > after && msg.Offset <= upto {
				out = append(out, msg)
			}
			if md.Sequence.Stream >= lastSeq || msg.Offset >= upto {
				return out, nil
			}
		}
		if err := batch.Error(); err != nil && !errors.Is(err, nats.ErrTimeout) && !errors.Is(err, jetstream.ErrNoMessages) {
			return nil, fmt.Errorf("history: read %s: %w", channel, err)
		}
		if n == 0 {
			// The newest message was there a moment ago: either it aged
			// out meanwhile (then what is left is all there is) or the
			// read timed out, which must not pass for a gap.
			if cur, err := j.fetchLast(ctx, channel); err == nil && cur.seq < lastSeq {
				return out, nil
			}
			return nil, fmt.Errorf("history: read %s: no message within 5s", channel)
		}
	}
}

// Current implements Store.
func (j *JetStream) Current(ctx context.Context, channel string) (Position, error) {
	if j.stream == nil {
		return Position{}, errors.New("history: JetStream store not open")
	}
	if ValidChannel(channel) != nil {
		return Position{}, nil
	}
	last, err := j.fetchLast(ctx, channel)
	return last.pos, err
}

// Forget drops cached channel state older than the window at now, bounding
// the cache to channels appended to recently. The hub calls it
// periodically.
func (j *JetStream) Forget(now time.Time) int {
	j.mu.Lock()
	defer j.mu.Unlock()
	n := 0
	for ch, l := range j.last {
		if now.Sub(l.stored) > j.cfg.Window {
			delete(j.last, ch)
			n++
		}
	}
	return n
}

// decode reads a history message from its headers.
func decode(h nats.Header, data []byte, t time.Time) (Message, error) {
	off, err := strconv.ParseUint(h.Get(HeaderOffset), 10, 64)
	if err != nil || off == 0 {
		return Message{}, fmt.Errorf("history: stored message without a valid %s header", HeaderOffset)
	}
	ep := h.Get(HeaderEpoch)
	if ep == "" {
		return Message{}, fmt.Errorf("history: stored message without %s", HeaderEpoch)
	}
	pr, _ := strconv.Atoi(h.Get(HeaderPriority))
	if pr < 0 || pr > 2 {
		pr = 2
	}
	return Message{Offset: off, Epoch: ep, Priority: uint8(pr), Data: data, ClientID: h.Get(HeaderClientID), Time: t}, nil
}
