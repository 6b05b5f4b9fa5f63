package wire

import (
	"strconv"

	"google.golang.org/grpc/codes"
)

// CloseCode is a WebSocket close status code (RFC 6455 section 7.4). The same
// numbers name the reason a gRPC session ends (see GRPCCode) and fill the code
// field of the Error and GoAway frames. The table in README.md is the
// reference; the constants below are its Go form.
type CloseCode uint16

// Close codes of RFC 6455 that corral uses.
const (
	// CloseNormal: the session ended normally (the client left, or the
	// server finished a clean shutdown with no session left to move).
	CloseNormal CloseCode = 1000
	// CloseGoingAway: the server drains (restart, deploy) or sheds the
	// session's priority. The reason carries retry_after_ms (FormatReason).
	CloseGoingAway CloseCode = 1001
	// CloseProtocolError: a malformed frame (binary frame that is not a
	// valid ClientFrame, an empty frame, a frame out of order).
	CloseProtocolError CloseCode = 1002
	// CloseInvalidPayload: a text frame that is not valid UTF-8 or not a
	// valid ClientFrame in the JSON mapping.
	CloseInvalidPayload CloseCode = 1007
	// ClosePolicyViolation: authentication or authorisation failed: missing,
	// forged or expired token, a priority above the token's.
	ClosePolicyViolation CloseCode = 1008
	// CloseTooBig: a frame larger than the maximum frame size.
	CloseTooBig CloseCode = 1009
	// CloseInternal: the server failed.
	CloseInternal CloseCode = 1011
	// CloseTryAgainLater: admission refused the session (overload); the
	// reason carries retry_after_ms.
	CloseTryAgainLater CloseCode = 1013
)

// Close codes specific to corral, in the private range 4000-4999.
const (
	// CloseSlowConsumer: the session's outbound queue was full and a P0
	// message could not be queued (P1 and P2 messages are dropped first and
	// reported with Gap frames). Resume to get the P0 messages again.
	CloseSlowConsumer CloseCode = 4000
	// CloseSubscriptionLimit: the session asked for more subscriptions than
	// allowed (as an Error on a Subscribe; as a close for Hello).
	CloseSubscriptionLimit CloseCode = 4001
	// CloseRateLimited: the session sent frames faster than its rate limit.
	// The reason carries retry_after_ms.
	CloseRateLimited CloseCode = 4002
	// CloseHandshakeTimeout: no Hello arrived within the handshake timeout.
	CloseHandshakeTimeout CloseCode = 4003
	// CloseBadRequest: a well-formed frame with invalid content (an empty
	// or invalid channel name, a Subscribe before Hello, a second Hello).
	CloseBadRequest CloseCode = 4004
	// CloseForbidden: the token does not allow this channel. Usually an
	// Error reply to Subscribe or Publish, not a close.
	CloseForbidden CloseCode = 4005
	// CloseResumeImpossible: the session asked to resume something the
	// server can never serve (for example an unknown previous session);
	// resync from the source of truth and reconnect without positions.
	CloseResumeImpossible CloseCode = 4006
	// CloseSessionReplaced: another connection took over this session.
	CloseSessionReplaced CloseCode = 4007
)

// name returns the short name of a code of the table, "" for any other. A
// switch rather than a package-level map keeps the package free of mutable
// state.
func (c CloseCode) name() string {
	switch c {
	case CloseNormal:
		return "normal"
	case CloseGoingAway:
		return "going away"
	case CloseProtocolError:
		return "protocol error"
	case CloseInvalidPayload:
		return "invalid payload"
	case ClosePolicyViolation:
		return "policy violation"
	case CloseTooBig:
		return "too big"
	case CloseInternal:
		return "internal error"
	case CloseTryAgainLater:
		return "try again later"
	case CloseSlowConsumer:
		return "slow consumer"
	case CloseSubscriptionLimit:
		return "subscription limit"
	case CloseRateLimited:
		return "rate limited"
	case CloseHandshakeTimeout:
		return "handshake timeout"
	case CloseBadRequest:
		return "bad request"
	case CloseForbidden:
		return "forbidden"
	case CloseResumeImpossible:
		return "resume impossible"
	case CloseSessionReplaced:
		return "session replaced"
	}
	return ""
}

// CloseCodes returns every close code of the table, in numeric order.
func CloseCodes() []CloseCode {
	return []CloseCode{
		CloseNormal, CloseGoingAway, CloseProtocolError, CloseInvalidPayload,
		ClosePolicyViolation, CloseTooBig, CloseInternal, CloseTryAgainLater,
		CloseSlowConsumer, CloseSubscriptionLimit, CloseRateLimited,
		CloseHandshakeTimeout, CloseBadRequest, CloseForbidden,
		CloseResumeImpossible, CloseSessionReplaced,
	}
}

// String returns "1001 going away" for a known code and the bare number for
// any other.
func (c CloseCode) String() string {
	n := strconv.Itoa(int(c))
	if name := c.name(); name != "" {
		return n + " " + name
	}
	return n
}

// Known reports whether c is in the table.
func (c CloseCode) Known() bool { return c.name() != "" }

// Retryable reports whether a client should reconnect after a close with c.
// It is false for codes that a reconnect with the same input would hit again
// (policy, malformed or oversized frames, bad requests) and true otherwise.
func (c CloseCode) Retryable() bool {
	switch c {
	case ClosePolicyViolation, CloseProtocolError, CloseInvalidPayload,
		CloseTooBig, CloseBadRequest, CloseForbidden, CloseSubscriptionLimit,
		CloseSessionReplaced:
		return false
	}
	return true
}

// GRPCCode maps a close code to the gRPC status code a gRPC session (or the
// Publish call) ends with. Unknown codes map to codes.Unknown.
func (c CloseCode) GRPCCode() codes.Code {
	switch c {
	case CloseNormal:
		return codes.OK
	case CloseGoingAway, CloseTryAgainLater:
		return codes.Unavailable
	case CloseProtocolError, CloseInvalidPayload, CloseBadRequest:
		return codes.InvalidArgument
	case ClosePolicyViolation:
		return codes.Unauthenticated
	case CloseForbidden:
		return codes.PermissionDenied
	case CloseTooBig, CloseSlowConsumer, CloseSubscriptionLimit, CloseRateLimited:
		return codes.ResourceExhausted
	case CloseInternal:
		return codes.Internal
	case CloseHandshakeTimeout:
		return codes.DeadlineExceeded
	case CloseResumeImpossible:
		return codes.FailedPrecondition
	case CloseSessionReplaced:
		return codes.Aborted
	}
	return codes.Unknown
}

// CloseCodeFromGRPC maps a gRPC status code back to the close code a
// WebSocket transport would use, the inverse of GRPCCode where GRPCCode is
// one-to-one and the most general code otherwise (Unavailable becomes
// CloseTryAgainLater, ResourceExhausted CloseRateLimited, InvalidArgument
// CloseProtocolError). Codes with no counterpart map to CloseInternal.
func CloseCodeFromGRPC(code codes.Code) CloseCode {
	switch code {
	case codes.OK, codes.Canceled:
		return CloseNormal
	case codes.Unavailable:
		return CloseTryAgainLater
	case codes.InvalidArgument:
		return CloseProtocolError
	case codes.Unauthenticated:
		return ClosePolicyViolation
	case codes.PermissionDenied:
		return CloseForbidden
	case codes.ResourceExhausted:
		return CloseRateLimited
	case codes.DeadlineExceeded:
		return CloseHandshakeTimeout
	case codes.FailedPrecondition:
		return CloseResumeImpossible
	case codes.Aborted:
		return CloseSessionReplaced
	}
	return CloseInternal
}
