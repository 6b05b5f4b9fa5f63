// Package scenario is the scenario file format shared by the cohort
// simulator (sim) and the load generator (kraken): who the devices are, how
// they arrive and leave, which client policy they follow, and the topology
// they reach (points of presence, resolvers, the DNS routing policy, the
// origins and their capacities).
//
// Load is what most callers want: it reads a YAML file strictly through
// internal/config, so an unknown key or a bad value names its file, line and
// key, rejects every key that would set an outcome (an error rate, a
// downtime, a utilisation: outcomes must come out of capacities and
// policies), fills defaults and validates the result.
//
// A file describes a fleet at full size. Scale (the population factor)
// multiplies every count of devices and every capacity, so that kraken can
// replay the same file with a thousandth of the devices against a fabric a
// thousandth the size; sim runs at Scale 1 unless asked otherwise.
//
// Sweep lists values to try for a few axes (backoff policy, overload
// behaviour, origin count); Variants expands a scenario into one Scenario
// per combination.
//
// The package imports only the backoff package and internal/config; it is
// safe to import from any floor. Scenario values are plain data and are not
// safe for concurrent mutation.
package scenario
