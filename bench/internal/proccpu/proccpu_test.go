package proccpu

import (
	"testing"
	"time"
)

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		name string
		line string
		want Times
	}{
		{"plain name", "4242 (corral) S 1 4242 4242 0 -1 4194560 812 0 0 0 130 27 0 0 20 0 5 0 100 0 0\n", Times{User: 1300 * time.Millisecond, Sys: 270 * time.Millisecond}},
		{"a name with spaces and a parenthesis", "7 (a (b) c) R 1 7 7 0 -1 0 0 0 0 0 5 7 0 0\n", Times{User: 50 * time.Millisecond, Sys: 70 * time.Millisecond}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Parse(tc.line)
			if err != nil || got != tc.want {
				t.Fatalf("Parse = %v, %v; want %v", got, err, tc.want)
			}
		})
	}
	for _, bad := range []string{"", "1 (x) S 1 2", "1 (x) S 1 2 3 4 5 6 7 8 9 10 u s"} {
		if _, err := Parse(bad); err == nil {
			t.Errorf("Parse(%q) took it", bad)
		}
	}
}
