// Package backoff computes reconnect delays: no backoff, exponential backoff
// without jitter, the three jittered policies of the AWS Architecture Blog
// study "Exponential Backoff And Jitter" (full, equal and decorrelated
// jitter), and the gRPC connection backoff protocol.
//
// The package has two layers.
//
// A Policy is a pure, deterministic function. Policy.Delay(attempt, prev, u)
// maps the retry number, the previous delay and a uniform number u in [0, 1]
// to a delay, and it is monotone non-decreasing in u: Delay is the inverse
// cumulative distribution function (the quantile function) of the delay the
// policy would draw. The cohort simulator uses this to spread a cohort of a
// hundred million devices by quantiles instead of drawing a random number per
// device; Bounds gives the support of the distribution. Policies hold no
// mutable state and are safe for concurrent use.
//
// Two cautions for a quantile-driven simulator. Decorrelated jitter depends
// on the previous delay, so each slice of a cohort must carry its own prev.
// And each attempt needs fresh quantiles: feeding a slice the same u at every
// attempt makes its path perfectly correlated (the slice that drew the
// smallest delay once draws it every time), which is not the spread of
// independent clients.
//
// A Backoff is the stateful per-connection object most callers want: Next
// returns the delay before the next attempt, Reset starts over after a
// success, and Hint records a server's retry-after for the next delay. It
// draws u from an injected random source, so a seeded source reproduces a run.
// A Backoff is not safe for concurrent use; give each connection its own.
//
// Policies are named by string in configuration: "none", "exponential",
// "full", "equal", "decorrelated" and "grpc". Config (with YAML tags),
// Config.Validate, New, NewBackoff and Parse turn a name and its parameters
// into a Policy or a Backoff. The package imports no other corral package.
//
// # Server hints
//
// A server that rejects or severs a client can send a retry-after hint h.
// The hint replaces the next delay, but a herd that received the same hint
// must not come back in one wave, so the policy keeps its jitter: the delay
// is drawn uniformly from [h, h*(1+w)], where w is the relative width of the
// policy's own jitter window (0 for none and exponential, 1 for full jitter,
// 1/2 for equal jitter, multiplier-1 for decorrelated jitter, 2*jitter for
// gRPC). The hint is a floor because HTTP's Retry-After is the minimum time
// the server asks the client to wait; coming back earlier would defeat the
// server's pacing, so the spread is added above it. The hint is honoured
// even above the policy's cap (the server knows its recovery time better
// than the client's cap does), but it is clamped to Config.MaxHint so a
// buggy or hostile server cannot park its clients forever.
//
// A server that spaces its refused clients itself (corral's admission hands
// out places in a virtual queue) sends a retry window w beside the hint:
// HintWithin (or NextAfterWithin) draws the next delay uniformly from
// [h, h+w] instead, so the policy's jitter does not stretch the herd's
// return past the slots the server planned.
package backoff
