// Package limit finds how much concurrent work a node can take from the
// latency it measures, and decides by priority what to turn away when that
// is not enough.
//
// It has three small, separate parts:
//
//   - Limit is the algorithm: samples (start, latency, in-flight, dropped)
//     in, a limit out. Gradient (the default), Gradient2, Vegas, AIMD and
//     Fixed implement it. The cohort simulator calls Update directly, with
//     one aggregated Sample per simulated step and simulated times.
//   - Limiter is admission: TryAcquire takes a slot with a compare-and-swap
//     so in-flight never exceeds the limit, and returns a Token whose
//     Success, Ignore or Drop releases the slot and feeds the Limit. It
//     allocates nothing.
//   - Shedder is staged priority shedding with hysteresis: from latency
//     against a target and resource pressure it moves through six stages
//     (normal, reject new P2, sever P2, reject new P1, sever P1, lifeboat)
//     and answers Admit and SeverQuota with retry-after hints spread by
//     jitter. It owns no sockets.
//
// Every method that reads the clock has an explicit-time variant (TryAcquireAt,
// SuccessAt, AdmitAt, SeverQuotaAt) and every constructor takes a Config
// with an optional injected Clock, so tests and simulations are
// deterministic and never sleep. Metrics are exported by a Collector
// registered on a caller's prometheus.Registerer, or read as plain
// snapshots.
//
// The package imports no server package of corral.
package limit
