package edge

import "math/rand/v2"

// Drop cuts share (0 to 1) of the device sessions open now, chosen at
// random, each without a frame, as a routing flap or a NAT reboot would:
// the devices see a broken connection and reconnect by their backoff, and
// each session's upstream side closes as when its device went away. It
// returns how many sessions it cut. `corral up`'s "drop" control calls it.
func (e *Edge) Drop(share float64) int {
	if !(share > 0) {
		return 0
	}
	all := e.snapshotSessions()
	n := min(len(all), int(share*float64(len(all))+0.5))
	rand.Shuffle(len(all), func(i, j int) { all[i], all[j] = all[j], all[i] })
	for _, s := range all[:n] {
		s.dev.abort()
	}
	return n
}
