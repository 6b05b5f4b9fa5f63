package client

import (
	"time"

	"github.com/corralhq/corral/backoff"
)

// newRetry returns a client's reconnect schedule, drawing from rnd (nil:
// the process-wide generator): cfg.Backoff when it names a policy, else
// full jitter from ReconnectMin, doubling up to ReconnectMax.
func newRetry(cfg Config, rnd backoff.Rand) (*backoff.Backoff, error) {
	if cfg.Backoff.Policy != "" {
		return backoff.NewBackoff(cfg.Backoff, rnd)
	}
	return backoff.NewBackoff(backoff.Config{Base: cfg.ReconnectMin, Cap: max(cfg.ReconnectMax, cfg.ReconnectMin), MaxHint: cfg.Backoff.MaxHint}, rnd)
}

// retryDelay returns how long to wait before the next connection attempt:
// the schedule's next delay, or, after a server's retry hint, a delay
// drawn above the hint by package backoff's hint code (Backoff.Hint, then
// Next: Policy.HintDelay, the one the simulator calls for its cohorts).
// Waiting the larger of the hint and the schedule's delay would land every
// device given the same hint on the hint itself, in lock-step: the herd
// the hint was meant to spread.
func retryDelay(retry *backoff.Backoff, hint time.Duration) time.Duration {
	retry.Hint(hint)
	return retry.Next()
}
