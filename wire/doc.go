// Package wire is corral's session protocol: the protobuf frames of
// proto/corral/v1 (generated Go code in the sub-package corralv1), the codec
// that carries them over WebSocket, the close codes, and their mapping to
// gRPC statuses.
//
// One model, two transports. A gRPC session is the bidirectional stream
// corralv1.Corral/Connect; a WebSocket session negotiates the subprotocol
// "corral.v1.proto" (binary messages, protobuf wire format) or
// "corral.v1.json" (text messages, the protobuf JSON mapping). Either way
// the client sends ClientFrame messages and the server ServerFrame messages,
// one frame per transport message.
//
// A Codec (NewCodec with a Format and a Config) encodes frames by appending
// to a caller's buffer and decodes them into a caller's frame, enforcing the
// maximum frame size. Decode errors are *DecodeError values that name the
// close code the transport must use: CloseTooBig (1009) for an oversized
// frame, CloseProtocolError (1002) for a malformed binary frame or an empty
// one, CloseInvalidPayload (1007) for a text frame that is not UTF-8 or not
// JSON of the frame type. CheckClientFrame then checks content (channel
// names, string lengths, priorities) and returns a Close with
// CloseBadRequest. A Codec is immutable and safe for concurrent use.
//
// Close describes the end of a session: a CloseCode, a retry hint, a retry
// window (the slot within which the server asks the client to come back)
// and a text. Close.Reason builds the WebSocket close reason
// ("retry_after_ms=1500 retry_within_ms=150 draining"), ParseReason reads it
// back, Close.Status builds the gRPC status (with RetryInfo, and the exact
// close code and the window in an ErrorInfo) and CloseFromStatus reads that
// back. README.md has the table of
// close codes.
//
// The package imports no other corral package.
package wire

//go:generate bash generate.sh
