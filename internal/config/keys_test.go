package config

import (
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestUnknownKeysAllAtOnceInLineOrder decodes a file with three unknown
// keys at three levels many times: every run names all three, in the order
// of the file, with the nearest known key where one is close.
func TestUnknownKeysAllAtOnceInLineOrder(t *testing.T) {
	y := "listen: x\ntimout: 1s\nrecords:\n  - name: a\n    wieght: 3\n    check: {intervl: 1s, path: /}\nworkers: 2\nbogus: 1\n"
	want := `config: cfg.yaml:2:1: timout: unknown key "timout" (did you mean "timeout"?)
cfg.yaml:5:5: records[0].wieght: unknown key "wieght" (did you mean "weight"?)
cfg.yaml:6:13: records[0].check.intervl: unknown key "intervl" (did you mean "interval"?)
cfg.yaml:8:1: bogus: unknown key "bogus"`
	for range 50 {
		var c testCfg
		err := Decode("cfg.yaml", []byte(y), &c, Options{})
		if err == nil {
			t.Fatal("Decode accepted unknown keys")
		}
		if err.Error() != want {
			t.Fatalf("got\n%s\nwant\n%s", err, want)
		}
	}
}

func TestSuggest(t *testing.T) {
	known := []string{"ttl", "policy", "values", "interval", "name", "n", "locations"}
	for key, want := range map[string]string{
		"tll": "ttl", "polcy": "policy", "value": "values", "intreval": "interval",
		"nmae": "name", "location": "locations", "zzz": "", "x": "n", "weight": "",
	} {
		if got := suggest(key, known); got != want {
			t.Errorf("suggest(%q) = %q, want %q", key, got, want)
		}
	}
}

// TestDurationsTakeUnitsOrSeconds: a duration is a number with a unit or
// plain seconds, in the file and in the environment.
func TestDurationsTakeUnitsOrSeconds(t *testing.T) {
	for _, tc := range []struct {
		yaml string
		want time.Duration
	}{
		{"timeout: 60s", time.Minute},
		{"timeout: 60", time.Minute},
		{"timeout: 1.5", 1500 * time.Millisecond},
		{"timeout: '90'", 90 * time.Second},
		{"timeout: 1m30s", 90 * time.Second},
		{"timeout: 0", 0},
		{"timeout: 1w", 7 * 24 * time.Hour},
		{"timeout: 2d12h", 60 * time.Hour},
		{"timeout: 1.5d", 36 * time.Hour},
	} {
		var c testCfg
		if err := Decode("cfg.yaml", []byte(tc.yaml), &c, Options{}); err != nil {
			t.Errorf("%q: %v", tc.yaml, err)
		} else if c.Timeout != tc.want {
			t.Errorf("%q: %v, want %v", tc.yaml, c.Timeout, tc.want)
		}
	}
	var c testCfg
	if err := Decode("cfg.yaml", nil, &c, Options{EnvPrefix: "CORRAL_TEST", Environ: []string{"CORRAL_TEST_TIMEOUT=45"}}); err != nil || c.Timeout != 45*time.Second {
		t.Errorf("CORRAL_TEST_TIMEOUT=45: %v, %v", c.Timeout, err)
	}
	var d testCfg
	err := Decode("cfg.yaml", []byte("timeout: soon\n"), &d, Options{})
	if err == nil || !strings.Contains(err.Error(), "plain seconds") {
		t.Errorf("a bad duration: %v, want the message to say what is wanted", err)
	}
}

// goType matches the names of Go types a message must not hold.
var goType = regexp.MustCompile(`\b(u?int(8|16|32|64)?|float(32|64)|complex(64|128))\b|time\.Duration|interface \{\}|\[\]\w+|map\[|Go (value|struct)|reflect\.`)

type kindsCfg struct {
	U8   uint8               `yaml:"u8"`
	U32  uint32              `yaml:"u32"`
	I    int                 `yaml:"i"`
	F    float64             `yaml:"f"`
	B    bool                `yaml:"b"`
	S    string              `yaml:"s"`
	D    time.Duration       `yaml:"d"`
	L    []string            `yaml:"l"`
	M    map[string]int      `yaml:"m"`
	St   struct{ A int }     `yaml:"st"`
	ML   map[string][]string `yaml:"ml"`
	Deep []struct {
		X []int `yaml:"x"`
	} `yaml:"deep"`
}

// TestMessagesNameNoGoType feeds a value of the wrong kind or range to
// every kind of key: the message says what is wanted in the words of the
// file, never with a Go type.
func TestMessagesNameNoGoType(t *testing.T) {
	for _, y := range []string{
		"u8: 300", "u8: -1", "u32: -1", "u32: 1.5", "u32: 60s", "u8: 99999999999999999999999",
		"i: x", "i: 1.5", "f: x", "b: maybe", "b: 1", "s: [a]", "s: {a: 1}",
		"d: [1]", "d: true", "d: 10 seconds", "d: 1e400", "l: a", "l: {a: 1}", "m: [1]", "m: {a: x}",
		"st: 1", "st: [1]", "ml: {a: 1}", "deep: [{x: [a]}]", "deep: {x: 1}",
	} {
		var c kindsCfg
		err := Decode("k.yaml", []byte(y), &c, Options{})
		if err == nil {
			t.Errorf("%q accepted", y)
			continue
		}
		if m := goType.FindString(err.Error()); m != "" {
			t.Errorf("%q: message names the Go type %q: %v", y, m, err)
		}
		if !strings.HasPrefix(err.Error(), "config: k.yaml:1:") {
			t.Errorf("%q: message does not name the file and line: %v", y, err)
		}
	}
	var c kindsCfg
	for _, env := range []string{"CORRAL_K_U8=300", "CORRAL_K_I=x", "CORRAL_K_D=x", "CORRAL_K_M=1"} {
		err := Decode("k.yaml", nil, &c, Options{EnvPrefix: "CORRAL_K", Environ: []string{env}})
		if err == nil {
			t.Errorf("%s accepted", env)
		} else if m := goType.FindString(err.Error()); m != "" {
			t.Errorf("%s: message names the Go type %q: %v", env, m, err)
		}
	}
}
