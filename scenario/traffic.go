package scenario

import "time"

// Traffic is what happens to the devices over the run.
type Traffic struct {
	// Arrivals bring devices online: each opens its app and connects.
	Arrivals []Arrival `yaml:"arrivals"`
	// Disconnects drop connected devices at once (a routing flap, a deploy
	// that closes every socket); the devices reconnect by their backoff.
	Disconnects []Disconnect `yaml:"disconnects"`
	// RegionLoss takes every origin of a region down; their connections
	// drop and new attempts to them fail until the region comes back.
	RegionLoss []RegionLoss `yaml:"region_loss"`
	// Poison makes one tenant's traffic crash every origin it reaches, as
	// a poison request or a DDoS would.
	Poison []Poison `yaml:"poison"`
	// Publish sends messages through the hub publish API at a rate per
	// priority. sim does not model messages (they do not change how
	// connections come and go in its model); kraken publishes them.
	Publish []Publish `yaml:"publish"`
	// MassClose has origins close every session they hold with a retry
	// hint, as a deploy's drain does (GoAway with retry_after, then a
	// close). kraken triggers it at the target; sim refuses it (not
	// modelled yet).
	MassClose []MassClose `yaml:"mass_close"`
	// Kill stops origin processes at once: a crash (signal kill: SIGKILL,
	// every connection cut without a frame) or a freeze (signal stop:
	// SIGSTOP, the process holds its sockets and answers nothing until
	// SIGCONT). kraken acts on the target's processes; sim refuses it (not
	// modelled yet).
	Kill []Kill `yaml:"kill"`
	// Unhealthy makes origins report themselves unhealthy (their health
	// checks fail, so DNS and the edges route new sessions elsewhere)
	// while they keep serving the sessions they hold. kraken acts on the
	// target's origins; sim refuses it (not modelled yet).
	Unhealthy []Unhealthy `yaml:"unhealthy"`
	// Move sends every device of one region to another: the sessions held
	// there end and reconnect to the other region's origins, and later
	// attempts of those devices go there too (a traffic director moving a
	// region). kraken runs it; sim refuses it (not modelled yet).
	Move []Move `yaml:"move"`
}

// Kill stops origin processes.
type Kill struct {
	// At is when the processes are signalled.
	At time.Duration `yaml:"at"`
	// Origins is how many origins are signalled. Default 1.
	Origins int `yaml:"origins"`
	// Signal is "kill" (a crash, SIGKILL; default) or "stop" (a freeze,
	// SIGSTOP, resumed with SIGCONT after For).
	Signal string `yaml:"signal"`
	// For is how long a stopped process stays frozen; 0 means until the
	// end of the run (it is resumed then). It applies to signal stop only.
	For time.Duration `yaml:"for"`
}

// Unhealthy is a time some origins fail their health checks.
type Unhealthy struct {
	// At is when the origins turn unhealthy.
	At time.Duration `yaml:"at"`
	// Origins is how many origins turn unhealthy. Default 1.
	Origins int `yaml:"origins"`
	// For is how long they stay unhealthy; 0 means until the end of the
	// run.
	For time.Duration `yaml:"for"`
}

// Move sends the devices of a region to another region.
type Move struct {
	// At is when the devices move.
	At time.Duration `yaml:"at"`
	// From is the region (of origins[].region) whose devices move.
	From string `yaml:"from"`
	// To is the region they reconnect to, for the rest of the run.
	To string `yaml:"to"`
}

// Publish is a stream of messages at a constant rate.
type Publish struct {
	// At is when the stream starts.
	At time.Duration `yaml:"at"`
	// For is how long it lasts (required).
	For time.Duration `yaml:"for"`
	// Priority names a class of population.priorities; its rank (first
	// P0, then P1, P2) is the messages' priority.
	Priority string `yaml:"priority"`
	// PerSecond is the rate of publishes, spread round-robin over every
	// tenant's channels. It is not scaled by scale (each message reaches
	// every subscriber, so deliveries scale with the population).
	PerSecond float64 `yaml:"per_second"`
}

// MassClose is a server-side close of every session of some origins.
type MassClose struct {
	// At is when the origins close their sessions.
	At time.Duration `yaml:"at"`
	// Origins is how many origins close (each all of its sessions).
	// Default 1.
	Origins int `yaml:"origins"`
}

// Stop ends a run before its duration. Every run ends at duration at the
// latest.
type Stop struct {
	// OnRecovery ends the run once every arrival, storm and publish has
	// started and every device that dropped is connected again.
	OnRecovery bool `yaml:"on_recovery"`
	// MaxAttempts ends the run once the devices have made this many
	// connection attempts (0: no bound). It is not scaled.
	MaxAttempts int64 `yaml:"max_attempts"`
}

// Arrival is a wave of devices coming online.
type Arrival struct {
	// At is when the wave starts.
	At time.Duration `yaml:"at"`
	// Over is how long the wave lasts; devices arrive at a constant rate
	// within it. 0 means all in the step of At.
	Over time.Duration `yaml:"over"`
	// Devices is the number of devices in the wave.
	Devices int64 `yaml:"devices"`
}

// Disconnect drops a share of the connected devices.
type Disconnect struct {
	// At is when the drop starts.
	At time.Duration `yaml:"at"`
	// Over spreads the drop evenly; 0 means within the step of At.
	Over time.Duration `yaml:"over"`
	// Share of the devices connected at At that drop, in (0, 1].
	Share float64 `yaml:"share"`
	// Region limits the drop to origins of that region; empty means all.
	Region string `yaml:"region"`
}

// RegionLoss takes a region down.
type RegionLoss struct {
	// At is when the region goes dark.
	At time.Duration `yaml:"at"`
	// Region names the origins' region.
	Region string `yaml:"region"`
	// For is how long it stays down; 0 means until the end of the run.
	For time.Duration `yaml:"for"`
}

// Poison is a tenant whose traffic crashes the origins it reaches.
type Poison struct {
	// At is when the poison traffic starts.
	At time.Duration `yaml:"at"`
	// Tenant is the index of the poison tenant, from 0.
	Tenant int `yaml:"tenant"`
}

// SimOptions tune the simulator's numerics. They change resolution, never
// what is modelled.
type SimOptions struct {
	// Quantiles is the number of slices a cohort is cut into when it draws
	// a backoff delay: slice i waits Delay(attempt, prev, (i+0.5)/Quantiles).
	// Default 64.
	Quantiles int `yaml:"quantiles"`
	// Draws is the number of runs of each variant, at the seeds Seed,
	// Seed+1, ..., Seed+Draws-1: the resolvers' answers, the shuffle hands
	// and the rounding offsets are random draws, so an outcome that
	// depends on them is a distribution, reported as one (median, worst,
	// how many draws had failures). Default 1; at most 1000. kraken ignores
	// it (a real fleet is one draw).
	Draws int `yaml:"draws"`
}
