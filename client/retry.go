package client

import (
	"time"

	"github.com/corralhq/corral/backoff"
	"github.com/corralhq/corral/wire/corralv1"
)

// newRetry returns a client's reconnect schedule, drawing from rnd (nil:
// the process-wide generator): cfg.Backoff when it names a policy, else
// full jitter from ReconnectMin, doubling up to ReconnectMax. The base and
// cap a server advertised in Welcome (hints, nil for none) replace the
// schedule's when set, the cap raised to the base if below it: the server
// knows how many clients it can take back how fast.
func newRetry(cfg Config, hints *corralv1.ServerHints, rnd backoff.Rand) (*backoff.Backoff, error) {
	bc := backoff.Config{Base: cfg.ReconnectMin, Cap: max(cfg.ReconnectMax, cfg.ReconnectMin), MaxHint: cfg.Backoff.MaxHint}
	if cfg.Backoff.Policy != "" {
		bc = cfg.Backoff
	}
	bc, err := bc.WithDefaults()
	if err != nil {
		return nil, err
	}
	bc = bc.Envelope(time.Duration(hints.GetReconnectBaseMs())*time.Millisecond, time.Duration(hints.GetReconnectCapMs())*time.Millisecond)
	return backoff.NewBackoff(bc, rnd)
}
