//go:build race

package hub

// relayRace reports a build with the race detector, whose bookkeeping
// makes heap and allocation figures meaningless.
const relayRace = true
