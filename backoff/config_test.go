package backoff

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/goccy/go-yaml"
)

func TestValidate(t *testing.T) {
	tests := []struct {
		name    string
		cfg     Config
		wantErr string // substring; empty means valid
	}{
		{name: "zero config is full jitter", cfg: Config{}},
		{name: "every name with defaults", cfg: Config{Policy: PolicyDecorrelated}},
		{name: "grpc with its own jitter", cfg: Config{Policy: PolicyGRPC, Jitter: 0.5}},
		{name: "none with base zero", cfg: Config{Policy: PolicyNone}},
		{name: "multiplier exactly 1", cfg: Config{Policy: PolicyFull, Multiplier: 1}},
		{name: "base equals cap", cfg: Config{Policy: PolicyEqual, Base: time.Second, Cap: time.Second}},
		{name: "unknown policy", cfg: Config{Policy: "linear"}, wantErr: `unknown policy "linear" (want one of none, exponential, full, equal, decorrelated, grpc)`},
		{name: "policy names are case-sensitive", cfg: Config{Policy: "Full"}, wantErr: "unknown policy"},
		{name: "negative base", cfg: Config{Base: -time.Second}, wantErr: "base -1s is negative"},
		{name: "negative cap", cfg: Config{Cap: -1}, wantErr: "cap -1ns is negative"},
		{name: "negative min connect timeout", cfg: Config{Policy: PolicyGRPC, MinConnectTimeout: -time.Second}, wantErr: "min_connect_timeout -1s is negative"},
		{name: "negative max hint", cfg: Config{MaxHint: -time.Second}, wantErr: "max_hint -1s is negative"},
		{name: "cap below base", cfg: Config{Base: 2 * time.Second, Cap: time.Second}, wantErr: "cap 1s is below base 2s"},
		{name: "cap below default base", cfg: Config{Cap: 100 * time.Millisecond}, wantErr: "cap 100ms is below base 500ms"},
		{name: "NaN multiplier", cfg: Config{Multiplier: math.NaN()}, wantErr: "multiplier NaN is not a finite number"},
		{name: "infinite multiplier", cfg: Config{Multiplier: math.Inf(1)}, wantErr: "not a finite number"},
		{name: "shrinking multiplier", cfg: Config{Multiplier: 0.5}, wantErr: "multiplier 0.5 is below 1"},
		{name: "negative multiplier", cfg: Config{Multiplier: -2}, wantErr: "multiplier -2 is below 1"},
		{name: "multiplier on none", cfg: Config{Policy: PolicyNone, Multiplier: 2}, wantErr: "multiplier has no effect on policy none"},
		{name: "jitter on full", cfg: Config{Jitter: 0.1}, wantErr: "jitter applies only to policy grpc"},
		{name: "jitter above 1", cfg: Config{Policy: PolicyGRPC, Jitter: 1.5}, wantErr: "jitter 1.5 is outside (0, 1]"},
		{name: "negative jitter", cfg: Config{Policy: PolicyGRPC, Jitter: -0.1}, wantErr: "jitter -0.1 is outside (0, 1]"},
		{name: "NaN jitter", cfg: Config{Policy: PolicyGRPC, Jitter: math.NaN()}, wantErr: "jitter NaN is outside"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.cfg.Validate()
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("Validate(%+v) = %v, want nil", tt.cfg, err)
				}
				if _, err := New(tt.cfg); err != nil {
					t.Fatalf("New(%+v) = %v after Validate passed", tt.cfg, err)
				}
				return
			}
			if err == nil {
				t.Fatalf("Validate(%+v) = nil, want an error containing %q", tt.cfg, tt.wantErr)
			}
			if !strings.HasPrefix(err.Error(), "backoff: ") || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("Validate(%+v) = %q, want \"backoff: ...%s...\"", tt.cfg, err, tt.wantErr)
			}
			if _, nerr := New(tt.cfg); nerr == nil || nerr.Error() != err.Error() {
				t.Errorf("New(%+v) = %v, want the Validate error %v", tt.cfg, nerr, err)
			}
		})
	}
}

func TestDefaults(t *testing.T) {
	tests := []struct {
		policy string
		want   Config
	}{
		{"", Config{Policy: PolicyFull, Base: 500 * time.Millisecond, Cap: 30 * time.Second, Multiplier: 2, MaxHint: time.Hour}},
		{PolicyNone, Config{Policy: PolicyNone, Cap: 30 * time.Second, MaxHint: time.Hour}},
		{PolicyExponential, Config{Policy: PolicyExponential, Base: 500 * time.Millisecond, Cap: 30 * time.Second, Multiplier: 2, MaxHint: time.Hour}},
		{PolicyEqual, Config{Policy: PolicyEqual, Base: 500 * time.Millisecond, Cap: 30 * time.Second, Multiplier: 2, MaxHint: time.Hour}},
		{PolicyDecorrelated, Config{Policy: PolicyDecorrelated, Base: 500 * time.Millisecond, Cap: 30 * time.Second, Multiplier: 3, MaxHint: time.Hour}},
		{PolicyGRPC, Config{Policy: PolicyGRPC, Base: time.Second, Cap: 120 * time.Second, Multiplier: 1.6, Jitter: 0.2, MinConnectTimeout: 20 * time.Second, MaxHint: time.Hour}},
	}
	for _, tt := range tests {
		t.Run("policy="+tt.policy, func(t *testing.T) {
			got, err := Config{Policy: tt.policy}.WithDefaults()
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Errorf("WithDefaults = %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestParse(t *testing.T) {
	for _, n := range Names() {
		p, err := Parse(n)
		if err != nil {
			t.Fatalf("Parse(%q): %v", n, err)
		}
		if p.Name() != n {
			t.Errorf("Parse(%q).Name() = %q", n, p.Name())
		}
	}
	for _, bad := range []string{"", "jitter", "FULL", " full"} {
		if _, err := Parse(bad); err == nil || !strings.HasPrefix(err.Error(), "backoff: ") {
			t.Errorf("Parse(%q) error = %v, want a backoff: error", bad, err)
		}
	}
}

// TestConfigYAML checks the YAML tags: durations as strings, every field by
// its snake_case key, and unknown keys rejected by a strict decoder.
func TestConfigYAML(t *testing.T) {
	src := `
policy: grpc
base: 250ms
cap: 1m
multiplier: 1.5
jitter: 0.1
min_connect_timeout: 5s
max_hint: 10m
`
	var c Config
	if err := yaml.UnmarshalWithOptions([]byte(src), &c, yaml.DisallowUnknownField()); err != nil {
		t.Fatal(err)
	}
	want := Config{Policy: PolicyGRPC, Base: 250 * time.Millisecond, Cap: time.Minute, Multiplier: 1.5, Jitter: 0.1, MinConnectTimeout: 5 * time.Second, MaxHint: 10 * time.Minute}
	if c != want {
		t.Errorf("decoded %+v, want %+v", c, want)
	}
	if err := c.Validate(); err != nil {
		t.Errorf("Validate: %v", err)
	}
	var bad Config
	if err := yaml.UnmarshalWithOptions([]byte("policy: full\nbase_delay: 1s\n"), &bad, yaml.DisallowUnknownField()); err == nil {
		t.Error("unknown key base_delay decoded without error")
	}
}

// TestEnvelope: a server's base and cap replace the configured ones when
// above 0, and a cap below the base is raised to it.
func TestEnvelope(t *testing.T) {
	c := Config{Policy: PolicyFull, Base: time.Second, Cap: 5 * time.Second}
	for _, tc := range []struct {
		base, cap, wantBase, wantCap time.Duration
	}{
		{0, 0, time.Second, 5 * time.Second},
		{700 * time.Millisecond, 0, 700 * time.Millisecond, 5 * time.Second},
		{0, 20 * time.Millisecond, time.Second, time.Second},
		{9 * time.Second, 0, 9 * time.Second, 9 * time.Second},
		{100 * time.Millisecond, 2 * time.Second, 100 * time.Millisecond, 2 * time.Second},
	} {
		got := c.Envelope(tc.base, tc.cap)
		if got.Base != tc.wantBase || got.Cap != tc.wantCap || got.Policy != PolicyFull {
			t.Errorf("Envelope(%v, %v) = base %v cap %v policy %s, want %v %v full", tc.base, tc.cap, got.Base, got.Cap, got.Policy, tc.wantBase, tc.wantCap)
		}
	}
}
