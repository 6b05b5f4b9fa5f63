// Package kraken is corral's storm generator: it holds many real
// WebSocket sessions per process, drives them through a scenario file (the
// format package sim runs, package scenario) against a real fleet, and
// measures how the fleet takes them back.
//
// New(scenario, Config) checks everything (a scenario key kraken cannot
// run is an error naming its file and line) and does no I/O; Run drives
// the run until it ends by itself and returns a Result. Results of agents
// of one run merge exactly (Result.Merge). See README.md for the keys it
// runs, the Result's fields and the engine.
package kraken
