package answer

import (
	"testing"
	"time"
)

// TestWindow: WindowAt numbers the windows from 1 and cuts each into
// eighths; WindowQueries adds the part of the previous window still
// inside, in whole queries.
func TestWindow(t *testing.T) {
	for _, tc := range []struct {
		elapsed      time.Duration
		epoch, phase uint64
	}{
		{-time.Second, 1, 0}, {0, 1, 0}, {7499 * time.Millisecond, 1, 0}, {7500 * time.Millisecond, 1, 1},
		{59 * time.Second, 1, 7}, {60 * time.Second, 2, 0}, {135 * time.Second, 3, 2},
	} {
		if e, p := WindowAt(tc.elapsed, time.Minute); e != tc.epoch || p != tc.phase {
			t.Errorf("WindowAt(%v, 1m) = %d, %d; want %d, %d", tc.elapsed, e, p, tc.epoch, tc.phase)
		}
	}
	for _, tc := range []struct{ prev, cur, phase, want uint64 }{
		{80, 5, 0, 85}, {80, 5, 2, 65}, {80, 5, 7, 15}, {1, 0, 0, 1}, {1, 0, 1, 0}, {0, 3, 4, 3},
	} {
		if got := WindowQueries(tc.prev, tc.cur, tc.phase); got != tc.want {
			t.Errorf("WindowQueries(%d, %d, %d) = %d, want %d", tc.prev, tc.cur, tc.phase, got, tc.want)
		}
	}
}
