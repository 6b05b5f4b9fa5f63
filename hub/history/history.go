package history

import (
	"context"
	"crypto/rand"
	"encoding/base32"
	"errors"
	"fmt"
	"strings"
	"time"
)

// Position is a place in a channel's history: the epoch of the channel and
// the offset of the last message seen. The zero Position means "nothing
// seen".
type Position struct {
	Epoch  string
	Offset uint64
}

// Message is one message of a channel's history.
type Message struct {
	// Offset is the message's place in its channel, from 1. Append assigns
	// it.
	Offset uint64
	// Epoch is the channel's epoch when the message was stored. Append
	// assigns it.
	Epoch string
	// Priority is 0 (P0, acked, at least once), 1 or 2 (best effort).
	Priority uint8
	// Data is the payload; the store keeps the slice it was given.
	Data []byte
	// ClientID is the publisher's message id. Optional. The JetStream store
	// drops a second Append with the same ClientID on the same channel
	// within the window, from any hub, and returns the first message with
	// Duplicate set; the Memory store does not look at it (the hub keeps
	// its own dedupe map for a single hub).
	ClientID string
	// Duplicate is set by Append when the message is one the store already
	// held (see ClientID); nothing was stored.
	Duplicate bool
	// Time is when the message was stored. Append assigns it.
	Time time.Time
}

// Recovery is the answer to Since.
type Recovery struct {
	// Messages are the messages after the asked position, in offset order.
	// Empty when Recovered is false.
	Messages []Message
	// Current is the channel's position now (its newest message); the zero
	// Position for a channel without history.
	Current Position
	// Recovered is true when Messages are exactly the messages missed; false
	// means a gap: some were lost (aged out, over the size cap, or the epoch
	// changed), and the client must resync from its source of truth and go
	// on live from Current.
	Recovered bool
}

// Store keeps channel histories. Channel names are opaque to the store;
// callers namespace them (the hub prefixes the tenant). Implementations are
// safe for concurrent use.
type Store interface {
	// Append stores m at the end of the channel and returns it with its
	// Offset, Epoch and Time set.
	Append(ctx context.Context, channel string, m Message) (Message, error)
	// Since returns what came after from. A zero from (no position) is
	// answered with Recovered=true, no messages and the current position:
	// the subscriber starts live.
	Since(ctx context.Context, channel string, from Position) (Recovery, error)
	// Current returns the channel's newest position, or the zero Position.
	Current(ctx context.Context, channel string) (Position, error)
	// Sweep drops the state that aged out at now and returns how many
	// channels it dropped. The hub calls it periodically.
	Sweep(now time.Time) int
}

// ErrInvalidChannel is returned for a channel name a store cannot hold.
var ErrInvalidChannel = errors.New("history: invalid channel name")

// ValidChannel reports whether name can be used as a channel key: 1 to 512
// bytes of letters, digits and _-:@=/+~, with dots between non-empty parts.
// (Dots become NATS subject separators.)
func ValidChannel(name string) error {
	if name == "" || len(name) > 512 {
		return fmt.Errorf("%w: length %d, want 1..512", ErrInvalidChannel, len(name))
	}
	for _, part := range strings.Split(name, ".") {
		if part == "" {
			return fmt.Errorf("%w: %q has an empty part", ErrInvalidChannel, name)
		}
		for _, r := range part {
			ok := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' ||
				r == '_' || r == '-' || r == ':' || r == '@' || r == '=' || r == '/' || r == '+' || r == '~'
			if !ok {
				return fmt.Errorf("%w: %q holds %q", ErrInvalidChannel, name, r)
			}
		}
	}
	return nil
}

// answer builds the Recovery for from, given the channel's current position
// and its retained messages in offset order (which may be nil when the
// caller has not loaded them because none are needed).
func answer(from, cur Position, retained []Message) Recovery {
	r := Recovery{Current: cur}
	switch {
	case from == (Position{}):
		r.Recovered = true
	case cur == (Position{}) || from.Epoch != cur.Epoch || from.Offset > cur.Offset:
		// Lost history, another epoch, or a position from the future.
	case from.Offset == cur.Offset:
		r.Recovered = true
	default:
		i := 0
		for i < len(retained) && retained[i].Offset <= from.Offset {
			i++
		}
		if i < len(retained) && retained[i].Offset == from.Offset+1 && retained[len(retained)-1].Offset == cur.Offset {
			r.Messages = append([]Message(nil), retained[i:]...)
			r.Recovered = true
		}
	}
	return r
}

// NewEpoch returns a fresh random epoch token (13 characters).
func NewEpoch() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return strings.ToLower(base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(b[:]))
}
