package logging

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"
)

func TestNew(t *testing.T) {
	tests := []struct {
		name, level string
		format      Format
		wantErr     string
		check       func(t *testing.T, out string)
	}{
		{name: "auto on a buffer is JSON", level: "info", format: Auto, check: func(t *testing.T, out string) {
			var m map[string]any
			if err := json.Unmarshal([]byte(out), &m); err != nil || m["msg"] != "hello" {
				t.Errorf("not a JSON record: %q", out)
			}
		}},
		{name: "JSON writes a duration as text", level: "info", format: JSON, check: func(t *testing.T, out string) {
			var m map[string]any
			if err := json.Unmarshal([]byte(out), &m); err != nil || m["deadline"] != "10s" {
				t.Errorf("deadline not written as 10s: %q", out)
			}
		}},
		{name: "text", level: "INFO", format: Text, check: func(t *testing.T, out string) {
			if !strings.Contains(out, "msg=hello") {
				t.Errorf("not a text record: %q", out)
			}
		}},
		{name: "level filters info", level: "warn", format: JSON, check: func(t *testing.T, out string) {
			if out != "" {
				t.Errorf("info written at warn level: %q", out)
			}
		}},
		{name: "bad level", level: "loud", wantErr: `logging: level "loud"`},
		{name: "bad format", level: "info", format: "xml", wantErr: `logging: format "xml"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			l, err := New(&buf, tc.level, tc.format)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			l.Info("hello", "deadline", 10*time.Second)
			tc.check(t, buf.String())
		})
	}
}
