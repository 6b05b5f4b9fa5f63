// Package health runs active health checks, in the manner of Route 53
// health checks, and answers which named checks are healthy.
//
// A check probes a target every interval (30 s by default): an http check
// passes on a 2xx or 3xx answer, optionally with a string in the first
// 5,120 bytes of the body; a tcp check passes when a connection opens; a
// grpc check passes when the gRPC health protocol answers SERVING. A
// calculated check is healthy when at least N of its M named children are.
// A healthy check turns unhealthy after FailureThreshold consecutive failed
// probes (3 by default, 1 to 10) and back after SuccessThreshold
// consecutive passed ones (the same number unless set). Every check starts
// healthy unless its Initial says "unhealthy", and the first probe of each
// check comes at a random point of its first interval, so that many checks
// do not fire together.
//
// The Checker is what most callers want. Its shape is the one of every
// corral server: Config (with YAML tags) -> Validate -> New (no I/O, no
// goroutines) -> Run (blocks) -> Shutdown. Update replaces the checks on a
// configuration reload, keeping the state of the checks whose definition
// did not change.
//
// Servers read states through the View interface. Checker.Healthy is
// lock-free and allocation-free, cheap enough for the DNS answer path; the
// Static map is a View with fixed states for tests and the cohort
// simulator. A View answers false for a name it does not know: a record
// without a check is healthy because its server does not ask, and servers
// reject references to unknown checks with Config.Has when they validate
// their own configuration.
//
// Changes of state are logged with log/slog, counted in Prometheus metrics
// and passed to Subscribe callbacks. Checker.Handler is a status page (HTML
// or JSON) that servers mount on their admin listener. Force pins a check
// to a state for tests and drills.
//
// The package imports nothing of corral but internal/config.
package health
