package edge

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/corralhq/corral/internal/config"
)

// TestReplayConfig: defaults, and the errors name the key.
func TestReplayConfig(t *testing.T) {
	d := DefaultReplayConfig()
	if d.Window != 30*time.Second || d.MaxBytes != 64<<20 || !slices.Equal(d.Priorities, []string{"P0"}) ||
		d.CoalesceTimeout != 3*time.Second || d.Disabled {
		t.Fatalf("defaults %+v", d)
	}
	if err := (ReplayConfig{}).Validate(); err != nil {
		t.Fatalf("zero config: %v", err)
	}
	for _, tc := range []struct {
		cfg  ReplayConfig
		path string
	}{
		{ReplayConfig{Window: -time.Second}, "window"},
		{ReplayConfig{CoalesceTimeout: -1}, "coalesce_timeout"},
		{ReplayConfig{MaxBytes: -1}, "max_bytes"},
		{ReplayConfig{MaxBytes: 1000}, "max_bytes"},
		{ReplayConfig{Priorities: []string{"P0", "urgent"}}, "priorities[1]"},
	} {
		err := tc.cfg.Validate()
		var fe *config.FieldError
		if !errors.As(err, &fe) || fe.Path != tc.path || !strings.HasPrefix(fe.Err.Error(), "edge: ") {
			t.Errorf("%+v: %v, want an edge error at %s", tc.cfg, err, tc.path)
		}
		if _, err := NewReplayCache(tc.cfg, ReplayOptions{}); err == nil {
			t.Errorf("NewReplayCache accepted %+v", tc.cfg)
		}
	}
}

// TestReplayConfigYAML: the keys as a file writes them; an empty list of
// priorities stays empty (keep nothing), an absent one becomes [P0].
func TestReplayConfigYAML(t *testing.T) {
	for _, tc := range []struct {
		yaml  string
		prios []string
	}{
		{"window: 10s\nmax_bytes: 1048576\ncoalesce_timeout: 1s\npriorities: [P0, p1]\n", []string{"P0", "p1"}},
		{"priorities: []\n", []string{}},
		{"window: 10s\n", []string{"P0"}},
	} {
		var cfg ReplayConfig
		if err := config.Decode("replay.yaml", []byte(tc.yaml), &cfg, config.Options{}); err != nil {
			t.Fatalf("%q: %v", tc.yaml, err)
		}
		cfg = cfg.WithDefaults()
		if !slices.Equal(cfg.Priorities, tc.prios) || (cfg.Priorities == nil) != (tc.prios == nil) {
			t.Errorf("%q: priorities %#v, want %#v", tc.yaml, cfg.Priorities, tc.prios)
		}
	}
	var cfg ReplayConfig
	err := config.Decode("replay.yaml", []byte("priorities: [P0, urgent]\n"), &cfg, config.Options{})
	if err == nil || !strings.Contains(err.Error(), "replay.yaml:1:") || !strings.Contains(err.Error(), `priorities[1]: edge: unknown priority "urgent"`) {
		t.Fatalf("bad priority: %v", err)
	}
}
