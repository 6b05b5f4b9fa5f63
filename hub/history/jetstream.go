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
	// MetaStream is the stream of channel metadata (epoch and last offset,
	// one message per channel, kept for Config.MetaTTL). Default
	// "<Stream>_META".
	MetaStream string
	// MetaSubject is the subject prefix of channel metadata. Default
	// "<Subject>-meta".
	MetaSubject string
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
// the same channel concurrently never hand out the same offset.
//
// A second stream keeps each channel's metadata (epoch and offset of its
// newest message, one message per channel) for Config.MetaTTL, so a channel
// idle for longer than the window keeps its epoch and continues its
// offsets. The metadata is written before the message (a reservation that
// never goes down), so it is never behind the history: a hub that dies
// between the two writes, or two hubs racing for the first message of an
// idle channel, can only make a later resume a gap, never pass a lost
// message for recovered.
//
// Create it with NewJetStream, then Open it. It is safe for concurrent use.
type JetStream struct {
	cfg    Config
	opts   JetStreamOptions
	stream jetstream.Stream
	meta   jetstream.Stream
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
	seq     uint64 // stream sequence
	pos     Position
	stored  time.Time
	metaSeq uint64 // sequence of the channel's metadata message
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
	if opts.MetaStream == "" {
		opts.MetaStream = opts.Stream + "_META"
	}
	if opts.MetaSubject == "" {
		opts.MetaSubject = opts.Subject + "-meta"
	}
	if opts.NewEpoch == nil {
		opts.NewEpoch = NewEpoch
	}
	return &JetStream{cfg: cfg.WithDefaults(), opts: opts, seed: maphash.MakeSeed(), last: make(map[string]jsLast)}
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
		Duplicates:        j.cfg.Window,
	})
	if err != nil {
		return fmt.Errorf("history: %w", err)
	}
	meta, err := natsutil.EnsureStream(ctx, j.opts.JS, jetstream.StreamConfig{
		Name:              j.opts.MetaStream,
		Description:       "corral hub channel epochs and last offsets",
		Subjects:          []string{j.opts.MetaSubject + ".>"},
		Retention:         jetstream.LimitsPolicy,
		Discard:           jetstream.DiscardOld,
		MaxAge:            j.cfg.MetaTTL,
		MaxMsgsPerSubject: 1,
		Storage:           storage,
		Replicas:          j.cfg.Replicas,
		AllowDirect:       true,
	})
	if err != nil {
		return fmt.Errorf("history: %w", err)
	}
	j.stream, j.meta = s, meta
	return nil
}

// Check reports whether both streams answer now (each is asked for its
// state): it fails while a stream has no leader, because the NATS nodes
// holding it are gone or lost their quorum, and history can be neither
// read nor written. The hub calls it to decide readiness.
func (j *JetStream) Check(ctx context.Context) error {
	for _, s := range []jetstream.Stream{j.stream, j.meta} {
		if s == nil {
			return errors.New("history: JetStream store not open")
		}
		if _, err := s.Info(ctx); err != nil {
			return fmt.Errorf("history: stream %s: %w", s.CachedInfo().Config.Name, err)
		}
	}
	return nil
}

// Scale sets the replicas of both streams to n when they have fewer
// (JetStream copies the data to the new peers), and leaves them otherwise.
// It is safe to call from several hubs at once.
func (j *JetStream) Scale(ctx context.Context, n int) error {
	for _, name := range []string{j.opts.Stream, j.opts.MetaStream} {
		if err := natsutil.ScaleStream(ctx, j.opts.JS, name, n); err != nil {
			return fmt.Errorf("history: %w", err)
		}
	}
	return nil
}

func (j *JetStream) subject(channel string) string { return j.opts.Subject + "." + channel }

func (j *JetStream) metaSubject(channel string) string { return j.opts.MetaSubject + "." + channel }

// fetchMeta reads the channel's metadata: the position of its newest
// message (or one reserved for it) and the metadata message's sequence.
func (j *JetStream) fetchMeta(ctx context.Context, channel string) (Position, uint64, error) {
	pos, seq, _, err := j.fetchMetaAt(ctx, channel)
	return pos, seq, err
}

// fetchMetaAt is fetchMeta that also returns when the metadata was written
// (by the NATS server's clock).
func (j *JetStream) fetchMetaAt(ctx context.Context, channel string) (Position, uint64, time.Time, error) {
	m, err := j.meta.GetLastMsgForSubject(ctx, j.metaSubject(channel))
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return Position{}, 0, time.Time{}, nil
	}
	if err != nil {
		return Position{}, 0, time.Time{}, fmt.Errorf("history: metadata of %s: %w", channel, err)
	}
	msg, err := decode(m.Header, nil, m.Time)
	if err != nil {
		return Position{}, 0, time.Time{}, err
	}
	return Position{Epoch: msg.Epoch, Offset: msg.Offset}, m.Sequence, m.Time, nil
}

// reservationGrace is how recent metadata over an empty history must be for
// Append to wait a moment for the message it announces.
const reservationGrace = time.Second

// awaitHistory polls the channel's newest message for a few milliseconds
// and returns it once there is one.
func (j *JetStream) awaitHistory(ctx context.Context, channel string) (jsLast, bool) {
	for d := time.Millisecond; d <= 16*time.Millisecond; d *= 2 {
		t := time.NewTimer(d)
		select {
		case <-ctx.Done():
			t.Stop()
			return jsLast{}, false
		case <-t.C:
		}
		if l, err := j.fetchLast(ctx, channel); err == nil && l.pos != (Position{}) {
			return l, true
		}
	}
	return jsLast{}, false
}

// Errors of reserve that make Append start over.
var (
	// errEpochTaken: another hub started the channel's epoch first.
	errEpochTaken = errors.New("history: epoch taken")
	// errStaleBase: the metadata holds another epoch or none, so the
	// position Append started from (cached) is out of date.
	errStaleBase = errors.New("history: stale base position")
)

// reserve records pos as the channel's newest position in the metadata
// stream unless it already holds pos or a later offset of the same epoch.
// metaSeq is the metadata sequence last seen (0: none). It returns the
// metadata sequence now, or (with the metadata's position and sequence)
// errEpochTaken when the metadata holds another epoch and fresh is true
// (pos starts an epoch this call made up), errStaleBase when it holds
// another epoch or none and pos continued an older position.
func (j *JetStream) reserve(ctx context.Context, channel string, pos Position, metaSeq uint64, fresh bool) (uint64, Position, error) {
	for range maxAppendAttempts {
		msg := nats.NewMsg(j.metaSubject(channel))
		msg.Header.Set(HeaderOffset, strconv.FormatUint(pos.Offset, 10))
		msg.Header.Set(HeaderEpoch, pos.Epoch)
		ack, err := j.opts.JS.PublishMsg(ctx, msg, jetstream.WithExpectLastSequencePerSubject(metaSeq))
		if err == nil {
			return ack.Sequence, pos, nil
		}
		if !natsutil.IsWrongLastSequence(err) {
			return 0, Position{}, fmt.Errorf("history: metadata of %s: %w", channel, err)
		}
		cur, seq, err := j.fetchMeta(ctx, channel)
		if err != nil {
			return 0, Position{}, err
		}
		switch {
		case cur.Epoch == pos.Epoch && cur.Offset >= pos.Offset:
			return seq, cur, nil
		case cur.Epoch != pos.Epoch && fresh && cur != (Position{}):
			return seq, cur, errEpochTaken
		case cur.Epoch != pos.Epoch && !fresh:
			return seq, cur, errStaleBase
		}
		metaSeq = seq
	}
	return 0, Position{}, fmt.Errorf("history: metadata of %s: lost the race %d times", channel, maxAppendAttempts)
}

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
	if j.stream == nil || j.meta == nil {
		return Message{}, errors.New("history: JetStream store not open")
	}
	l := &j.locks[maphash.String(j.seed, channel)%uint64(len(j.locks))]
	l.Lock()
	defer l.Unlock()
	j.mu.Lock()
	last, cached := j.last[channel]
	j.mu.Unlock()
	// mine is the position this call reserved in the metadata and the
	// metadata sequence of that write: if the history append then loses
	// (our cached view was stale) and nobody wrote the metadata since, the
	// reservation is still ours to use.
	var mine Position
	var mineSeq uint64
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
			metaSeq := last.metaSeq
			var err error
			if last, err = j.fetchLast(ctx, channel); err != nil {
				return Message{}, err
			}
			last.metaSeq = metaSeq
		}
		out := m
		base, fresh := last.pos, false
		if base == (Position{}) {
			// No message within the window: the metadata, if the channel
			// spoke within MetaTTL, says where it stopped.
			var err error
			var at time.Time
			if base, last.metaSeq, at, err = j.fetchMetaAt(ctx, channel); err != nil {
				return Message{}, err
			}
			// Metadata written a moment ago over an empty history is most
			// likely another hub's reservation whose message is on its
			// way: wait for it a little, so that this append follows it
			// instead of skipping its offset. The clock decides only
			// whether to wait; if nothing comes, the append goes on from
			// the metadata (the offset may then be skipped: a gap).
			own := mineSeq != 0 && last.metaSeq == mineSeq
			if base != (Position{}) && !own && time.Since(at) < reservationGrace {
				if l, ok := j.awaitHistory(ctx, channel); ok {
					metaSeq := last.metaSeq
					last, base = l, l.pos
					last.metaSeq = metaSeq
				}
			}
		}
		switch {
		case last.pos == (Position{}) && mineSeq != 0 && last.metaSeq == mineSeq:
			out.Epoch, out.Offset = mine.Epoch, mine.Offset
		case base == (Position{}):
			out.Epoch, out.Offset, fresh = j.opts.NewEpoch(), 1, true
		default:
			out.Epoch, out.Offset = base.Epoch, base.Offset+1
		}
		metaSeq, held, err := j.reserve(ctx, channel, Position{Epoch: out.Epoch, Offset: out.Offset}, last.metaSeq, fresh)
		if errors.Is(err, errStaleBase) {
			last.metaSeq, cached = metaSeq, false
			continue
		}
		if errors.Is(err, errEpochTaken) {
			// Another hub started the epoch a moment ago; its first
			// message is most likely on its way: contend for offset 1
			// of its epoch through the history check below.
			out.Epoch, out.Offset = held.Epoch, 1
			if held.Offset > 1 {
				out.Offset = held.Offset + 1
			}
		} else if err != nil {
			return Message{}, err
		}
		last.metaSeq = metaSeq
		if held == (Position{Epoch: out.Epoch, Offset: out.Offset}) {
			mine, mineSeq = held, metaSeq
		}
		msg := nats.NewMsg(j.subject(channel))
		msg.Data = out.Data
		msg.Header.Set(HeaderOffset, strconv.FormatUint(out.Offset, 10))
		msg.Header.Set(HeaderEpoch, out.Epoch)
		msg.Header.Set(HeaderPriority, strconv.Itoa(int(out.Priority)))
		if out.ClientID != "" {
			msg.Header.Set(HeaderClientID, out.ClientID)
			// JetStream drops a second message with this id within the
			// window, whichever hub sends it.
			msg.Header.Set(jetstream.MsgIDHeader, channel+"/"+out.ClientID)
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
		if ack.Duplicate {
			return j.duplicate(ctx, channel, ack.Sequence, mine, mineSeq)
		}
		out.Time = time.Now()
		j.mu.Lock()
		j.last[channel] = jsLast{seq: ack.Sequence, pos: Position{Epoch: out.Epoch, Offset: out.Offset}, stored: out.Time, metaSeq: last.metaSeq}
		j.mu.Unlock()
		return out, nil
	}
	return Message{}, fmt.Errorf("history: append to %s: lost the race for an offset %d times", channel, maxAppendAttempts)
}

// duplicate answers an Append that JetStream recognised as a duplicate of
// the message at seq: it returns that message, marked Duplicate, and takes
// back this call's metadata reservation (mine, written at mineSeq) when no
// one wrote the metadata since, so that the metadata does not stay ahead of
// the history.
func (j *JetStream) duplicate(ctx context.Context, channel string, seq uint64, mine Position, mineSeq uint64) (Message, error) {
	j.mu.Lock()
	delete(j.last, channel)
	j.mu.Unlock()
	if mineSeq != 0 {
		if last, err := j.fetchLast(ctx, channel); err == nil && last.pos != (Position{}) && last.pos.Epoch == mine.Epoch && last.pos.Offset < mine.Offset {
			m := nats.NewMsg(j.metaSubject(channel))
			m.Header.Set(HeaderOffset, strconv.FormatUint(last.pos.Offset, 10))
			m.Header.Set(HeaderEpoch, last.pos.Epoch)
			// Lost to another append: then the metadata is that one's.
			_, _ = j.opts.JS.PublishMsg(ctx, m, jetstream.WithExpectLastSequencePerSubject(mineSeq))
		}
	}
	raw, err := j.stream.GetMsg(ctx, seq)
	if err != nil {
		return Message{}, fmt.Errorf("history: duplicate in %s: %w", channel, err)
	}
	orig, err := decode(raw.Header, raw.Data, raw.Time)
	if err != nil {
		return Message{}, err
	}
	orig.Duplicate = true
	return orig, nil
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
	if cur == (Position{}) {
		// Idle for longer than the window: no message, but the epoch
		// and last offset may still be known.
		if cur, _, err = j.fetchMeta(ctx, channel); err != nil {
			return Recovery{}, err
		}
		return answer(from, cur, nil), nil
	}
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
	if err != nil || last.pos != (Position{}) {
		return last.pos, err
	}
	pos, _, err := j.fetchMeta(ctx, channel)
	return pos, err
}

// Sweep implements Store: it drops cached channel state older than the
// window at now, bounding the cache to channels appended to recently, and
// returns how many channels it dropped. The streams keep their own limits.
func (j *JetStream) Sweep(now time.Time) int {
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
