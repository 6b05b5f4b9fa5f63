package main

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"github.com/corralhq/corral/internal/config"
)

type fakeConfig struct {
	Listen  string        `yaml:"listen"`
	Timeout time.Duration `yaml:"timeout"`
	Admin   struct {
		Addr string `yaml:"addr"`
	} `yaml:"admin"`
}

func (c *fakeConfig) Validate() error {
	if c.Listen == "" {
		return config.Errorf("listen", "must not be empty")
	}
	return nil
}

func fakeSpec(got **fakeConfig) serverSpec[fakeConfig] {
	return serverSpec[fakeConfig]{
		name: "fake", short: "a fake server", example: "examples/fake.yaml", envPrefix: "CORRAL_FAKE",
		defaults: func() *fakeConfig { return &fakeConfig{Listen: "127.0.0.1:0", Timeout: time.Second} },
		addrs:    func(c *fakeConfig) (*string, *string) { return &c.Listen, &c.Admin.Addr },
		run: func(_ context.Context, _ *slog.Logger, cfg *fakeConfig, _ string) error {
			*got = cfg
			return nil
		},
	}
}

func runFake(t *testing.T, args ...string) (*fakeConfig, int, string, string) {
	t.Helper()
	var got *fakeConfig
	g := &globals{logLevel: "error", logFormat: "json"}
	var out, errb strings.Builder
	g.stdout, g.stderr = &out, &errb
	root := &cobra.Command{Use: "corral", SilenceErrors: true, SilenceUsage: true}
	root.AddCommand(newServerCmd(g, fakeSpec(&got)))
	root.SetArgs(append([]string{"fake"}, args...))
	err := root.ExecuteContext(context.Background())
	code := 0
	if err != nil {
		code = 1
		errb.WriteString(err.Error())
	}
	return got, code, out.String(), errb.String()
}

func writeFile(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "fake.yaml")
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestServerCmdFlagsOverrideConfig(t *testing.T) {
	p := writeFile(t, "listen: 127.0.0.1:7000\ntimeout: 3s\nadmin:\n  addr: 127.0.0.1:7001\n")
	cfg, code, _, errOut := runFake(t, "--config", p, "--listen", "127.0.0.2:8000")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if cfg.Listen != "127.0.0.2:8000" || cfg.Admin.Addr != "127.0.0.1:7001" || cfg.Timeout != 3*time.Second {
		t.Errorf("cfg = %+v", cfg)
	}
}

func TestServerCmdDefaultsWithoutConfig(t *testing.T) {
	cfg, code, _, errOut := runFake(t)
	if code != 0 || cfg.Listen != "127.0.0.1:0" {
		t.Fatalf("exit %d (%s), cfg %+v", code, errOut, cfg)
	}
}

func TestServerCmdBrokenConfigsNameFileLineKey(t *testing.T) {
	tests := []struct {
		name, body string
		want       []string
	}{
		{"unknown key", "listen: x\nlisten_port: 9\n", []string{":2:", `unknown key "listen_port"`}},
		{"bad duration", "listen: x\ntimeout: fast\n", []string{":2:", "timeout", `bad duration "fast"`}},
		{"invalid value", "listen: ''\n", []string{":1:", "listen", "must not be empty"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := writeFile(t, tc.body)
			for _, args := range [][]string{{"--config", p}, {"validate", "--config", p}} {
				cfg, code, _, errOut := runFake(t, args...)
				if code == 0 || cfg != nil {
					t.Fatalf("%v: accepted a broken config", args)
				}
				for _, w := range append(tc.want, p) {
					if !strings.Contains(errOut, w) {
						t.Errorf("%v: error %q lacks %q", args, errOut, w)
					}
				}
			}
		})
	}
}

func TestServerCmdValidateOK(t *testing.T) {
	p := writeFile(t, "listen: 127.0.0.1:7000\n")
	cfg, code, out, _ := runFake(t, "validate", "--config", p)
	if code != 0 || !strings.Contains(out, "ok") || cfg != nil {
		t.Fatalf("validate: exit %d out %q (started: %v)", code, out, cfg != nil)
	}
}

func TestServerCmdEnvOverridesWithoutConfigFile(t *testing.T) {
	t.Setenv("CORRAL_FAKE_TIMEOUT", "7s")
	cfg, code, _, errOut := runFake(t)
	if code != 0 || cfg.Timeout != 7*time.Second {
		t.Fatalf("exit %d (%s), cfg %+v: CORRAL_FAKE_TIMEOUT not applied", code, errOut, cfg)
	}
	t.Setenv("CORRAL_FAKE_LISTEN", "")
	_, code, _, errOut = runFake(t)
	if code == 0 || !strings.Contains(errOut, "built-in defaults") || !strings.Contains(errOut, "must not be empty") {
		t.Fatalf("an invalid environment override was accepted: exit %d, %q", code, errOut)
	}
}

func TestServerCmdBadFlagOverride(t *testing.T) {
	_, code, _, errOut := runFake(t, "--listen", "")
	if code != 0 {
		t.Fatalf("empty --listen means no override, got exit %d %s", code, errOut)
	}
}
