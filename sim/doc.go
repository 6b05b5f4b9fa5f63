// Package sim is the cohort simulator: it runs a scenario file (package
// scenario) for fleets of 1e8 devices in seconds, on the real policy code
// of corral: the reconnect policies of backoff, the DNS answer selection of
// authdns/answer, the adaptive limits and staged shedder of limit and the
// shuffle-sharded hands of shard.
//
// Devices are cohorts, never objects: the engine counts devices by flow
// (point of presence, tenant, priority) and by state: offline, waiting in
// a one-step bin of a time wheel (with the number of delays drawn and, for
// decorrelated jitter, the previous delay), connecting (a handshake queued
// at an origin) and connected (at an origin). A failed cohort draws its
// next delay by quantiles: slice i of q waits Delay(attempt, prev,
// (i+0.5)/q), so a cohort of 1e8 costs q policy calls, not 1e8; a cohort
// an origin turned away with a retry window draws within it instead
// (backoff.WindowDelay), as corral's clients do. Work per step is
// proportional to the number of cohorts.
//
// New builds a run from a validated scenario, Step advances it by one
// step, Census counts the devices by walking the structures, and Run plus
// Result give the per-step series and a Summary. Outcomes (errors, 5xx,
// downtime) come out of the capacities and policies of the scenario; the
// scenario format has no field that sets them.
//
// A Sim is not safe for concurrent use; separate Sims may run in parallel.
package sim
