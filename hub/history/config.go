package history

import (
	"cmp"
	"time"

	"github.com/corralhq/corral/internal/config"
)

// Config bounds a history store. The zero value, after WithDefaults, keeps 30
// seconds and at most 1000 messages (and 1 MiB in memory) per channel.
type Config struct {
	// Store is "jetstream" (history in a JetStream stream, shared by every
	// hub on the same NATS, surviving restarts when NATS keeps files) or
	// "memory" (in this process only; for a single hub).
	Store string `yaml:"store"`
	// Window is how long a message stays resumable. Default 30s.
	Window time.Duration `yaml:"window"`
	// MetaTTL is how long a channel's epoch and last offset outlive its
	// newest message: a channel idle for less than MetaTTL keeps its epoch,
	// so a client resuming at the channel's last offset is recovered with
	// no message, and the next message continues the offsets. After MetaTTL
	// of silence the channel starts over in a new epoch. Default 24h; at
	// least Window.
	MetaTTL time.Duration `yaml:"meta_ttl"`
	// MaxMessages caps the messages kept per channel. Default 1000.
	MaxMessages int `yaml:"max_messages"`
	// MaxBytes caps the payload bytes kept per channel by the memory store.
	// Default 1 MiB.
	MaxBytes int `yaml:"max_bytes"`
	// StreamMaxBytes caps the whole JetStream stream; 0 means no cap beyond
	// the window and MaxMessages. When the cap discards a channel's oldest
	// messages, resumes from before them get a gap.
	StreamMaxBytes int64 `yaml:"stream_max_bytes"`
	// Replicas is the JetStream stream's replica count (1, 3 or 5). Default
	// 1; a hub that leaves it 0 on a clustered NATS uses 3, or the cluster's
	// size if smaller.
	Replicas int `yaml:"replicas"`
}

// Default store names.
const (
	StoreJetStream = "jetstream"
	StoreMemory    = "memory"
)

// DefaultConfig returns the defaults: the JetStream store, a 30 s window,
// 24 h of channel metadata, 1000 messages and 1 MiB per channel, 1 replica.
func DefaultConfig() Config { return Config{}.WithDefaults() }

// WithDefaults returns c with zero fields set to their defaults.
func (c Config) WithDefaults() Config {
	c.Store = cmp.Or(c.Store, StoreJetStream)
	c.Window = cmp.Or(c.Window, 30*time.Second)
	c.MetaTTL = cmp.Or(c.MetaTTL, 24*time.Hour)
	if c.MetaTTL < c.Window {
		c.MetaTTL = c.Window
	}
	c.MaxMessages = cmp.Or(c.MaxMessages, 1000)
	c.MaxBytes = cmp.Or(c.MaxBytes, 1<<20)
	c.Replicas = cmp.Or(c.Replicas, 1)
	return c
}

// Validate checks the values; zero values are valid (they mean defaults).
func (c Config) Validate() error {
	switch c.Store {
	case "", StoreJetStream, StoreMemory:
	default:
		return config.Errorf("store", "history: %q: want jetstream or memory", c.Store)
	}
	if c.Window < 0 {
		return config.Errorf("window", "history: must not be negative, got %v", c.Window)
	}
	if c.Window != 0 && c.Window < time.Second {
		return config.Errorf("window", "history: must be at least 1s, got %v", c.Window)
	}
	if c.MetaTTL < 0 {
		return config.Errorf("meta_ttl", "history: must not be negative, got %v", c.MetaTTL)
	}
	if c.MetaTTL != 0 && c.MetaTTL < c.WithDefaults().Window {
		return config.Errorf("meta_ttl", "history: must be at least the window (%v), got %v", c.WithDefaults().Window, c.MetaTTL)
	}
	if c.MaxMessages < 0 {
		return config.Errorf("max_messages", "history: must not be negative, got %d", c.MaxMessages)
	}
	if c.MaxBytes < 0 {
		return config.Errorf("max_bytes", "history: must not be negative, got %d", c.MaxBytes)
	}
	if c.StreamMaxBytes < 0 {
		return config.Errorf("stream_max_bytes", "history: must not be negative, got %d", c.StreamMaxBytes)
	}
	switch c.Replicas {
	case 0, 1, 3, 5:
	default:
		return config.Errorf("replicas", "history: want 1, 3 or 5, got %d", c.Replicas)
	}
	return nil
}
