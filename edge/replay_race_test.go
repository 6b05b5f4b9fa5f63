//go:build race

package edge

// rpRace reports a build with the race detector, whose bookkeeping would
// make heap measurements slow.
const rpRace = true
