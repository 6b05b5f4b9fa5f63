package edge

import (
	"cmp"
	"fmt"
	"strings"
	"time"

	"github.com/corralhq/corral/internal/config"
	"github.com/corralhq/corral/wire/corralv1"
)

// ReplayConfig configures the replay cache (the `replay:` part of the
// edge's configuration). The zero value, after WithDefaults, keeps the P0
// messages of the last 30 seconds of every channel, in at most 64 MiB.
type ReplayConfig struct {
	// Disabled turns the cache off: nothing is kept and every resume goes
	// upstream unchanged, uncounted.
	Disabled bool `yaml:"disabled"`
	// Window is how long a message stays in the cache after the edge
	// relayed it. Default 30s.
	Window time.Duration `yaml:"window"`
	// Priorities are the priorities of the messages kept: "P0", "P1" or
	// "P2" (a message without a priority counts as P2). Default [P0].
	Priorities []string `yaml:"priorities"`
	// MaxBytes bounds the cache's memory: message payloads plus a fixed
	// overhead per message and per channel (see README.md). Above
	// it the oldest messages of the largest channels go first. Default
	// 64 MiB; at least 64 KiB.
	MaxBytes int64 `yaml:"max_bytes"`
	// CoalesceTimeout bounds how long a resume waits for an identical
	// resume already on its way upstream (the leader) before it goes
	// upstream itself; it is also how long a leader's ticket stays valid.
	// Default 3s (below the Go client's 5 s request timeout, leaving a
	// waiter time for its own upstream try).
	CoalesceTimeout time.Duration `yaml:"coalesce_timeout"`
}

// Replay defaults.
const (
	DefaultReplayWindow          = 30 * time.Second
	DefaultReplayMaxBytes        = 64 << 20
	DefaultReplayCoalesceTimeout = 3 * time.Second
	minReplayMaxBytes            = 64 << 10
)

// DefaultReplayConfig returns the defaults: a 30 s window of P0 messages,
// 64 MiB, a 3 s coalescing timeout.
func DefaultReplayConfig() ReplayConfig { return ReplayConfig{}.WithDefaults() }

// WithDefaults returns c with its zero fields set to their defaults. A nil
// Priorities becomes [P0]; an empty, non-nil list stays empty (nothing is
// kept, but resumes are still coalesced).
func (c ReplayConfig) WithDefaults() ReplayConfig {
	c.Window = cmp.Or(c.Window, DefaultReplayWindow)
	c.MaxBytes = cmp.Or(c.MaxBytes, DefaultReplayMaxBytes)
	c.CoalesceTimeout = cmp.Or(c.CoalesceTimeout, DefaultReplayCoalesceTimeout)
	if c.Priorities == nil {
		c.Priorities = []string{"P0"}
	}
	return c
}

// Validate checks the values; zero values are valid (they mean defaults).
// The errors name the key relative to the `replay:` section.
func (c ReplayConfig) Validate() error {
	if c.Window < 0 {
		return config.Errorf("window", "edge: must not be negative, got %v", c.Window)
	}
	if c.CoalesceTimeout < 0 {
		return config.Errorf("coalesce_timeout", "edge: must not be negative, got %v", c.CoalesceTimeout)
	}
	if c.MaxBytes < 0 || (c.MaxBytes > 0 && c.MaxBytes < minReplayMaxBytes) {
		return config.Errorf("max_bytes", "edge: must be at least %d (64 KiB), got %d", minReplayMaxBytes, c.MaxBytes)
	}
	for i, p := range c.Priorities {
		if _, err := parseReplayPriority(p); err != nil {
			return config.Errorf(fmt.Sprintf("priorities[%d]", i), "%v", err)
		}
	}
	return nil
}

// parseReplayPriority reads "P0", "P1" or "P2" (either case).
func parseReplayPriority(s string) (corralv1.Priority, error) {
	switch strings.ToUpper(strings.TrimSpace(s)) {
	case "P0":
		return corralv1.Priority_PRIORITY_P0, nil
	case "P1":
		return corralv1.Priority_PRIORITY_P1, nil
	case "P2":
		return corralv1.Priority_PRIORITY_P2, nil
	}
	return 0, fmt.Errorf("edge: unknown priority %q (want P0, P1 or P2)", s)
}
