package wire

import (
	"fmt"

	"github.com/corralhq/corral/wire/corralv1"
)

// WebSocket subprotocols of the session protocol, in the server's order of
// preference.
const (
	// SubprotocolProto carries frames as binary WebSocket messages in the
	// protobuf wire format.
	SubprotocolProto = "corral.v1.proto"
	// SubprotocolJSON carries frames as text WebSocket messages in the
	// protobuf JSON mapping (lowerCamelCase names, 64-bit integers as
	// strings, bytes as base64), for browsers and debugging.
	SubprotocolJSON = "corral.v1.json"
)

// Subprotocols returns the subprotocols a server offers, most preferred
// first. The slice is new on every call.
func Subprotocols() []string { return []string{SubprotocolProto, SubprotocolJSON} }

// Format is an encoding of frames. The zero Format is invalid.
type Format uint8

// The two formats.
const (
	FormatProto Format = 1
	FormatJSON  Format = 2
)

// ParseSubprotocol returns the Format of a negotiated WebSocket subprotocol.
func ParseSubprotocol(name string) (Format, error) {
	switch name {
	case SubprotocolProto:
		return FormatProto, nil
	case SubprotocolJSON:
		return FormatJSON, nil
	}
	return 0, fmt.Errorf("wire: unknown subprotocol %q (want %q or %q)", name, SubprotocolProto, SubprotocolJSON)
}

// Subprotocol returns the WebSocket subprotocol name of f, "" if f is
// invalid.
func (f Format) Subprotocol() string {
	switch f {
	case FormatProto:
		return SubprotocolProto
	case FormatJSON:
		return SubprotocolJSON
	}
	return ""
}

// Binary reports whether frames of f travel as binary WebSocket messages
// (true for FormatProto) rather than text messages.
func (f Format) Binary() bool { return f == FormatProto }

// String returns "proto", "json" or "invalid".
func (f Format) String() string {
	switch f {
	case FormatProto:
		return "proto"
	case FormatJSON:
		return "json"
	}
	return "invalid"
}

// Priority is the priority of a session or a message: the protocol's enum.
// The zero value, PRIORITY_UNSPECIFIED, reads as P2 (see Rank).
type Priority = corralv1.Priority

// The priorities, most important first.
const (
	P0 Priority = corralv1.Priority_PRIORITY_P0
	P1 Priority = corralv1.Priority_PRIORITY_P1
	P2 Priority = corralv1.Priority_PRIORITY_P2
)

// Rank orders priorities for comparisons: 0 for P0 (most important), 1 for
// P1, 2 for P2 and for PRIORITY_UNSPECIFIED, and 3 for any value outside
// the enum (which CheckClientFrame rejects).
func Rank(p corralv1.Priority) int {
	switch p {
	case corralv1.Priority_PRIORITY_P0:
		return 0
	case corralv1.Priority_PRIORITY_P1:
		return 1
	case corralv1.Priority_PRIORITY_P2, corralv1.Priority_PRIORITY_UNSPECIFIED:
		return 2
	}
	return 3
}

// PriorityOfRank is the inverse of Rank: 0 gives P0, 1 gives P1, and any
// other rank gives P2, the lowest priority.
func PriorityOfRank(rank int) corralv1.Priority {
	switch rank {
	case 0:
		return corralv1.Priority_PRIORITY_P0
	case 1:
		return corralv1.Priority_PRIORITY_P1
	}
	return corralv1.Priority_PRIORITY_P2
}

// Normalize returns p with PRIORITY_UNSPECIFIED replaced by P2.
func Normalize(p corralv1.Priority) corralv1.Priority {
	if p == corralv1.Priority_PRIORITY_UNSPECIFIED {
		return corralv1.Priority_PRIORITY_P2
	}
	return p
}
