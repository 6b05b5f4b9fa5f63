package answer

import "time"

// WindowPhases is the resolution of the sliding window over which
// resolver-aware answers measure each resolver's share of the queries:
// a resolver's queries in the window are the current window's count
// plus the previous window's weighted by the part of it still inside the
// sliding window, in eighths; the classes are decided again every
// window/WindowPhases. authdns's resolver tables and the simulator's
// resolvers both count so.
const WindowPhases = 8

// DefaultClassWindow is the window over which resolvers' query shares are
// measured when none is configured: a TTL's worth of queries at the
// default TTL (authdns's resolvers.window).
const DefaultClassWindow = 60 * time.Second

// WindowAt returns the window that elapsed (the time since counting
// started; a negative one counts as 0) falls in for windows of length
// window: its number, from 1, and the phase within it, in
// [0, WindowPhases). window must be positive.
func WindowAt(elapsed, window time.Duration) (epoch, phase uint64) {
	elapsed = max(elapsed, 0)
	return 1 + uint64(elapsed/window), uint64(elapsed%window) * WindowPhases / uint64(window)
}

// WindowQueries returns the queries in the sliding window that ends at
// phase of the current window, of prev queries counted in the previous
// window and cur in the current one: cur plus the part of prev still
// inside, rounded down to whole queries (a single query of the previous
// window counts 0 from the window's second phase on). phase must be below
// WindowPhases.
func WindowQueries(prev, cur, phase uint64) uint64 {
	return cur + prev*(WindowPhases-phase)/WindowPhases
}
