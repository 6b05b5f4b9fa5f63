package config

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

type checkCfg struct {
	Interval time.Duration `yaml:"interval"`
	Path     string        `yaml:"path"`
}

type recordCfg struct {
	Name   string    `yaml:"name"`
	Weight int       `yaml:"weight"`
	Check  *checkCfg `yaml:"check"`
}

type testCfg struct {
	Listen  string        `yaml:"listen"`
	Timeout time.Duration `yaml:"timeout"`
	Admin   struct {
		Addr string `yaml:"addr"`
	} `yaml:"admin"`
	Records []recordCfg `yaml:"records"`
	Tags    []string    `yaml:"tags"`
	Workers int         `yaml:"workers"`
}

func (c *testCfg) Validate() error {
	if c.Workers < 0 {
		return Errorf("workers", "must be at least 0, got %d", c.Workers)
	}
	for i, r := range c.Records {
		if r.Weight > 255 {
			return Field("records", Errorf(fmt.Sprintf("[%d].weight", i), "must be at most 255, got %d", r.Weight))
		}
	}
	return nil
}

func TestDecodeErrorsNameFileLineAndKey(t *testing.T) {
	tests := []struct {
		name string
		yaml string
		want []string // substrings the message must hold
	}{
		{
			name: "unknown top-level key",
			yaml: "listen: 127.0.0.1:53\nlisten_addr: x\n",
			want: []string{"cfg.yaml:2:", `unknown key "listen_addr"`},
		},
		{
			name: "unknown nested key",
			yaml: "records:\n  - name: a\n    wieght: 3\n",
			want: []string{"cfg.yaml:3:", `unknown key "wieght"`},
		},
		{
			name: "bad duration at top level",
			yaml: "listen: x\ntimeout: 10 seconds\n",
			want: []string{"cfg.yaml:2:", "timeout:", `bad duration "10 seconds"`},
		},
		{
			name: "bad duration deep in a list",
			yaml: "records:\n  - name: a\n  - name: b\n    check:\n      interval: 3x\n",
			want: []string{"cfg.yaml:5:", "records[1].check.interval:", `bad duration "3x"`},
		},
		{
			name: "wrong type",
			yaml: "workers: many\n",
			want: []string{"cfg.yaml:1:", "workers:", `"many" is not a whole number`},
		},
		{
			name: "invalid value from Validate",
			yaml: "listen: x\nworkers: -2\n",
			want: []string{"cfg.yaml:2:", "workers:", "must be at least 0"},
		},
		{
			name: "invalid nested value from Validate",
			yaml: "records:\n  - name: a\n  - name: b\n    weight: 300\n",
			want: []string{"cfg.yaml:4:", "records[1].weight:", "at most 255"},
		},
		{
			name: "YAML tag where a list is expected",
			yaml: "tags: !x\n",
			want: []string{"cfg.yaml:1:", "tags:", `YAML tag "!x" is not supported`},
		},
		{
			name: "syntax error",
			yaml: "listen: [\n",
			want: []string{"cfg.yaml:"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var c testCfg
			err := Decode("cfg.yaml", []byte(tc.yaml), &c, Options{})
			if err == nil {
				t.Fatalf("Decode accepted %q", tc.yaml)
			}
			msg := err.Error()
			if !strings.HasPrefix(msg, "config: ") {
				t.Errorf("message %q does not start with the package name", msg)
			}
			for _, w := range tc.want {
				if !strings.Contains(msg, w) {
					t.Errorf("message %q lacks %q", msg, w)
				}
			}
		})
	}
}

func TestDecodeKeepsDefaultsAndReadsValues(t *testing.T) {
	c := testCfg{Listen: "default", Timeout: time.Second, Workers: 4}
	y := "timeout: 250ms\nrecords:\n  - name: a\n    weight: 3\n    check: {interval: 10s, path: /healthz}\n"
	if err := Decode("cfg.yaml", []byte(y), &c, Options{}); err != nil {
		t.Fatal(err)
	}
	if c.Listen != "default" || c.Workers != 4 {
		t.Errorf("defaults lost: %+v", c)
	}
	if c.Timeout != 250*time.Millisecond {
		t.Errorf("timeout = %v, want 250ms", c.Timeout)
	}
	if len(c.Records) != 1 || c.Records[0].Check == nil || c.Records[0].Check.Interval != 10*time.Second {
		t.Errorf("records = %+v", c.Records)
	}
}

func TestEnvOverrides(t *testing.T) {
	env := []string{
		"CORRAL_TEST_LISTEN=127.0.0.1:9",
		"CORRAL_TEST_ADMIN_ADDR=127.0.0.1:10",
		"CORRAL_TEST_TIMEOUT=3s",
		"CORRAL_TEST_TAGS=a, b,c",
		"OTHER=1",
	}
	var c testCfg
	if err := Decode("cfg.yaml", []byte("listen: x\n"), &c, Options{EnvPrefix: "CORRAL_TEST", Environ: env}); err != nil {
		t.Fatal(err)
	}
	if c.Listen != "127.0.0.1:9" || c.Admin.Addr != "127.0.0.1:10" || c.Timeout != 3*time.Second {
		t.Errorf("overrides not applied: %+v", c)
	}
	if strings.Join(c.Tags, "|") != "a|b|c" {
		t.Errorf("tags = %q", c.Tags)
	}

	tests := []struct {
		name, env, want string
	}{
		{"unknown variable", "CORRAL_TEST_LISTN=1", "CORRAL_TEST_LISTN names no configuration key"},
		{"bad duration", "CORRAL_TEST_TIMEOUT=soon", "CORRAL_TEST_TIMEOUT"},
		{"bad integer", "CORRAL_TEST_WORKERS=two", "want a whole number"},
		{"invalid after override", "CORRAL_TEST_WORKERS=-1", "must be at least 0"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var c testCfg
			err := Decode("cfg.yaml", []byte("listen: x\n"), &c, Options{EnvPrefix: "CORRAL_TEST", Environ: []string{tc.env}})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want it to mention %q", err, tc.want)
			}
		})
	}
}

func TestLoadMissingFile(t *testing.T) {
	var c testCfg
	err := Load(filepath.Join(t.TempDir(), "nope.yaml"), &c, Options{})
	if err == nil || !strings.Contains(err.Error(), "nope.yaml") {
		t.Fatalf("err = %v, want it to name the file", err)
	}
}

func TestLoadFile(t *testing.T) {
	p := filepath.Join(t.TempDir(), "hub.yaml")
	if err := os.WriteFile(p, []byte("listen: a\nbogus: 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var c testCfg
	err := Load(p, &c, Options{})
	if err == nil || !strings.Contains(err.Error(), p+":2:") || !strings.Contains(err.Error(), `"bogus"`) {
		t.Fatalf("err = %v", err)
	}
}

func TestDecodeRejectsNonStruct(t *testing.T) {
	var n int
	if err := Decode("x", []byte("1"), &n, Options{}); err == nil {
		t.Fatal("Decode into *int succeeded")
	}
}

func TestFieldPrefixesJoinedErrors(t *testing.T) {
	err := Field("zones[2]", Errorf("ttl", "too long"))
	if got := err.Error(); got != "zones[2].ttl: too long" {
		t.Errorf("got %q", got)
	}
	if Field("x", nil) != nil {
		t.Error("Field of nil is not nil")
	}
}

func FuzzDecode(f *testing.F) {
	for _, s := range []string{
		"listen: x\n",
		"records:\n  - name: a\n    check: {interval: 1s}\n",
		"tags: !x\n",
		"timeout: &a 1s\nlisten: *a\n",
		"records: [1, {x: }]\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var c testCfg
		_ = Decode("fuzz.yaml", data, &c, Options{})
	})
}
