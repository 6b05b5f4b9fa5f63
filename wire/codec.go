package wire

import (
	"errors"
	"fmt"
	"strconv"
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/corralhq/corral/wire/corralv1"
)

// Errors wrapped by DecodeError and returned by the Append methods; test
// with errors.Is.
var (
	// ErrTooBig: a frame is larger than Config.MaxFrameBytes.
	ErrTooBig = errors.New("wire: frame too big")
	// ErrEmptyFrame: a frame with none of its oneof fields set.
	ErrEmptyFrame = errors.New("wire: frame has no content")
	// ErrInvalidUTF8: a text (JSON) frame that is not valid UTF-8.
	ErrInvalidUTF8 = errors.New("wire: text frame is not valid UTF-8")
)

// DecodeError is the error of a Decode method: the close code the transport
// should close the connection with, and the cause. Code is CloseTooBig for
// an oversized frame, CloseProtocolError for a malformed binary frame or a
// frame with no content, and CloseInvalidPayload for a text frame that is
// not valid UTF-8 or not valid JSON for the frame type.
type DecodeError struct {
	Code CloseCode
	Err  error
}

// Error returns "wire: decode frame (close 1007 invalid payload): cause".
func (e *DecodeError) Error() string {
	return "wire: decode frame (close " + e.Code.String() + "): " + e.Err.Error()
}

// Unwrap returns the cause.
func (e *DecodeError) Unwrap() error { return e.Err }

// Codec encodes and decodes frames in one Format with the limits of a
// Config. It holds no mutable state: one Codec is safe for concurrent use by
// every connection of its format. The Append methods append to a buffer the
// caller reuses, and the Decode methods fill a frame the caller reuses, so a
// steady stream of frames costs no allocation in the binary format beyond
// the decoded fields themselves.
type Codec struct {
	format Format
	cfg    Config
	pu     proto.UnmarshalOptions
	jm     protojson.MarshalOptions
	ju     protojson.UnmarshalOptions
}

// NewCodec returns a Codec for format with the limits of cfg (zero fields
// take their defaults).
func NewCodec(format Format, cfg Config) (*Codec, error) {
	if format != FormatProto && format != FormatJSON {
		return nil, fmt.Errorf("wire: invalid format %d", format)
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Codec{
		format: format,
		cfg:    cfg.WithDefaults(),
		// Unknown fields from newer peers are kept in binary frames and
		// dropped in JSON ones, so that additive schema changes never
		// break an older peer.
		pu: proto.UnmarshalOptions{},
		ju: protojson.UnmarshalOptions{DiscardUnknown: true},
	}, nil
}

// Format returns the codec's format.
func (c *Codec) Format() Format { return c.format }

// Config returns the codec's limits with defaults applied.
func (c *Codec) Config() Config { return c.cfg }

// AppendServerFrame appends the encoding of f to dst and returns the
// extended buffer. If the encoding would exceed MaxFrameBytes it returns dst
// unchanged and an error wrapping ErrTooBig.
func (c *Codec) AppendServerFrame(dst []byte, f *corralv1.ServerFrame) ([]byte, error) {
	return c.appendFrame(dst, f)
}

// AppendClientFrame appends the encoding of f to dst, as AppendServerFrame.
func (c *Codec) AppendClientFrame(dst []byte, f *corralv1.ClientFrame) ([]byte, error) {
	return c.appendFrame(dst, f)
}

func (c *Codec) appendFrame(dst []byte, m proto.Message) ([]byte, error) {
	start := len(dst)
	var (
		out []byte
		err error
	)
	if c.format == FormatProto {
		if n := proto.Size(m); n > c.cfg.MaxFrameBytes {
			return dst, fmt.Errorf("%w: %d bytes, limit %d", ErrTooBig, n, c.cfg.MaxFrameBytes)
		}
		// The Size call above cached the sizes of m and its sub-messages;
		// UseCachedSize lets MarshalAppend reuse them instead of walking
		// the frame a second time.
		out, err = proto.MarshalOptions{UseCachedSize: true}.MarshalAppend(dst, m)
	} else {
		out, err = c.jm.MarshalAppend(dst, m)
	}
	if err != nil {
		return dst, fmt.Errorf("wire: encode %s frame: %w", c.format, err)
	}
	if n := len(out) - start; n > c.cfg.MaxFrameBytes {
		return out[:start], fmt.Errorf("%w: %d bytes, limit %d", ErrTooBig, n, c.cfg.MaxFrameBytes)
	}
	return out, nil
}

// DecodeClientFrame decodes data into f (which it resets first). The error,
// if any, is a *DecodeError naming the close code. f may be reused for the
// next frame; it does not keep references to data.
func (c *Codec) DecodeClientFrame(data []byte, f *corralv1.ClientFrame) error {
	if err := c.decode(data, f); err != nil {
		return err
	}
	if f.GetFrame() == nil {
		return &DecodeError{Code: CloseProtocolError, Err: ErrEmptyFrame}
	}
	return nil
}

// DecodeServerFrame decodes data into f, as DecodeClientFrame.
func (c *Codec) DecodeServerFrame(data []byte, f *corralv1.ServerFrame) error {
	if err := c.decode(data, f); err != nil {
		return err
	}
	if f.GetFrame() == nil {
		return &DecodeError{Code: CloseProtocolError, Err: ErrEmptyFrame}
	}
	return nil
}

func (c *Codec) decode(data []byte, m proto.Message) error {
	if len(data) > c.cfg.MaxFrameBytes {
		proto.Reset(m)
		return &DecodeError{Code: CloseTooBig, Err: fmt.Errorf("%w: %d bytes, limit %d", ErrTooBig, len(data), c.cfg.MaxFrameBytes)}
	}
	if c.format == FormatProto {
		if err := c.pu.Unmarshal(data, m); err != nil {
			return &DecodeError{Code: CloseProtocolError, Err: err}
		}
		return nil
	}
	if !utf8.Valid(data) {
		proto.Reset(m)
		return &DecodeError{Code: CloseInvalidPayload, Err: ErrInvalidUTF8}
	}
	if err := c.ju.Unmarshal(data, m); err != nil {
		return &DecodeError{Code: CloseInvalidPayload, Err: err}
	}
	return nil
}

// CheckClientFrame checks the content of a decoded client frame against the
// codec's limits and the channel grammar (ValidChannel). It returns nil or a
// Close with CloseBadRequest (CloseSubscriptionLimit when Hello lists more
// than MaxHelloSubscriptions channels) and a text naming the field. Servers
// call it after DecodeClientFrame; it does not check authorisation.
func (c *Codec) CheckClientFrame(f *corralv1.ClientFrame) error {
	lim := c.cfg
	switch fr := f.GetFrame().(type) {
	case nil:
		return Close{Code: CloseProtocolError, Text: "empty frame"}
	case *corralv1.ClientFrame_Hello:
		h := fr.Hello
		if len(h.GetToken()) > lim.MaxTokenBytes {
			return badRequest("hello.token", "longer than "+strconv.Itoa(lim.MaxTokenBytes)+" bytes")
		}
		if err := checkPriority("hello.priority", h.GetPriority()); err != nil {
			return err
		}
		if len(h.GetPreviousSessionId()) > lim.MaxIDBytes {
			return badRequest("hello.previous_session_id", "too long")
		}
		if len(h.GetClient()) > lim.MaxIDBytes {
			return badRequest("hello.client", "too long")
		}
		if n := len(h.GetSubscribe()); n > lim.MaxHelloSubscriptions {
			return Close{Code: CloseSubscriptionLimit, Text: "hello.subscribe: " + strconv.Itoa(n) + " channels, limit " + strconv.Itoa(lim.MaxHelloSubscriptions)}
		}
		for _, s := range h.GetSubscribe() {
			if err := c.checkSubscribe("hello.subscribe", s); err != nil {
				return err
			}
		}
	case *corralv1.ClientFrame_Subscribe:
		return c.checkSubscribe("subscribe", fr.Subscribe)
	case *corralv1.ClientFrame_Unsubscribe:
		return c.checkChannel("unsubscribe.channel", fr.Unsubscribe.GetChannel())
	case *corralv1.ClientFrame_Publish:
		return c.checkPublish("publish.", fr.Publish)
	case *corralv1.ClientFrame_Ack:
		if err := c.checkChannel("ack.channel", fr.Ack.GetChannel()); err != nil {
			return err
		}
		if len(fr.Ack.GetEpoch()) > lim.MaxIDBytes {
			return badRequest("ack.epoch", "too long")
		}
	case *corralv1.ClientFrame_Ping, *corralv1.ClientFrame_Pong:
	}
	return nil
}

// CheckPublish checks a publish against the codec's limits, whichever way
// it came: a session's Publish frame (CheckClientFrame calls it) or a
// backend's publish API (HTTP, gRPC, NATS). It checks the channel (length
// and ValidChannel), the priority, the length of client_message_id and the
// size of the data (at most MaxFrameBytes: a larger message could never be
// delivered in a frame). It returns nil or a Close with CloseBadRequest
// (CloseTooBig for the data) whose text starts with the field's name:
// "channel: longer than 200 bytes".
func (c *Codec) CheckPublish(p *corralv1.Publish) error { return c.checkPublish("", p) }

func (c *Codec) checkPublish(prefix string, p *corralv1.Publish) error {
	if err := c.checkChannel(prefix+"channel", p.GetChannel()); err != nil {
		return err
	}
	if err := checkPriority(prefix+"priority", p.GetPriority()); err != nil {
		return err
	}
	if n := len(p.GetClientMessageId()); n > c.cfg.MaxIDBytes {
		return badRequest(prefix+"client_message_id", strconv.Itoa(n)+" bytes, longer than "+strconv.Itoa(c.cfg.MaxIDBytes))
	}
	if n := len(p.GetData()); n > c.cfg.MaxFrameBytes {
		return Close{Code: CloseTooBig, Text: prefix + "data: " + strconv.Itoa(n) + " bytes, larger than max_frame_bytes " + strconv.Itoa(c.cfg.MaxFrameBytes)}
	}
	return nil
}

func (c *Codec) checkSubscribe(field string, s *corralv1.Subscribe) error {
	if s == nil {
		return badRequest(field, "empty")
	}
	if err := c.checkChannel(field+".channel", s.GetChannel()); err != nil {
		return err
	}
	if len(s.GetFrom().GetEpoch()) > c.cfg.MaxIDBytes {
		return badRequest(field+".from.epoch", "too long")
	}
	return nil
}

func (c *Codec) checkChannel(field, name string) error {
	if len(name) > c.cfg.MaxChannelBytes {
		return badRequest(field, "longer than "+strconv.Itoa(c.cfg.MaxChannelBytes)+" bytes")
	}
	if !ValidChannel(name) {
		return badRequest(field, strconv.Quote(name)+" is not a valid channel name")
	}
	return nil
}

func checkPriority(field string, p corralv1.Priority) error {
	if Rank(p) > 2 {
		return badRequest(field, "unknown priority "+strconv.Itoa(int(p)))
	}
	return nil
}

func badRequest(field, problem string) error {
	return Close{Code: CloseBadRequest, Text: field + ": " + problem}
}

// ValidChannel reports whether name is a valid channel name: 1 or more bytes
// of ASCII letters, digits and "_-:@/=+~", and dots that separate non-empty
// parts (no leading, trailing or doubled dot). The grammar keeps names safe
// as NATS subject tokens: no spaces, no wildcards ('*', '>'), no '$'. The
// length limit is Config.MaxChannelBytes, checked by CheckClientFrame.
func ValidChannel(name string) bool {
	if name == "" || name[0] == '.' || name[len(name)-1] == '.' {
		return false
	}
	prevDot := false
	for i := 0; i < len(name); i++ {
		b := name[i]
		switch {
		case b >= 'a' && b <= 'z', b >= 'A' && b <= 'Z', b >= '0' && b <= '9':
		case b == '_', b == '-', b == ':', b == '@', b == '/', b == '=', b == '+', b == '~':
		case b == '.':
			if prevDot {
				return false
			}
			prevDot = true
			continue
		default:
			return false
		}
		prevDot = false
	}
	return true
}
