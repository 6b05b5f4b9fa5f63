package history

import (
	"strings"
	"testing"
	"time"
)

func TestConfigValidate(t *testing.T) {
	for _, tc := range []struct {
		name    string
		cfg     Config
		wantErr string
	}{
		{name: "zero value", cfg: Config{}},
		{name: "meta_ttl equal to the window", cfg: Config{Window: time.Minute, MetaTTL: time.Minute}},
		{name: "meta_ttl below the window", cfg: Config{Window: time.Minute, MetaTTL: 30 * time.Second}, wantErr: "meta_ttl"},
		{name: "meta_ttl below the default window", cfg: Config{MetaTTL: 10 * time.Second}, wantErr: "at least the window (30s)"},
		{name: "negative meta_ttl", cfg: Config{MetaTTL: -time.Second}, wantErr: "must not be negative"},
		{name: "unknown store", cfg: Config{Store: "disk"}, wantErr: "want jetstream or memory"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.cfg.Validate()
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("unexpected error %v", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
			}
		})
	}
	if d := (Config{Window: time.Hour}).WithDefaults(); d.MetaTTL != 24*time.Hour {
		t.Errorf("default meta_ttl %v, want 24h", d.MetaTTL)
	}
	if d := (Config{Window: 48 * time.Hour}).WithDefaults(); d.MetaTTL != 48*time.Hour {
		t.Errorf("meta_ttl under a 48h window defaults to %v, want the window", d.MetaTTL)
	}
}
