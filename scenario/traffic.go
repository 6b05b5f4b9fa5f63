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
}
