package wire

import (
	"fmt"
	"strings"
)

// Defaults of Config. The zero Config takes all of them.
const (
	// DefaultMaxFrameBytes bounds one encoded frame (64 KiB).
	DefaultMaxFrameBytes = 64 << 10
	// DefaultMaxChannelBytes bounds a channel name.
	DefaultMaxChannelBytes = 200
	// DefaultMaxTokenBytes bounds Hello.token.
	DefaultMaxTokenBytes = 8 << 10
	// DefaultMaxHelloSubscriptions bounds Hello.subscribe.
	DefaultMaxHelloSubscriptions = 256
	// DefaultMaxIDBytes bounds the other strings a client controls:
	// client_message_id, previous_session_id, client, epochs.
	DefaultMaxIDBytes = 128
)

// HardMaxFrameBytes is the largest MaxFrameBytes Config accepts (16 MiB).
const HardMaxFrameBytes = 16 << 20

// Config sets the limits of a Codec. A zero field takes its default, so the
// zero Config is ready to use. Values must be non-negative.
type Config struct {
	// MaxFrameBytes is the largest encoded frame, in bytes, that Decode
	// accepts (larger: CloseTooBig) and Append produces (larger: ErrTooBig).
	// Default 64 KiB, at most 16 MiB. Servers advertise it in
	// ServerHints.max_frame_bytes and should give the same figure to their
	// WebSocket library's read limit.
	MaxFrameBytes int `yaml:"max_frame_bytes"`
	// MaxChannelBytes is the longest channel name CheckClientFrame accepts.
	// Default 200.
	MaxChannelBytes int `yaml:"max_channel_bytes"`
	// MaxTokenBytes is the longest Hello.token. Default 8 KiB.
	MaxTokenBytes int `yaml:"max_token_bytes"`
	// MaxHelloSubscriptions is the most entries of Hello.subscribe. The
	// server's own per-session subscription limit applies too. Default 256.
	MaxHelloSubscriptions int `yaml:"max_hello_subscriptions"`
	// MaxIDBytes is the longest client_message_id, previous_session_id,
	// client name and epoch string. Default 128.
	MaxIDBytes int `yaml:"max_id_bytes"`
}

// Validate reports the first invalid field, as "wire: max_frame_bytes: ...".
func (c Config) Validate() error {
	var problems []string
	check := func(name string, v int) {
		if v < 0 {
			problems = append(problems, fmt.Sprintf("%s: must not be negative, got %d", name, v))
		}
	}
	check("max_frame_bytes", c.MaxFrameBytes)
	check("max_channel_bytes", c.MaxChannelBytes)
	check("max_token_bytes", c.MaxTokenBytes)
	check("max_hello_subscriptions", c.MaxHelloSubscriptions)
	check("max_id_bytes", c.MaxIDBytes)
	if c.MaxFrameBytes > HardMaxFrameBytes {
		problems = append(problems, fmt.Sprintf("max_frame_bytes: at most %d, got %d", HardMaxFrameBytes, c.MaxFrameBytes))
	}
	if len(problems) > 0 {
		return fmt.Errorf("wire: %s", strings.Join(problems, "; "))
	}
	return nil
}

// DefaultConfig returns the default bounds (DefaultMaxFrameBytes and the
// other Default constants).
func DefaultConfig() Config { return Config{}.WithDefaults() }

// WithDefaults returns c with every zero field set to its default.
func (c Config) WithDefaults() Config {
	if c.MaxFrameBytes == 0 {
		c.MaxFrameBytes = DefaultMaxFrameBytes
	}
	if c.MaxChannelBytes == 0 {
		c.MaxChannelBytes = DefaultMaxChannelBytes
	}
	if c.MaxTokenBytes == 0 {
		c.MaxTokenBytes = DefaultMaxTokenBytes
	}
	if c.MaxHelloSubscriptions == 0 {
		c.MaxHelloSubscriptions = DefaultMaxHelloSubscriptions
	}
	if c.MaxIDBytes == 0 {
		c.MaxIDBytes = DefaultMaxIDBytes
	}
	return c
}
